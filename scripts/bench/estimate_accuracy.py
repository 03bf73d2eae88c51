"""The estimate against the actual time of two commands on this machine: `run --config configs/cpu_small.yaml`,
and `judge` of DeepResearch Bench report 56 (drb-56) with smollm2-135m.

For each: `--dry-run --calibrate` (a fresh calibration at the present load, stored as the profile), then the
command itself in a fresh process, timed from outside; the run records its own estimate (from that profile)
and its actual figures in its manifest. Printed: the estimate (point, low–high), the command's wall time, the
ratio actual / estimate, the decision counts (estimated, actual) and the load average before and after.

    PYTHONPATH=$PWD python scripts/bench/estimate_accuracy.py [--drb ../shared/external/deep_research_bench] [--work DIR]
        [--only cpu_small|drb56]

Its time is the two calibrations and the two commands, each about as long as the estimate it prints (the
calibration's seconds are printed per case, the whole at the end): at load 2–4 on this 2-core machine
127 s for drb-56 and 102 s for cpu_small, over 10 minutes at load 12–14; --only runs one case.

Nothing here is compared to a stored figure: rerun it on an idle machine for figures to quote.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The release files sit in shared/external beside the checkout (/work/main) or two levels up (a worktree).
DRB = next((d for d in (ROOT.parent / "shared/external/deep_research_bench",
                        ROOT.parent.parent / "shared/external/deep_research_bench") if d.is_dir()),
           ROOT.parent / "shared/external/deep_research_bench")


def cli(*args: str, quiet: bool = True) -> float:
    """`lifesearch ARGS` in a fresh process from the repository root; its wall seconds (it must succeed)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "lifesearch_local", *args], cwd=ROOT, text=True,
                       capture_output=quiet)
    if r.returncode != 0:
        sys.exit(f"lifesearch {' '.join(args)} failed ({r.returncode}):\n{(r.stderr or '')[-3000:]}")
    return time.perf_counter() - t0


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(name: str, dry: list[str], real: list[str], out: Path) -> dict:
    """Calibrate (dry run), then run for real; the figures of both from the run's manifest."""
    shutil.rmtree(out, ignore_errors=True)
    before = load()
    calibration_s = cli(*dry, "--dry-run", "--calibrate")
    mid = load()
    wall = cli(*real)
    block = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["estimate"]
    est, act = block["estimate"], block["actual"]
    total = est["total_seconds"]
    decisions = {k: (p.get("decisions") if p["kind"] != "agent" else p.get("runs"),
                     (act["phases"].get(k) or {}).get("decisions" if p["kind"] != "agent" else "runs"))
                 for k, p in est["phases"].items()}
    return {"case": name, "estimate_s": total, "low_s": est["total_low_seconds"], "high_s": est["total_high_seconds"],
            "actual_s": round(wall, 2), "calibration_s": round(calibration_s, 1), "ratio": round(wall / total, 3) if total else None,
            "run_ratio": act.get("ratio"), "phases": {k: {"estimate_s": (p["seconds"] or {}).get("estimate"),
                                                           "actual_s": (act["phases"].get(k) or {}).get("seconds")}
                                                       for k, p in est["phases"].items()},
            "decisions_estimated_actual": decisions, "load_before_calibration": before, "load_before_run": mid,
            "load_after": load()}


def drb56(drb: Path, work: Path) -> tuple[Path, Path]:
    """tasks.jsonl of the DeepResearch Bench import, and drb-56's report alone (docs/benchmarks.md)."""
    out = work / "drb"
    if not (out / "tasks.jsonl").exists():
        cli("import", "drb", "--queries", str(drb / "query.jsonl"), "--criteria", str(drb / "criteria.jsonl"),
            "--reports", str(drb / "reports-claude-3-7-sonnet.jsonl"), "--out", str(out))
    one = work / "drb56.jsonl"
    one.write_text("".join(line for line in (out / "reports.jsonl").read_text(encoding="utf-8").splitlines(True)
                           if json.loads(line)["task_id"] == "drb-56"), encoding="utf-8")
    return out / "tasks.jsonl", one


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--drb", default=str(DRB),
                   help="DeepResearch Bench release files (query.jsonl, criteria.jsonl, reports-claude-3-7-sonnet.jsonl)")
    p.add_argument("--work", help="scratch directory (default: a new temporary one)")
    p.add_argument("--only", choices=["cpu_small", "drb56"], help="one case only")
    args = p.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="estimate-accuracy-"))
    work.mkdir(parents=True, exist_ok=True)
    drb = Path(args.drb)
    if args.only != "cpu_small" and not (drb / "query.jsonl").is_file():
        sys.exit(f"{drb}: no DeepResearch Bench release files there (--drb DIR)")
    rows, t0 = [], time.perf_counter()
    if args.only in (None, "cpu_small"):
        run_out = work / "cpu-small"
        cmd = ["run", "--config", "configs/cpu_small.yaml", "--out", str(run_out), "--quiet"]
        rows.append(show(measure("run --config configs/cpu_small.yaml", cmd, [*cmd, "--fresh"], run_out)))
    if args.only in (None, "drb56"):
        tasks, reports = drb56(drb, work)
        judge_out = work / "judge-drb56"
        cmd = ["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "smollm2-135m", "--out",
               str(judge_out), "--quiet"]
        rows.append(show(measure("judge drb-56 --model smollm2-135m", cmd, cmd, judge_out)))
    print(json.dumps(rows, indent=1))
    print(f"this script took {time.perf_counter() - t0:.0f} s; load average now {load()}")


def show(r: dict) -> dict:
    """One line per case as soon as it is measured."""
    print(f"{r['case']}: estimate {r['estimate_s']} s ({r['low_s']}–{r['high_s']}), actual {r['actual_s']} s, "
          f"actual/estimate {r['ratio']}; decisions (estimated, actual) {r['decisions_estimated_actual']}; "
          f"load average before calibration {r['load_before_calibration']}, before the run {r['load_before_run']}, "
          f"after {r['load_after']}; the calibration took {r['calibration_s']} s", flush=True)
    return r


if __name__ == "__main__":
    main()
