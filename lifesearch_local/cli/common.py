"""What several commands share: argument types, judge and Ray settings from arguments, result printing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def int_at_least(lo: int):
    """argparse type: an integer ≥ lo (argparse reports a non-integer itself)."""
    def parse(value: str) -> int:
        n = int(value)
        if n < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, got {n}")
        return n

    parse.__name__ = "int"  # argparse names the type in "invalid int value"
    return parse


positive_int = int_at_least(1)


def runs_int(value: str) -> int:
    """argparse type of every --runs: 1 to MAX_RUNS (a larger count is refused, not enumerated)."""
    from lifesearch_local.judge.config import MAX_RUNS

    n = positive_int(value)
    if n > MAX_RUNS:
        raise argparse.ArgumentTypeError(f"at most {MAX_RUNS:,} runs, got {n:,}")
    return n


runs_int.__name__ = "int"
SEED_MAX = 2**64 - 1


def seed_int(value: str) -> int:
    """argparse type of every --seed: an integer from 0 to 2^64 - 1 (numpy's SeedSequence and torch
    take no negative seed; a negative one used to end in a numpy traceback)."""
    n = int(value)
    if not 0 <= n <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"a seed is an integer from 0 to {SEED_MAX}, got {n}")
    return n


seed_int.__name__ = "int"  # argparse names the type in "invalid int value"


def id_arg(value: str) -> str:
    """argparse type of an id given as an argument (`--agent`, `panel --id`): no control character,
    not blank, refused where it enters (not as a traceback from the first record that carries it)."""
    from lifesearch_local.records import id_problem

    problem = id_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(f"not an id: {problem}")
    return value


def id_prefix_arg(value: str) -> str:
    """argparse type of `--id-prefix`: may be empty, never holds a control character."""
    return id_arg(value) if value else value


id_arg.__name__ = id_prefix_arg.__name__ = "id"
MAX_TASK_IDS_BYTES = 4 * 1024 * 1024  # about 200,000 ids; /dev/zero would otherwise be read until memory ran out


def add_task_ids(p: argparse.ArgumentParser) -> None:
    """--task-ids A,B,… and --task-ids-file FILE: only these tasks (read by `selected_task_ids`)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--task-ids", action="append", metavar="ID[,ID…]",
                   help="only these tasks, by their ids in the tasks file (comma-separated; may be repeated)")
    g.add_argument("--task-ids-file", metavar="FILE",
                   help="only the tasks whose ids FILE lists, one per line (blank lines and # comments skipped)")


def add_wide(p: argparse.ArgumentParser) -> None:
    """--wide: tables at their full width (names never cut), whatever COLUMNS or the terminal say."""
    p.add_argument("--wide", action="store_true",
                   help="print tables at their full width, names never cut (default: COLUMNS, else the terminal's "
                   "width; piped output is always full width)")


def selected_task_ids(args: argparse.Namespace) -> set[str] | None:
    """The task ids of --task-ids / --task-ids-file, or None when neither was given (all tasks)."""
    from lifesearch_local.errors import LifesearchError

    if getattr(args, "task_ids", None):
        ids = {i.strip() for value in args.task_ids for i in value.split(",") if i.strip()}
        if not ids:
            raise LifesearchError("--task-ids: no task id given")
        from lifesearch_local.records import id_problem

        for i in sorted(ids):
            if id_problem(i):
                raise LifesearchError(f"--task-ids: not a task id: {id_problem(i)}")
        return ids
    path = getattr(args, "task_ids_file", None)
    if not path:
        return None
    return read_task_ids(path)


def read_task_ids(path: str) -> set[str]:
    """The ids FILE lists, one per line (read to MAX_TASK_IDS_BYTES; a pipe or `<(…)` works), each
    remembering its FILE:LINE so that no error echoes a line of the file (it may be a private one)."""
    from lifesearch_local.errors import InputError
    from lifesearch_local.records import id_problem
    from lifesearch_local.tasks import TaskIds

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TASK_IDS_BYTES + 1)
    except OSError as e:
        raise InputError(path, None, None, f"cannot read the task ids: {e.strerror or e}") from None
    if len(data) > MAX_TASK_IDS_BYTES:
        raise InputError(path, None, None, f"over {MAX_TASK_IDS_BYTES:,} bytes: not a list of task ids")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, None, None, f"not UTF-8 text at byte {e.start}") from None
    ids = TaskIds()
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        problem = id_problem(s)
        if problem:
            raise InputError(path, lineno, None, f"not a task id: {problem}")
        ids.add(s)
        ids.where.setdefault(s, f"{path}:{lineno}")
    if not ids:
        raise InputError(path, None, None, "lists no task ids (one per line)")
    return ids


def no_limit_with_ids(args: argparse.Namespace) -> None:
    """`--limit N` (the first N tasks) and `--task-ids` select tasks two ways: one at a time."""
    from lifesearch_local.errors import LifesearchError

    if getattr(args, "limit", None) is not None:
        raise LifesearchError("--limit and --task-ids/--task-ids-file both select tasks; pass one of them")


