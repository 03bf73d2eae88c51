"""Terminal tables in the paper's layouts (Table 4 scores)."""

from __future__ import annotations

from collections.abc import Mapping

from .records import DOMAIN_ABBREV, Domain
from .scoring import AgentScore


def pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}"


def mean_pm_std(mean: float, std: float | None) -> str:
    return f"{100 * mean:.2f} ± {100 * std:.2f}" if std is not None else f"{100 * mean:.2f}"


def score_table(rows: Mapping[str, AgentScore], title: str = ""):
    """A rich Table: one row per agent, domain scores, overall mean ± std, resources, ungraded."""
    from rich.table import Table

    domains = [d for d in Domain if any(d.value in r.domains for r in rows.values())]
    t = Table(title=title or None, show_lines=False)
    t.add_column("Agent", style="bold")
    for d in domains:
        t.add_column(DOMAIN_ABBREV[d], justify="right")
    t.add_column("Score (%)", justify="right")
    t.add_column("Runs", justify="right")
    t.add_column("Iter.", justify="right")
    t.add_column("Out tok (k)", justify="right")
    t.add_column("Ungraded", justify="right")
    t.add_column("Missing", justify="right")
    for agent, r in rows.items():
        t.add_row(
            agent,
            *[pct(r.domains.get(d.value)) for d in domains],
            mean_pm_std(r.overall_mean, r.overall_std),
            str(len(r.runs)),
            "—" if r.iterations is None else f"{r.iterations:.1f}",
            "—" if r.output_tokens is None else f"{r.output_tokens / 1000:.1f}",
            str(r.ungraded),
            str(r.missing),
        )
    return t


def console():
    """A rich console on stdout; piped output gets 160 columns instead of rich's 80, which
    would wrap the paper's wide tables."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=160)


def print_scores(by_judge: Mapping[str, Mapping[str, AgentScore]]) -> None:
    console_ = console()
    for judge, rows in by_judge.items():
        console_.print(score_table(rows, title=f"LifeSearch scores — judge {judge}"))
        ungraded = sum(r.ungraded for r in rows.values())
        missing = sum(r.missing for r in rows.values())
        console_.print(
            f"judge {judge}: {ungraded} ungraded judgment(s) counted as not satisfied"
            + (f"; {missing} missing judgment(s) counted as not satisfied (--allow-missing)" if missing else "")
        )


def agreement_table(result: Mapping[str, Mapping], title: str = ""):
    """A rich Table in the Table 3 layout, one row per judge config, in the given order."""
    from rich.table import Table

    from .agreement import TABLE3_COLUMNS as COLUMNS
    from .agreement import fmt_metric as fmt

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

    from .agreement import fmt_metric as fmt

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


def print_agreement(result: Mapping[str, Mapping], source: str, n_labels: int) -> None:
    from .agreement import BREAKDOWNS, TABLE3_LEGEND
    out = console()
    out.print(agreement_table(result, title=f"Judge agreement with {n_labels} labels ({source})"))
    out.print(TABLE3_LEGEND, style="dim")
    for attr in BREAKDOWNS:
        out.print(breakdown_table(result, attr))
    ungraded = sum(m["ungraded"] for m in result.values())
    if ungraded:
        out.print(f"{ungraded} ungraded judgment(s) counted as wrong")
