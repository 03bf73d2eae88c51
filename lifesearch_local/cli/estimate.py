"""`lifesearch estimate`: what a run config will cost before it runs (counts, tokens, memory, time, GPU-hours)."""

from __future__ import annotations

import argparse

from lifesearch_local.cli.common import add_calibration, calibration
from lifesearch_local.estimate.devices import DEFAULT_DEVICE, DEFAULT_MFU, DEVICES

DEVICE_NAMES = list(DEVICES)

DESCRIPTION = (
    "Estimate what `lifesearch run --config C` would do now, phase by phase, without running it: agent runs, "
    "judge decisions per judge and repetition, ReportEval requests (exact counts; a run directory that exists "
    "is read, never written: only its pending work counts); tokens from the model's tokenizer on the real "
    "prompts (reports an agent has not written yet: a stated assumption); memory (weights + KV cache at the "
    "configured budget) against this machine's free memory; time as a point and a range, from a short "
    "calibration on the configured engine (its model loaded as the run loads it, a few real prompts timed) "
    "or a stored profile of one; GPU-hours for GPU phases. Profiles are kept under "
    "$LIFESEARCH_CACHE/profiles (default ~/.cache/lifesearch-local/profiles); a run records its own estimate "
    "from them at its start and its actual figures beside it at its end (manifest.json, report.html)."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("estimate", help="counts, tokens, memory, time and GPU-hours of a run before it runs",
                       description=DESCRIPTION)
    p.add_argument("--config", required=True, help="run YAML (as for `lifesearch run`)")
    p.add_argument("--out", help="run directory (default: the config's `out`, else runs/<name>)")
    p.add_argument("--no-ray", action="store_true", help="as `run --no-ray`: the models in-process")
    p.add_argument("--json", action="store_true", help="print the estimate as one JSON object")
    p.add_argument("--device", metavar="GPU", help="price GPU phases on this GPU (its datasheet's bf16 peak, memory, "
                   f"bandwidth) instead of measuring: {', '.join(DEVICE_NAMES)}; without a GPU here they are priced on "
                   f"{DEFAULT_DEVICE} unless named")
    p.add_argument("--mfu", type=fraction, help=f"share of the GPU's bf16 peak its prompts reach (default {DEFAULT_MFU})")
    p.add_argument("--online", action="store_true", help="let the Hugging Face hub client reach the network for "
                   "tokenizers and configs not in the local cache (default: offline, no retries)")
    add_calibration(p)
    p.set_defaults(func=run)


def fraction(text: str) -> float:
    """A number in (0, 1] for --mfu."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share of the peak in (0, 1]")
    return v


def run(args: argparse.Namespace) -> int:
    import os

    from lifesearch_local.estimate.devices import GpuAssumption, device
    from lifesearch_local.run.config import load_run_config

    if not args.online:  # before the hub client is imported: no network call, no retry loop
        os.environ["HF_HUB_OFFLINE"] = "1"
    gpu = None
    if args.device or args.mfu:
        device(args.device or DEFAULT_DEVICE)  # an unknown name: one line, before any work
        gpu = GpuAssumption(args.device or DEFAULT_DEVICE, args.mfu or DEFAULT_MFU)
    cfg = load_run_config(args.config)
    update = {"out": args.out} if args.out else {}
    if args.no_ray:
        update["ray"] = None
    print_run_estimate(cfg.model_copy(update=update), args.config, calibration(args), json_output=args.json,
                       gpu=gpu, online=args.online)
    return 0


def print_run_estimate(cfg, source: str, calibrate: str, *, phases=None, fresh: bool = False,
                       json_output: bool = False, gpu=None, online: bool = False) -> None:
    """The estimate of a run config (`estimate`, `run --dry-run`), after the preflight of the models it may
    calibrate here (not those priced on an assumed GPU); `fresh`: as if its run directory were deleted first."""
    from lifesearch_local.cli.common import phase_models
    from lifesearch_local.estimate.cost import _cuda, model_device
    from lifesearch_local.estimate.dry_run import PHASES, estimate_run
    from lifesearch_local.run.preflight import preflight

    phases = phases or PHASES
    if calibrate != "never":  # models are loaded only to calibrate: a login node may estimate a GPU run
        here = [(what, m) for what, m in phase_models(cfg, phases)
                if not (model_device(m) == "cuda" and (gpu is not None or not _cuda()))]
        if here:
            preflight(here, cfg.ray)
    est = estimate_run(cfg, phases=phases, calibrate=calibrate, fresh=fresh, gpu=gpu, local_only=not online)
    show(est, f"`run --config {source}`" + (f" ({', '.join(phases)})" if tuple(phases) != PHASES else ""), json_output)


def show(est, what: str, json_output: bool = False) -> None:
    from lifesearch_local.output.estimate import estimate_lines

    if json_output:
        print(est.model_dump_json(indent=2))
        return
    for line in estimate_lines(est.model_dump(mode="json"), what):
        print(line)
