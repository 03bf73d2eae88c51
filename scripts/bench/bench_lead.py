"""docs/benchmarks.md's lead table: the packed kernel vs vLLM's prefix caching on drb-56, on this CPU.

Runs `lifesearch bench judge --model smollm2-135m --backend vllm --reports-from drb-56 --repeats 3 --baseline none
--json` in float32 (and in bfloat16 where this CPU has AVX512-BF16/AMX, or with --bf16 anyway), in vLLM's CPU
environment (.venv-vllm, built by scripts/ci/vllm_cpu_env.sh), and prints the markdown table: seconds (min / median
/ max of 3 runs), decisions/s, GFLOP a run, achieved GFLOP/s against this CPU's measured matmul rate, packed vs
vLLM at the medians, the agreement (packed vs vLLM per dtype; bf16 vs fp32 per engine) and the load average.
With --single, one more run adds the one-prompt-per-rubric column (minutes). Run it on an idle machine:

    python scripts/bench/bench_lead.py [--drb ../shared/external/deep_research_bench] [--out /tmp/bench-lead]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASK = "drb-56"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drb", default=str(ROOT.parent / "shared/external/deep_research_bench"),
                    help="DeepResearch Bench release files (query.jsonl, criteria.jsonl, reports-claude-3-7-sonnet.jsonl)")
    ap.add_argument("--out", default="/tmp/bench-lead", help="where the import, the JSON results and the table go")
    ap.add_argument("--python", default=str(ROOT / ".venv-vllm/bin/python"), help="vLLM's CPU environment's python")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--repeats", default="3")
    ap.add_argument("--bf16", action="store_true", help="also bf16 on a CPU without bf16 instructions (very slow)")
    ap.add_argument("--single", action="store_true", help="one more run with the one-prompt-per-rubric column")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": args.threads}
    reports, tasks = drb56(args, out, env)
    common = ["-m", "lifesearch_local", "bench", "judge", "--model", "smollm2-135m", "--reports-from", str(reports),
              "--tasks", str(tasks), "--json"]
    dtypes = ["float32"] + (["bfloat16"] if args.bf16 or bf16_native() else [])
    results = {}
    for dt in dtypes:
        results[dt] = bench(args.python, common + ["--backend", "vllm", "--baseline", "none", "--repeats", args.repeats,
                                                   "--dtype", dt], out / f"{dt}.json", env)
    single = bench(args.python, common + ["--repeats", "1"], out / "single.json", env) if args.single else None
    table = lead_table(results, single)
    (out / "table.md").write_text(table + "\n")
    print(table)
    return 0


def bf16_native() -> bool:
    sys.path.insert(0, str(ROOT))
    from serving import bf16_native as native

    return bool(native())


def drb56(args: argparse.Namespace, out: Path, env: dict) -> tuple[Path, Path]:
    """drb-56's report and the tasks file, imported from the release files once."""
    drb = out / "drb"
    if not (drb / "tasks.jsonl").exists():
        d = Path(args.drb)
        subprocess.run([sys.executable, "-m", "lifesearch_local", "import", "drb", "--queries", str(d / "query.jsonl"),
                        "--criteria", str(d / "criteria.jsonl"), "--reports", str(d / "reports-claude-3-7-sonnet.jsonl"),
                        "--out", str(drb)], check=True, env=env, cwd=ROOT)
    one = out / "drb56.jsonl"
    lines = [x for x in (drb / "reports.jsonl").read_text().splitlines() if json.loads(x)["task_id"] == TASK]
    one.write_text("\n".join(lines) + "\n")
    return one, drb / "tasks.jsonl"


def bench(python: str, argv: list[str], dest: Path, env: dict) -> dict:
    print(f"$ OMP_NUM_THREADS={env['OMP_NUM_THREADS']} {python} {' '.join(argv)}", file=sys.stderr, flush=True)
    done = subprocess.run([python, *argv], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT, check=True)
    dest.write_text(done.stdout)
    return json.loads(done.stdout)


def _diff(a: list[float], b: list[float]) -> str:
    return f"{max(abs(x - y) for x, y in zip(a, b)):.1e}"


def lead_table(results: dict[str, dict], single: dict | None) -> str:
    """The markdown table and the lines under it."""
    any_r = next(iter(results.values()))
    rows = ["| drb-56, 28 decisions | dtype | tokens computed | min s | median s | max s | decisions/s | GFLOP a run "
            "| achieved GFLOP/s | of this CPU's matmul rate |", "|---" * 10 + "|"]
    for dt, r in results.items():
        att = f", {r['packed_attention']} attention" if r.get("packed_attention") else ""
        for label, name in ((f"packed (`{r['packed_form']}`{att})", "packed"), ("vLLM prefix caching", "vllm")):
            rows.append(f"| {label} | {dt} | {r[name + '_tokens']:,} | {r[name + '_s_min']:.2f} | {r[name + '_s']:.2f} | "
                        f"{r[name + '_s_max']:.2f} | {r[name + '_decisions_per_s']:.2f} | {r[name + '_gflop']:,.0f} | "
                        f"{r[name + '_gflops']:,.1f} | {100 * r.get(name + '_of_matmul', 0):.0f}% |")
    if single:
        rows.append(f"| one prompt per rubric (`single`, 1 run) | {single['dtype']} | {single['naive_tokens']:,} | | "
                    f"{single['naive_s']:.2f} | | {single['naive_decisions_per_s']:.2f} | {single['naive_gflop']:,.0f} "
                    f"| {single['naive_gflops']:,.1f} | {100 * single.get('naive_of_matmul', 0):.0f}% |")
    lines = ["\n".join(rows), ""]
    rates = ", ".join(f"{k} {v:,.1f} GFLOP/s" for k, v in any_r["matmul_gflops"].items())
    native = "yes" if any_r.get("cpu_bf16_native") else "no (bf16 emulated)"
    lines.append(f"This CPU's matmul rate (torch's matmul or oneDNN's packed linear, the faster; {any_r['threads']} threads): "
                 f"{rates}; bf16 instructions: {native}.")
    for dt, r in results.items():
        lines.append(f"{dt}: packed / vLLM at the medians {r['speedup_vs_vllm']}×; max |Δ p_true| packed vs vLLM "
                     f"{r.get('max_abs_diff_vllm', float('nan')):.1e}; load average before {r['load_average_before']}, "
                     f"after {r['load_average_after']}.")
    if "float32" in results and "bfloat16" in results:
        f32, b16 = results["float32"], results["bfloat16"]
        lines.append(f"What bf16 costs in agreement (max |Δ p_true| against float32): packed "
                     f"{_diff(f32['packed_p_true'], b16['packed_p_true'])}, vLLM {_diff(f32['vllm_p_true'], b16['vllm_p_true'])}.")
    if single:
        lines.append(f"One prompt per rubric: packed is {single['speedup']}× faster ({single['token_ratio']}× fewer "
                     f"tokens), max |Δ p_true| {single['max_abs_diff']:.1e}.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
