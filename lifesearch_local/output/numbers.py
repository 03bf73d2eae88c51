"""Numbers as people read them, in the terminal and in report.html alike: percents, intervals, p-values, Table 3's columns."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lifesearch_local.analysis.scoring import AgentScore

# (column title, short title for terminals, metric key, format); "pct" formats print shares × 100.
TABLE3_COLUMNS: list[tuple[str, str, str, str]] = [
    ("Mean acc. (%)", "Acc%", "accuracy_mean", "pct2"),
    ("Chance: majority-class acc. (%)", "Chance%", "chance_accuracy", "pct2"),
    ("Self-consistency (%)", "SC%", "self_consistency", "pct1"),
    ("Majority over judge runs (%)", "RunMaj%", "majority_accuracy", "pct2"),
    ("κ", "κ", "kappa", "f3"),
    ("AUROC", "AUROC", "auroc", "f3"),
    ("ECE", "ECE", "ece", "f3"),
    ("Best-threshold acc. (%)", "Thr%", "best_threshold_accuracy", "pct2"),
]
TABLE3_LEGEND = (
    "Acc = mean accuracy over judge runs; Chance = the chance baseline, the accuracy of always answering "
    "the labels' majority class (κ's chance baseline is 0: a judge at or below these has learnt nothing from "
    "the reports); SC = self-consistency; RunMaj = accuracy of the majority vote over judge runs (not the "
    "majority-class baseline); κ = Cohen's kappa, AUROC / ECE / Thr (accuracy at the best threshold) from p_true, "
    "ρ / τ = Spearman / Kendall correlation of the agents' scores under judge and labels, over the "
    "Agents column (— below three: two agents always give ±1); "
    "ungraded judgments count as wrong; — = undefined or no p_true."
)


def fmt_metric(value: float | int | None, how: str) -> str:
    """A metric as the tables print it; None (undefined or absent) is an em dash."""
    if value is None:
        return "—"
    if how.startswith("pct"):
        return f"{100 * value:.{how[3:]}f}"
    if how.startswith("f"):
        return f"{value:.{how[1:]}f}"
    return str(value)

# (column title, metric key, format) of the interval table under Table 3
CI_COLUMNS = [("Acc%", "accuracy_mean", "pct1"), ("RunMaj%", "majority_accuracy", "pct1"), ("κ", "kappa", "f2"),
              ("AUROC", "auroc", "f2"), ("ECE", "ece", "f2"), ("ρ", "rank_spearman", "f2"), ("τ", "rank_kendall", "f2")]


def per_report(x: float | None) -> str:
    """A per-report mean count (tool calls, pages read): — when the reports do not record it."""
    return "—" if x is None else f"{x:.1f}"


def run_cells(r: AgentScore) -> list[str]:
    """The score table's cells after the score, as the terminal and report.html show them: runs, mean
    iterations, output tokens (k), tool calls and pages read per report, ungraded, missing."""
    return [str(len(r.runs)), "—" if r.iterations is None else f"{r.iterations:.1f}",
            "—" if r.output_tokens is None else f"{r.output_tokens / 1000:.1f}", per_report(r.tool_calls),
            per_report(r.pages_read), str(r.ungraded), str(r.missing)]


def pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}"


def mean_pm_std(mean: float, std: float | None) -> str:
    return f"{100 * mean:.2f} ± {100 * std:.2f}" if std is not None else f"{100 * mean:.2f}"


def _no_ci(ci: Sequence[float] | None) -> bool:
    return ci is None or any(math.isnan(v) for v in ci)


def mean_ci(mean: float, ci: Sequence[float] | None, reason: str | None = None) -> str:
    """`72.7 [65.1, 79.8]`: a score in percent with its 95% interval; without one, why
    (`17.9 (n=1: no interval)`), or [—] when no reason is known."""
    if _no_ci(ci):
        return f"{100 * mean:.1f} " + (f"({reason})" if reason else "[—]")
    return f"{100 * mean:.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def pts(x: float, digits: int = 1) -> str:
    """Signed points (a share × 100), never "-0.0": a difference that rounds to zero reads +0.0."""
    out = f"{100 * x:+.{digits}f}"
    return "+" + out[1:] if float(out) == 0 else out


def signed_ci(diff: float, ci: Sequence[float] | None, reason: str | None = None) -> str:
    """`+7.0 [2.1, 11.9]`: a difference in points with its 95% interval; without one, why."""
    if math.isnan(diff):
        return "—"
    if _no_ci(ci):
        return f"{pts(diff)} " + (f"({reason})" if reason else "[—]")
    return f"{pts(diff)} [{pts(ci[0])}, {pts(ci[1])}]"


def fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt_interval(ci: Sequence[float] | None, how: str, reason: str | None = None) -> str:
    """`[lo, hi]` in a Table 3 format; without one, why (— when no reason is known)."""
    if _no_ci(ci):
        return reason or "—"
    return f"[{fmt_metric(ci[0], how)}, {fmt_metric(ci[1], how)}]"
