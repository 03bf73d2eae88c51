"""Where the packed rows loop spends its time on one report: seconds per section, prefix pass and rubric rows.

Times `serving.kernels.packed_rows` as the judge runs it (the `shared` form's own layer loop) on the first
report of a reports file, by wrapping its sections with timers: the norms, rotary, attention and each linear
(q/k/v, o with the residual, gate with SiLU, up times gate, down with the residual). Prints, per dtype, the
median of `--repeats` runs after a warm-up. With the files `scripts/bench/bench_lead.py` leaves in its --out:

    PYTHONPATH=$PWD python scripts/bench/profile_rows.py --reports /tmp/bench-lead/drb56.jsonl \
        --tasks /tmp/bench-lead/drb/tasks.jsonl --dtype bfloat16

The timers cost a little (a clock read per call); compare sections within one run.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import time
from types import SimpleNamespace


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", required=True, help="reports JSONL (its first report is profiled)")
    ap.add_argument("--tasks", required=True, help="tasks JSONL")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prefill-chunk", type=int, default=None, help="the prefix's chunk (default: the kernel's)")
    args = ap.parse_args()
    import torch

    from lifesearch_local.bench.judge import real_groups
    from serving.kernels import packed_rows as pr

    groups, shape, _ = real_groups(SimpleNamespace(tasks=args.tasks, reports_from=args.reports, limit=1,
                                                   model=args.model, seed=0))
    scorer = load(args.model, args.dtype)
    scorer.prefill_chunk = args.prefill_chunk or scorer.prefill_chunk
    spent: collections.Counter = collections.Counter()
    names = wrap(pr, scorer.rows, spent)
    runs: dict[str, list[dict]] = {"prefix": [], "rows": []}
    items = groups[0]
    with torch.inference_mode():
        for rep in range(args.repeats + 1):  # the first is the warm-up
            plan = scorer.plan(items)
            spent.clear()
            t0 = time.perf_counter()
            kv = scorer.rows.prefix(items[0].ids[: plan.prefix], scorer.prefill_chunk)
            prefix = dict(spent, total=time.perf_counter() - t0)
            spent.clear()
            t0 = time.perf_counter()
            for part in plan.batches:
                scorer.rows.rows([items[k].ids[plan.prefix:] for k in part], plan.prefix, kv)
            if rep:
                runs["prefix"].append(prefix)
                runs["rows"].append(dict(spent, total=time.perf_counter() - t0))
    print(f"{args.model} {args.dtype}, attention {scorer.rows.attention}, prefill chunk {scorer.prefill_chunk}, {torch.get_num_threads()} threads, report prefix {shape['prefix_tokens_median']} "
          f"tokens, {shape['rubrics_total']} rubrics (suffix mean {shape['suffix_tokens_mean']}); median of "
          f"{args.repeats} after a warm-up; load average {os.getloadavg()}")
    for part, rs in runs.items():
        med = {k: statistics.median(r.get(k, 0.0) for r in rs) for k in ["total", *names]}
        rest = med["total"] - sum(med[k] for k in names)
        cells = " · ".join(f"{k} {med[k]:.3f}" for k in sorted(names, key=lambda k: -med[k]) if med[k] > 0)
        print(f"{part}: {med['total']:.3f} s = {cells} · other {rest:.3f}")
    return 0


def load(model: str, dtype: str):
    import torch
    from transformers import AutoModelForCausalLM

    from lifesearch_local.llm.models import resolved_path
    from serving.kernels.kernel import PackedScorer

    m = AutoModelForCausalLM.from_pretrained(resolved_path(model, 0), dtype=getattr(torch, dtype)).eval()
    scorer = PackedScorer(m, form="shared")
    if scorer.rows is None:
        raise SystemExit(f"{model} does not run the packed rows loop here")
    return scorer


def wrap(pr, rows, spent: collections.Counter) -> list[str]:
    """Timers around the loop's sections; returns the section names."""
    def timed(name, fn):
        def inner(*a, **k):
            t = time.perf_counter()
            out = fn(*a, **k)
            spent[name] += time.perf_counter() - t
            return out
        return inner

    for name in ("rms_norm", "rotary", "attend"):
        setattr(pr, name, timed(name, getattr(pr, name)))
    pr.bf16_cpu.attend = timed("attend", pr.bf16_cpu.attend)  # where rows.attention is "amx"
    packed = pr.RowsForward._packed
    pr.RowsForward._packed = lambda self, *a, **k: timed("attend", packed)(self, *a, **k)
    label = {}
    for lin, *_ in rows.qkv:
        label[id(lin)] = "qkv"
    for o, gate_up, down in rows.linears:
        label.update({id(o): "o+residual", id(gate_up.gate): "gate+silu", id(gate_up.up): "up×gate",
                      id(down): "down+residual"})
    call, then = pr.Linear.__call__, pr.Linear.then
    pr.Linear.__call__ = lambda self, *a, **k: timed(label.get(id(self), "linear"), call)(self, *a, **k)
    pr.Linear.then = lambda self, *a, **k: timed(label.get(id(self), "linear"), then)(self, *a, **k)
    return ["attend", "rms_norm", "rotary", *dict.fromkeys(label.values())]


if __name__ == "__main__":
    raise SystemExit(main())