def add_generate_options(p: argparse.ArgumentParser, max_tokens_help: str) -> None:
    """--max-tokens and --retries of a generate-mode judge (read by `judge_configs`)."""
    p.add_argument("--max-tokens", type=int_at_least(8), metavar="N", help=max_tokens_help)
    p.add_argument("--retries", type=int, choices=range(0, 11), metavar="N",
                   help="generate mode: attempts after an answer that is not the JSON verdict (default 2)")


def add_kernel(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--kernel: the hf engine's choice-scoring form (None leaves the config's)."""
    from serving import KERNEL_FORMS

    p.add_argument("--kernel", default=default, choices=KERNEL_FORMS, help="hf engine: choice-scoring form (default auto)")


def add_device(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--device: where the hf engine runs (None leaves the config's)."""
    from serving import DEVICES

    p.add_argument("--device", default=default, choices=DEVICES, help="hf engine device (default auto)")


def add_force_config(p: argparse.ArgumentParser, records: str) -> None:
    """--force-config: continue `records` that another config made (the stage skeleton refuses by default)."""
    p.add_argument("--force-config", action="store_true",
                   help=f"add to {records} that another config made (normally refused)")


def add_calibration(p: argparse.ArgumentParser) -> None:
    """--calibrate / --no-calibrate of an estimate (read by `calibration`)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--calibrate", action="store_true",
                   help="estimate: time the configured engines now even where a stored profile exists")
    g.add_argument("--no-calibrate", action="store_true",
                   help="estimate: load no model; times only from stored profiles (unknown without one)")


def calibration(args: argparse.Namespace) -> str:
    """auto (stored profiles, calibrating what is missing), always, or never."""
    return "always" if args.calibrate else "never" if args.no_calibrate else "auto"


def add_quiet(p: argparse.ArgumentParser) -> None:
    """--quiet: no progress bars."""
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def judge_configs(args: argparse.Namespace):
    """The judge configs of --config (or the one of --model), with the command line's settings over them."""
    return _judges(args)[0]


def judge_settings(args: argparse.Namespace):
    """`judge_configs` and the Ray settings, from one reading of --config: its top-level `ray:` block unless
    --no-ray (not read then); without one, a local cluster with one replica for --ray, else None (in-process)."""
    from lifesearch_local.configfile import validate_config
    from serving import RayConfig

    judges, block = _judges(args)
    if args.ray is False:
        return judges, None
    if block is not None:
        return judges, validate_config(RayConfig, block, args.config)
    return judges, RayConfig() if args.ray else None


def _judges(args: argparse.Namespace) -> tuple[list, dict[str, Any] | None]:
    """The judge configs with --kernel, --device, --mode, --runs, --id, --max-tokens, --retries over them, and
    the file's `ray:` block as written."""
    from pydantic import ValidationError

    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.judge.config import JudgeConfig
    from lifesearch_local.run.config import load_judge_file
    from lifesearch_local.rundir.jsonl import validation_field
    from serving import model_config

    if args.config:
        cfgs, block = load_judge_file(args.config)
    else:
        cfgs, block = [JudgeConfig(id=args.id, model=model_config(model=args.model), mode=args.mode or "choice")], None
    model_upd = {k: v for k, v in (("kernel", args.kernel), ("device", args.device)) if v}
    upd = {k: v for k, v in (("mode", args.mode), ("runs", args.runs), ("id", args.id), ("max_tokens", args.max_tokens))
           if v}
    if args.retries is not None:  # 0 is a value here
        upd["retries"] = args.retries
    try:
        return [c.updated(model=model_upd, **upd) for c in cfgs], block
    except ValidationError as e:  # a flag this judge's backend has no setting for (--kernel on an endpoint)
        field, msg = validation_field(e, JudgeConfig)
        flags = " ".join(f"--{k.replace('_', '-')}" for k in [*model_upd, *upd])
        raise LifesearchError(f"{flags} over {args.config or '--model'}: {field}: {msg}") from None


def phase_models(cfg, phases: tuple[str, ...]) -> list[tuple[str, object]]:
    """(role, ModelConfig) of every model the given phases may load, for the preflight."""
    out = [(f"agent {a.id}", a.model) for a in cfg.agents] if "agent" in phases else []
    if "judge" in phases or ("reporteval" in phases and cfg.reporteval is not None):
        out += [(f"judge {j.id}", j.model) for j in cfg.all_judges()]
    return out


def print_result(result) -> bool:
    """Per-stage lines, then the score tables; False (after saying so) when a signal stopped the run."""
    from lifesearch_local.cli.tables import print_scores

    for name, stats in result.stages.items():
        print(_stage_line(name, stats))
    if result.stopped:
        print(f"stopped by signal after {result.wall_s} s; rerun the same command to finish ({result.run_dir})")
        return False
    if result.scores:
        print_scores(result.scores, cuts=run_cuts(result.run_dir))
    return True


