"""A leaderboard as terminal tables (rich renderables) and long CSV rows, in points (0–100); the CLI prints them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lifesearch_local.analysis.leaderboard import Leaderboard, Ranking
from lifesearch_local.output.numbers import mean_ci
from lifesearch_local.output.terminal import comparison_table

LEADERBOARD_COLUMNS = ("judge", "dimension", "domain", "agent", "other", "metric", "value", "ci_lo", "ci_hi",
                       "ci_reason", "p_value", "p_holm", "n_tasks", "rank", "group", "resamples", "seed")  # fmt: skip


MAX_PAIRS_SHOWN = 500
"""Most pairs listed in the terminal (32 agents); past it, one line and the pointer to --csv/--json."""


def ranking_table(r: Ranking, others: Sequence[Ranking] = ()):
    """Rank, group letters, agent, mean [95% CI] and tasks; one more column per other dimension."""
    from rich.table import Table

    u, letters = r.uncertainty, r.letters()
    t = Table(title=f"Leaderboard — judge {r.judge}, {r.dimension} (points, 95% CI{direction(r)})")
    t.add_column("Rank", justify="right")
    t.add_column("Group", justify="left")
    t.add_column("Agent", style="bold")
    t.add_column(f"{r.dimension} [95% CI]", justify="right")
    t.add_column("Tasks", justify="right")
    for o in others:
        t.add_column(f"{o.dimension} [95% CI]" + (" (lower is better)" if o.lower_is_better else ""), justify="right")
    cut = any(c.reports_cut for c in r.cuts.values())
    if cut:
        t.add_column("Reports cut (median seen)", justify="right")
    for k, a in enumerate(r.agents):
        t.add_row(str(k + 1), letters[a], a, mean_ci(r.means[a], u.ci95[a], u.ci_reason.get(a)), str(u.n_tasks[a]),
                  *[_cell(o, a) for o in others], *([cut_cell(r, a)] if cut else []))
    return t


def cut_cell(r: Ranking, agent: str) -> str:
    """`2/6 cut, 61% seen` for an agent from a run or judgments file; `—` for one from a published table."""
    return r.cuts[agent].cell() if agent in r.cuts else "—"


def direction(r: Ranking) -> str:
    """`; lower is better` for a ranking lowest first, else nothing."""
    return "; lower is better" if r.lower_is_better else ""


def _cell(o: Ranking, agent: str) -> str:
    if agent not in o.means:
        return "—"
    return mean_ci(o.means[agent], o.uncertainty.ci95[agent], o.uncertainty.ci_reason.get(agent))


def domain_table(r: Ranking):
    """One row per domain (with its task count), one column per agent: mean [95% CI]."""
    from rich.table import Table

    u = r.uncertainty
    doms = sorted({d for a in r.agents for d in r.domain_means[a]})
    t = Table(title=f"Per domain — judge {r.judge}, {r.dimension} (points, 95% CI in whole points; "
                    "n=1: one task, no interval)")
    t.add_column("Domain", style="bold")
    t.add_column("Tasks", justify="right")
    for a in r.agents:
        t.add_column(a, justify="right")
    for d in doms:
        n = max(u.domain_n_tasks[a].get(d, 0) for a in r.agents)
        cells = [short_ci(r.domain_means[a][d], u.domain_ci95[a][d], u.domain_ci_reason.get(a, {}).get(d))
                 if d in r.domain_means[a] else "—" for a in r.agents]
        t.add_row(d, str(n), *cells)
    return t


def short_ci(mean: float, ci: Sequence[float], why: str | None) -> str:
    """`50.0 [35, 67]`: a mean in points with its interval rounded to whole points, so that a table
    of many agents fits a terminal; without an interval, its reason less ": no interval" (`(n=1)`)."""
    if why:
        return f"{100 * mean:.1f} ({why.split(':')[0]})"
    return f"{100 * mean:.1f} [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]"


def groups_line(r: Ranking) -> str:
    """The groups of agents these tasks cannot tell apart, in words."""
    held = sum(c.holds for c in r.uncertainty.comparisons)
    if len(r.agents) < 2:
        return "one agent: nothing to compare"
    if len(r.groups) == 1:
        return (f"no pair of the {len(r.agents)} agents can be told apart at 0.05 (Holm): "
                f"{len(r.uncertainty.comparisons)} pairs, none holds")
    parts = "; ".join(f"{chr(97 + k) if k < 26 else f'g{k}'}: {', '.join(g)}" for k, g in enumerate(r.groups))
    return (f"{held} of {len(r.uncertainty.comparisons)} differences hold at 0.05 (Holm); agents sharing a group "
            f"letter cannot be told apart: {parts}")


def renderables(lb: Leaderboard) -> list[Any]:
    """Everything the terminal shows, in order: per judge, the ranking, the other dimensions beside
    it, the domains, the groups line and every pair."""
    out: list[Any] = []
    for rankings in lb.rankings:
        lead, others = rankings[0], rankings[1:]
        u = lead.uncertainty
        out.append(ranking_table(lead, others))
        if any(lead.domain_means[a] for a in lead.agents):
            out.append(domain_table(lead))
        out.append(groups_line(lead))
        if len(u.comparisons) > MAX_PAIRS_SHOWN:
            out.append(f"{len(u.comparisons)} pairs ({sum(c.holds for c in u.comparisons)} hold at 0.05 after Holm): "
                       f"more than the terminal shows ({MAX_PAIRS_SHOWN}); `--csv` or `--json` lists each")
        elif u.comparisons:
            out.append(comparison_table(u, title=f"Paired comparisons — judge {lead.judge}, {lead.dimension} "
                                        f"(on the tasks both were scored on{direction(lead)})",
                                        lower_is_better=lead.lower_is_better))
        out.append(f"(95% CIs: task bootstrap, {u.resamples} resamples, seed {u.seed}; paired sign-flip test, "
                   f"Holm-adjusted; sources: {', '.join(dict.fromkeys(s for r in rankings for s in r.sources))})")
    return out


def leaderboard_rows(lb: Leaderboard) -> list[dict[str, Any]]:
    """Long CSV rows in points: per ranking, one `mean` row per agent (and per agent × domain), then
    one `diff` row per pair."""
    rows: list[dict[str, Any]] = []
    for rankings in lb.rankings:
        for r in rankings:
            rows += _ranking_rows(r)
    return rows


def _ci(ci: Sequence[float], why: str | None) -> dict[str, Any]:
    lo, hi = ci
    return {"ci_lo": 100 * lo, "ci_hi": 100 * hi, "ci_reason": why}


def _ranking_rows(r: Ranking) -> list[dict[str, Any]]:
    u, letters = r.uncertainty, r.letters()
    base = {"judge": r.judge, "dimension": r.dimension, "resamples": u.resamples, "seed": u.seed}
    rows = []
    for k, a in enumerate(r.agents):
        rows.append({**base, "agent": a, "metric": "mean", "value": 100 * r.means[a], **_ci(u.ci95[a], u.ci_reason.get(a)),
                     "n_tasks": u.n_tasks[a], "rank": k + 1, "group": letters[a]})
        for m in ("reports_cut", "tokens_cut", "median_share_seen") if a in r.cuts else ():
            rows.append({**base, "agent": a, "metric": m, "value": getattr(r.cuts[a], m)})
        for d, m in r.domain_means[a].items():
            rows.append({**base, "domain": d, "agent": a, "metric": "mean", "value": 100 * m,
                         **_ci(u.domain_ci95[a][d], u.domain_ci_reason.get(a, {}).get(d)),
                         "n_tasks": u.domain_n_tasks[a].get(d)})
    for c in u.comparisons:
        rows.append({**base, "agent": c.a, "other": c.b, "metric": "diff", "value": 100 * c.diff,
                     **_ci(c.ci95, c.ci_reason), "p_value": c.p_value, "p_holm": c.p_holm, "n_tasks": c.n_tasks})
    return rows
