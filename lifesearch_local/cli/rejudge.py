"""`lifesearch rejudge RUN_DIR --sample N`: judge a sample of recorded decisions again and say how far they moved."""

from __future__ import annotations

import argparse
import json

from lifesearch_local.cli.common import positive_int, seed_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rejudge",
        help="replay a sample of a run's decisions: do they reproduce?",
        description="Judge N recorded decisions of a run directory again, each with the settings its judge "
        "recorded (config.yaml, else the manifest's stage_configs), in this process, on the same tasks and "
        "reports, and print {sampled, max_abs_dp, flips}: the largest |p_true now − p_true recorded| and "
        "the verdicts that changed, with how each judge's fingerprint (weights, engine and version, dtype, "
        "prompts, schema, kernel form) differs from the recorded one. The replay is recorded in the "
        "manifest (`replays`) and shown by `lifesearch report`. The judgments file is not changed.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="run directory with judgments.jsonl and manifest.json")
    p.add_argument("--sample", type=positive_int, required=True, metavar="N", help="decisions to judge again")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the sample (default 0)")
    p.add_argument("--judge", metavar="ID", help="replay only this judge's decisions")
    p.add_argument("--json", action="store_true", help="print the replay as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.run.rejudge import rejudge

    replay = rejudge(args.run_dir, args.sample, seed=args.seed, judge=args.judge)
    if args.json:
        print(json.dumps(replay.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return 0
    dp = "—" if replay.max_abs_dp is None else f"{replay.max_abs_dp:.3g}"
    print(f"sampled {replay.sampled} of {replay.eligible} decisions (seed {replay.seed}): max |Δp_true| {dp}, "
          f"{replay.flips} flipped verdict(s); {replay.wall_s} s")
    for judge, diffs in replay.judges.items():
        print(f"judge {judge}: " + ("same fingerprint as recorded" if not diffs else "fingerprint differs: "
                                    + "; ".join(diffs)))
    print(f"recorded in {args.run_dir}/manifest.json (`lifesearch report {args.run_dir}` shows it)")
    return 0
