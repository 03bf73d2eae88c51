"""Printing the paper's tables (Table 4 scores, Table 3 agreement) that score, agree, sweep, run and demo show."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def print_scores(by_judge: Mapping[str, Mapping[str, Any]], uncertainty: Mapping | None = None, *,
                 compare: bool = False, cuts: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Table 4 per judge with CIs, and the line of differences that hold (every pair with `compare`). Without
    `uncertainty` (scoring.uncertainty_by_judge), the CIs are computed from the rows' task scores
    with the default seed and resamples (every pair compared over all tasks). With `cuts`
    (truncation.agent_cuts), a column of the reports the judge read only part of."""
    from lifesearch_local.analysis.resampling import score_uncertainty
    from lifesearch_local.output.terminal import comparison_table, console, holding_line, score_table

    out = console()
    for judge, rows in by_judge.items():
        u = (uncertainty or {}).get(judge)
        if uncertainty is None and rows:
            u = score_uncertainty({a: r.tasks for a, r in rows.items()})
        out.print(score_table(rows, title=f"LifeSearch scores — judge {judge}", uncertainty=u,
                              cuts=(cuts or {}).get(judge)))
        ungraded = sum(r.ungraded for r in rows.values())
        missing = sum(r.missing for r in rows.values())
        out.print(
            f"judge {judge}: {ungraded} ungraded judgment(s) counted as not satisfied"
            + (f"; {missing} missing judgment(s) counted as not satisfied (--allow-missing)" if missing else "")
        )
        if u is not None:
            out.print(holding_line(u), highlight=False)
            if compare and u.comparisons:
                out.print(comparison_table(u, title=f"Paired comparisons — judge {judge}"))


def print_agreement(result: Mapping[str, Mapping], source: str, n_labels: int, uncertainty: Mapping | None = None) -> None:
    """Table 3, its intervals and judge-vs-judge comparisons (with `uncertainty`), then the breakdowns."""
    from lifesearch_local.analysis.agreement import BREAKDOWNS
    from lifesearch_local.output.numbers import TABLE3_LEGEND
    from lifesearch_local.output.terminal import (
        agreement_ci_table,
        agreement_table,
        breakdown_table,
        console,
        judge_vs_judge_table,
    )

    out = console()
    out.print(agreement_table(result, title=f"Judge agreement with {n_labels} labels ({source})"))
    out.print(TABLE3_LEGEND, style="dim")
    if uncertainty is not None:
        b = uncertainty["bootstrap"]
        out.print(agreement_ci_table(result, title=f"95% CIs: cluster bootstrap over reports ({b['resamples']} "
                                     f"resamples, seed {b['seed']}; ρ, τ over tasks)"))
        if uncertainty["judge_vs_judge"]:
            out.print(judge_vs_judge_table(uncertainty["judge_vs_judge"], title="Judge vs judge on the same labelled "
                                           "decisions (paired cluster bootstrap; two-sided sign-flip test over reports)"))
    for attr in BREAKDOWNS:
        out.print(breakdown_table(result, attr))
    ungraded = sum(m["ungraded"] for m in result.values())
    if ungraded:
        out.print(f"{ungraded} ungraded judgment(s) counted as wrong")
