"""Terminal tables in the paper's layouts (Table 4 scores, Table 3 agreement) as rich renderables; the CLI prints them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from lifesearch_local.analysis.scoring import AgentScore
from lifesearch_local.output.numbers import (
    CI_COLUMNS,
    TABLE3_COLUMNS,
    fmt_interval,
    fmt_metric,
    fmt_p,
    mean_ci,
    mean_pm_std,
    pct,
    run_cells,
    signed_ci,
)
from lifesearch_local.records import DOMAIN_ABBREV, Domain

if TYPE_CHECKING:
    from lifesearch_local.analysis.resampling import Comparison, ScoreUncertainty
    from lifesearch_local.analysis.truncation import AgentCut


def holding_line(u: ScoreUncertainty) -> str:
    """One line naming the pairwise differences that hold at 0.05 after Holm's adjustment."""
    held = [c for c in u.comparisons if c.holds]
    tail = (f"(95% CIs: task bootstrap, {u.resamples} resamples, seed {u.seed}; "
            "paired sign-flip test over shared tasks, Holm-adjusted; `--compare` lists every pair)")
    if not u.comparisons:
        return f"one agent: nothing to compare {tail}"
    if not held:
        return f"no pair of agents can be told apart at 0.05: none of the {len(u.comparisons)} differences holds {tail}"
    names = "; ".join(f"{c.a} {'>' if c.diff > 0 else '<'} {c.b} ({signed_ci(c.diff, c.ci95, c.ci_reason)})"
                      for c in held)
    return f"differences that hold at 0.05: {names} {tail}"


def verdict(c: Comparison, lower_is_better: bool = False) -> str:
    """What a comparison says, in words: which agent is better, or that these tasks cannot tell."""
    if c.n_tasks == 0:
        return "no shared task"
    if c.holds:
        return "A better" if (c.diff > 0) != lower_is_better else "B better"
    return "cannot tell apart"


def comparison_table(u: ScoreUncertainty, title: str = "", lower_is_better: bool = False):
    """Every agent pair: difference in points with its paired 95% CI, p, Holm p, tasks, verdict (the
    lower score the better one with `lower_is_better`)."""
    from rich.table import Table

    t = Table(title=title or None)
    for name in ("A", "B"):
        t.add_column(name, style="bold")
    for name in ("A − B (points) [95% CI]", "p", "p (Holm)", "Tasks", "Verdict (Holm p < 0.05)"):
        t.add_column(name, justify="right")
    for c in u.comparisons:
        t.add_row(c.a, c.b, signed_ci(c.diff, c.ci95, c.ci_reason), fmt_p(c.p_value), fmt_p(c.p_holm), str(c.n_tasks),
                  verdict(c, lower_is_better))
    return t


def score_table(rows: Mapping[str, AgentScore], title: str = "", uncertainty: ScoreUncertainty | None = None,
                cuts: Mapping[str, AgentCut] | None = None):
    """A rich Table: one row per agent, domain scores, overall mean ± std (the paper's) and its
    95% task-bootstrap CI, resources (iterations, output tokens, tool calls and pages read per report), ungraded;
    and, where the judge cut some report (`cuts`), the reports cut and the median share of those it saw."""
    from rich.table import Table

    domains = [d for d in Domain if any(d.value in r.domains for r in rows.values())]
    t = Table(title=title or None, show_lines=False)
    t.add_column("Agent", style="bold")
    for d in domains:
        t.add_column(DOMAIN_ABBREV[d], justify="right")
    t.add_column("Score (%)", justify="right")
    if uncertainty is not None:
        t.add_column("Mean [95% CI]", justify="right")
    t.add_column("Runs", justify="right")
    t.add_column("Iter.", justify="right")
    t.add_column("Out tok (k)", justify="right")
    t.add_column("Tools", justify="right")
    t.add_column("Pages", justify="right")
    t.add_column("Ungraded", justify="right")
    t.add_column("Missing", justify="right")
    cut = cuts is not None and any(c.reports_cut for c in cuts.values())
    if cut:
        t.add_column("Reports cut (median seen)", justify="right")
    for agent, r in rows.items():
        t.add_row(
            agent,
            *[pct(r.domains.get(d.value)) for d in domains],
            mean_pm_std(r.overall_mean, r.overall_std),
            *([mean_ci(r.overall_mean, uncertainty.ci95.get(agent), uncertainty.ci_reason.get(agent))]
              if uncertainty is not None else []),
            *run_cells(r),
            *([cuts[agent].cell() if agent in cuts else "—"] if cut and cuts is not None else []),
        )
    return t


WIDE = False
"""Set by a command's --wide: tables at their full width whatever the terminal's (names never cut)."""
NATURAL_WIDTH = 100_000
"""A width no table reaches: each is printed at its own width (rich pads no line to the console's)."""