def run_cuts(run_dir) -> dict:
    """judge → agent → AgentCut of a run directory's judgments (truncation.agent_cuts); {} when they
    cannot be read (the tables are then printed without the column, as before)."""
    from lifesearch_local.analysis.truncation import agent_cuts, report_cuts
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.records import Judgment
    from lifesearch_local.rundir.directory import RunDir

    try:
        return agent_cuts(report_cuts(RunDir(run_dir).load("judgments.jsonl", Judgment), run_reports(run_dir)))
    except (LifesearchError, OSError):
        return {}


def print_caveats(json_output: bool = False, **shown) -> None:
    """The caveats (lifesearch_local.analysis.caveats) for the numbers a command just printed: under its
    tables on stdout, or on stderr beside JSON (which must stay parseable)."""
    from lifesearch_local.analysis.caveats import caveats

    for line in caveats(**shown):
        print(line, file=sys.stderr if json_output else sys.stdout)


def run_reports(run_dir) -> list:
    """The reports of a run directory (what its agents wrote and the judges read)."""
    from lifesearch_local.records import Report
    from lifesearch_local.rundir.directory import RunDir

    return RunDir(run_dir).load("reports.jsonl", Report)


def run_judgments(run_dir, judges) -> list:
    """The judgments of these judge configs in a run directory (what its score tables came from)."""
    from lifesearch_local.records import Judgment
    from lifesearch_local.rundir.directory import RunDir

    ids = {j.id for j in judges}
    return [j for j in RunDir(run_dir).load("judgments.jsonl", Judgment) if j.judge in ids]


def result_default(cls: type, name: str) -> Any:
    """The default of an option that changes a result: declared once, on the marked field `name` of the settings
    class `cls` (serving's Result), as every config field is; the CLI never writes its own copy."""
    return cls.model_fields[name].default


def reference(args: argparse.Namespace, judgments: list | None = None):
    """The reference verdicts of `agree` / `certify` (run.reference), saying on stderr what it left out.
    `judgments`: the records of --judgments, already read; reused when --labels-from-judgments is that file."""
    from lifesearch_local.run.reference import load_reference

    same = (judgments is not None and args.labels_from_judgments is not None
            and Path(args.labels_from_judgments).resolve() == Path(args.judgments).resolve())
    ref = load_reference(args.labels, args.labels_from_judgments, args.label_judge, args.label_source,
                         records=judgments if same else None)
    if ref.skipped:
        print(f"reference judge {args.label_judge}: {ref.skipped} ungraded judgment(s) skipped", file=sys.stderr)
    return ref


def manifest_beside(path) -> dict | None:
    """The manifest.json of the run directory holding `path` (it says which models had random
    weights), or None for a file outside a run directory; a damaged one is an InputError (one
    line naming it and `lifesearch repair`): its caveats must not be dropped silently."""
    from lifesearch_local.rundir.manifest import manifest_data

    return manifest_data(Path(path).parent)


def _stage_line(name: str, s: dict) -> str:
    if name.startswith("agent/"):
        web = s.get("web", {}).get("fetch", {})
        return (f"{name}: {s['finished']}/{s['pending']} runs {s['status']}, {s['iterations']} iterations, "
                f"{s['output_tokens']} output tokens ({s['tokens_per_s']} tok/s), max batch {s['max_batch']}, "
                f"pages: {web.get('corpus', 0)} corpus, {web.get('cached', 0)} cache, {web.get('live', 0)} live, "
                f"{web.get('archive', 0)} archive; {s['wall_s']} s")
    if name.startswith("reporteval/"):
        parts = [f"{m} {s[m].get('decisions', 0)}" for m in ("quality", "redundancy", "factuality") if m in s]
        return f"{name}: decisions {', '.join(parts) or 'none left'} in {s.get('wall_s', 0)} s"
    cost = f"; {s['gpu_s']} GPU-s" if s.get("gpus") else ""
    return f"{name}: {s.get('decisions', 0)} decisions in {s.get('wall_s', 0)} s{cost}"


def print_agreement_summary(tasks, judgments, labels_path) -> None:
    """The Table 3 layout for a pipeline that just judged (`lifesearch demo` / `run`); silent
    without a labels file, a warning (never an exception) when the labels do not match."""

    from lifesearch_local.analysis.agreement import agreement
    from lifesearch_local.analysis.labels import label_index
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.output.numbers import TABLE3_LEGEND
    from lifesearch_local.output.terminal import agreement_table, console
    from lifesearch_local.records import Label
    from lifesearch_local.rundir.jsonl import read_records

    if labels_path is None or not Path(labels_path).exists():
        return
    labels = read_records(labels_path, Label)
    try:
        result = agreement(tasks, judgments, label_index(labels), exclude={lab.source for lab in labels})
    except LifesearchError as e:
        print(f"judge agreement not computed: {e}", file=sys.stderr)
        return
    source = ", ".join(sorted({lab.source for lab in labels}))
    out = console()
    out.print(agreement_table(result, title=f"Judge agreement with {len(labels)} labels ({source})"))
    out.print(TABLE3_LEGEND, style="dim")
