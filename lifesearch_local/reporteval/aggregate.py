"""Aggregates of the ReportEval records: pure functions, no I/O.

Conventions: ungraded answers are counted, never averaged in; unverifiable claim–source pairs
(source not obtainable) are counted apart and never treated as unsupported; factuality means
are pooled over claim–source pairs (each pair weighs the same, as in the paper's per-system
averages), while redundancy is the mean of the per-report means.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from lifesearch_local.reporteval.records import (
    Claim,
    FactualityResult,
    FactualityStats,
    QualityResult,
    RedundancyResult,
    ReportEvaluation,
)


def mean(xs: Iterable[float]) -> float | None:
    """Arithmetic mean, or None for no values."""
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def support_stats(labels: Sequence[int], *, claims: int, unverifiable: int = 0, ungraded: int = 0) -> FactualityStats:
    """Mean support (1/0/−1) and full-support rate over judged pairs; unverifiable share over all pairs."""
    if any(v not in (1, 0, -1) for v in labels):
        raise ValueError(f"support labels must be 1, 0 or -1, got {sorted(set(labels))}")
    pairs = len(labels) + unverifiable + ungraded
    return FactualityStats(
        claims=claims, pairs=pairs, judged=len(labels), unverifiable=unverifiable, ungraded=ungraded,
        mean_support=mean(labels),
        full_support_rate=sum(v == 1 for v in labels) / len(labels) if labels else None,
        unverifiable_share=unverifiable / pairs if pairs else None,
    )


def factuality_stats(claims: Sequence[Claim]) -> FactualityStats:
    """The stats of one report's claims."""
    srcs = [s for c in claims for s in c.sources]
    return support_stats(
        [s.support for s in srcs if s.status == "judged" and s.support is not None],
        claims=len(claims),
        unverifiable=sum(s.status == "unverifiable" for s in srcs),
        ungraded=sum(s.status == "ungraded" for s in srcs),
    )


def factuality_summary(results: Sequence[FactualityResult]) -> dict[str, Any]:
    """Pooled over all claim–source pairs of the reports, plus claims and pairs per report."""
    claims = [c for r in results for c in r.claims]
    st = factuality_stats(claims)
    n = len(results)
    return {**st.model_dump(), "reports": n,
            "claims_per_report": st.claims / n if n else None, "pairs_per_report": st.pairs / n if n else None}


def quality_summary(results: Sequence[QualityResult]) -> dict[str, Any]:
    """Mean score per dimension over the reports graded on it; counts of graded and ungraded reports."""
    out: dict[str, Any] = {}
    dims = [d.dimension for d in results[0].dimensions] if results else []
    for k in dims:
        out[k] = mean(d.score for r in results for d in r.dimensions if d.dimension == k and d.score is not None)
    graded = sum(all(d.score is not None for d in r.dimensions) for r in results)
    return {**out, "reports": len(results), "graded": graded, "ungraded": len(results) - graded}


def redundancy_summary(results: Sequence[RedundancyResult]) -> dict[str, Any]:
    """Mean of the per-report mean pair scores (4 = no redundancy) over reports that have one."""
    means = [r.mean for r in results if r.mean is not None]
    pairs = [p for r in results for p in r.pairs]
    return {"mean": mean(means), "reports": len(results), "scored": len(means),
            "without_pairs": sum(not r.pairs for r in results),
            "pairs": len(pairs), "ungraded_pairs": sum(p.score is None for p in pairs)}


def summarize(records: Iterable[ReportEvaluation]) -> dict[str, dict[str, dict[str, Any]]]:
    """{judge: {agent: {metric: summary}}} over the records given (latest record per key wins)."""
    latest = {r.key: r for r in records}
    by: dict[tuple[str, str, str], list[ReportEvaluation]] = defaultdict(list)
    for r in latest.values():
        by[(r.judge, r.agent, r.metric)].append(r)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (judge, agent, metric), recs in sorted(by.items()):
        if metric == "quality":
            s = quality_summary([r.quality for r in recs if r.quality is not None])
        elif metric == "redundancy":
            s = redundancy_summary([r.redundancy for r in recs if r.redundancy is not None])
        else:
            s = factuality_summary([r.factuality for r in recs if r.factuality is not None])
        out.setdefault(judge, {}).setdefault(agent, {})[metric] = s
    return out