def console():
    """A rich console on stdout. On a terminal, its width (COLUMNS when set, as rich reads it); with
    --wide (WIDE) or piped (a log, Slurm's output: COLUMNS there is the launching shell's, not the
    reader's), every table at its full width, so no name is cut."""
    from rich.console import Console

    out = Console()
    return Console(width=NATURAL_WIDTH) if WIDE or not out.is_terminal else out


def agreement_table(result: Mapping[str, Mapping], title: str = ""):
    """A rich Table in the Table 3 layout, one row per judge config, in the given order."""
    from rich.table import Table

    COLUMNS = TABLE3_COLUMNS
    fmt = fmt_metric

    t = Table(title=title or None)
    t.add_column("Judge", style="bold")
    t.add_column("Runs", justify="right")
    for _, short, _, _ in COLUMNS:
        t.add_column(short, justify="right")
    for name in ("ρ", "τ", "Agents", "n", "Ungr."):
        t.add_column(name, justify="right")
    for judge, m in result.items():
        t.add_row(
            judge,
            str(m["n_runs"]),
            *[fmt(m[key], how) for _, _, key, how in COLUMNS],
            fmt(m.get("rank_spearman"), "f3"),
            fmt(m.get("rank_kendall"), "f3"),
            str(m.get("rank_agents", "—")),
            str(m["n"]),
            str(m["ungraded"]),
        )
    return t


def breakdown_table(result: Mapping[str, Mapping], attr: str):
    """Mean accuracy (and n) per value of one rubric attribute, one row per judge."""
    from rich.table import Table

    fmt = fmt_metric

    values = sorted({v for m in result.values() for v in m["by"][attr]})
    t = Table(title=f"Mean accuracy (%) by {attr}")
    t.add_column("Judge", style="bold")
    for v in values:
        t.add_column(v, justify="right")
    for judge, m in result.items():
        cells = []
        for v in values:
            g = m["by"][attr].get(v)
            cells.append("—" if g is None else f"{fmt(g['accuracy_mean'], 'pct1')} (n={g['n']})")
        t.add_row(judge, *cells)
    return t



def agreement_ci_table(result: Mapping[str, Mapping], title: str = ""):
    """95% cluster-bootstrap intervals of the Table 3 metrics, one row per judge."""
    from rich.table import Table

    t = Table(title=title or None)
    t.add_column("Judge", style="bold")
    t.add_column("Reports", justify="right")
    for name, _, _ in CI_COLUMNS:
        t.add_column(name, justify="right")
    for judge, m in result.items():
        ci, why = m.get("ci95") or {}, m.get("ci95_reason") or {}
        t.add_row(judge, str(m.get("n_reports", "—")),
                  *[fmt_interval(ci.get(k), how, why.get(k)) for _, k, how in CI_COLUMNS])
    return t


def judge_vs_judge_table(vs: Sequence[Mapping], title: str = ""):
    """Judge A − judge B on the same labelled decisions: accuracy and κ with paired CIs, the report-level test."""
    from rich.table import Table

    t = Table(title=title or None)
    for name in ("A", "B"):
        t.add_column(name, style="bold")
    for name in ("Acc. A − B (points) [95% CI]", "κ A − B [95% CI]", "A only right", "B only right", "p (by report)"):
        t.add_column(name, justify="right")
    for c in vs:
        acc, kap = c["diff_accuracy_mean"], c["diff_kappa"]
        t.add_row(c["a"], c["b"], signed_ci(acc["diff"] if acc["diff"] is not None else math.nan, acc["ci95"],
                                            acc.get("ci95_reason")),
                  "—" if kap["diff"] is None else f"{kap['diff']:+.3f} {fmt_interval(kap['ci95'], 'f3', kap.get('ci95_reason'))}",
                  str(c["mcnemar"]["b"]), str(c["mcnemar"]["c"]), fmt_p(c["paired_test"]["p_value"]))
    return t


def disagreement_table(rows: Sequence[Mapping], title: str = ""):
    """The disagreement list: one row per labelled decision a judge got wrong, most confident first."""
    from rich.table import Table

    t = Table(title=title or None, show_lines=True)
    for name in ("Judge", "Task", "Agent", "Run", "Rubric", "Criterion", "Label", "Verdict", "p_true", "Reason"):
        t.add_column(name, overflow="fold")
    for d in rows:
        t.add_row(f"{d['judge']}#{d['judge_run']}" if d["judge_run"] else d["judge"], d["task_id"], d["agent"],
                  str(d["run"]), d["rubric_id"], d["criterion"] or "—", str(d["label"]).lower(),
                  "ungraded" if d["verdict"] is None else str(d["verdict"]).lower(),
                  "—" if d["p_true"] is None else f"{d['p_true']:.3f}", d["reason"] or "—")
    return t
