"""The report page's "Estimate vs actual" section: what the run's start estimated beside what it took."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifesearch_local.output.report.markup import e, table


def _n(v: Any) -> str:
    if v is None:
        return "—"
    return f"{v:,}" if isinstance(v, int) else f"{v:,.1f}"


def _work(p: Mapping[str, Any]) -> Any:
    return p.get("runs") if p.get("kind") == "agent" else p.get("decisions")


def _ratio(a: Mapping[str, Any]) -> str:
    return f"{a['ratio']:.2f}" if a.get("ratio") is not None else "—"


def _secs(s: Mapping[str, Any] | None) -> str:
    return "—" if not s else f"{s['estimate']:,.1f} ({s['low']:,.1f}–{s['high']:,.1f})"


def section_estimate(manifest: Mapping[str, Any] | None) -> str:
    """A table per phase (work, tokens, seconds: estimated and actual, and their ratio), then the whole run;
    empty when the manifest holds no estimate."""
    block = (manifest or {}).get("estimate") or {}
    est, act = block.get("estimate"), block.get("actual") or {}
    if not est:
        return ""
    rows = []
    for name, p in est.get("phases", {}).items():
        a = (act.get("phases") or {}).get(name) or {}
        actual_work = a.get("runs") if p.get("kind") == "agent" else a.get("decisions")
        rows.append([e(name), e(_n(_work(p))), e(_n(actual_work)), e(_n(p.get("tokens"))), e(_n(a.get("tokens"))),
                     e(_secs(p.get("seconds"))), e(_n(a.get("seconds"))), e(_ratio(a))])
    total, start = est.get("total_seconds"), est.get("startup_seconds") or 0.0
    run_est = {"estimate": total - start, "low": est["total_low_seconds"] - start, "high": est["total_high_seconds"] - start} \
        if total is not None else None
    rows.append(["<b>run</b> (after start-up)", "", "", "", "", e(_secs(run_est)), e(_n(act.get("run_seconds"))),
                 e(_ratio(act))])
    head = ["Phase", "Runs / decisions, est.", "actual", "Tokens, est.", "actual", "Seconds, est. (low–high)", "actual",
            "actual / est."]
    loads = ", ".join(f"{x:g}" for x in est.get("load_average") or [])
    note = (f'<p class="muted">Estimated at the start of the latest invocation from stored profiles '
            f"(`lifesearch estimate` makes them; load average then {e(loads)}); a phase without a profile has no time. "
            "Runs and decisions are exact; tokens of reports not yet written are an assumption.</p>")
    return '<h2 id="estimate">Estimate vs actual</h2>' + note + table(head, rows, tid="estimate")
