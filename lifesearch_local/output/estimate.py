"""An estimate (`lifesearch estimate`, `run --dry-run`, `judge --dry-run`) as plain text lines for the terminal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _secs(s: Mapping[str, Any] | None) -> str:
    if not s:
        return "unknown"
    return f"{s['estimate']:,.1f} ({s['low']:,.1f}–{s['high']:,.1f})"


def _work(p: Mapping[str, Any]) -> str:
    if p["kind"] == "agent":
        return f"{p['runs']} runs"
    if p["kind"] == "judge":
        reps = p.get("decisions_per_repetition") or []
        each = f" ({' + '.join(str(n) for n in reps)})" if len(reps) > 1 else ""
        return f"{p['decisions']} decisions{each}"
    return f"{p['records']} records, {p['decisions']} decisions"


def _num(v: Any) -> str:
    return "—" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:,.2f}"


def estimate_lines(est: Mapping[str, Any], what: str) -> list[str]:
    """The estimate as a table of phases, then totals, memory, basis and assumptions (one line each)."""
    rows = [("phase", "work", "requests", "tokens", "seconds (low–high)", "GPU-h", "GiB")]
    for name, p in est["phases"].items():
        rows.append((name, _work(p), _num(p["requests"]), _num(p["tokens"]), _secs(p["seconds"]), _num(p["gpu_hours"]),
                     _num(p["memory_gib"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = [f"estimate of {what} (load average now {', '.join(f'{x:g}' for x in est['load_average'])})"]
    if est.get("busy"):
        out.append(est["busy"])
    out += ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    total = est.get("total_seconds")
    if total is not None:
        out.append(f"total {total:,.1f} s ({est['total_low_seconds']:,.1f}–{est['total_high_seconds']:,.1f}), "
                   f"start-up {est['startup_seconds']:,.1f} s, finish {est['finish_seconds']:,.1f} s; "
                   f"GPU-hours {est['gpu_hours']:g}")
    else:
        out.append("total: unknown (a phase or the start-up has no profile; `lifesearch estimate` calibrates them)")
    dev = est.get("device")
    if dev:
        out.append(f"device assumed for GPU phases: {dev['label']} ({dev['bf16_tflops']:,g} TFLOP/s bf16 dense, "
                   f"{dev['memory_gb']:g} GB, {dev['bandwidth_gbs']:,g} GB/s; {dev['source']}); {dev['mfu']:g} of "
                   f"peak for prompts, {dev['bandwidth_use']:g} of the bandwidth for decoding (--device, --mfu)")
    m = est["memory"]
    fits = {True: "fits", False: "DOES NOT FIT", None: "fit unknown"}[m["fits"]]
    out.append(f"memory: {_num(m['needed_gib'])} GiB needed (largest phase: weights + KV cache at the budget), "
               f"{_num(m['free_gib'])} GiB free ({m['device']}): {fits}")
    for name, p in est["phases"].items():
        out.append(f"{name}: time from {p['basis']}")
        out += [f"  assumes {a}" for a in p["assumptions"]]
    out += [f"note: {n}" for n in est.get("notes") or []]
    return out
