"""A leaderboard as one self-contained HTML page: per judge a summary, then per dimension its groups, chart and comparison matrix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lifesearch_local.analysis.leaderboard import Leaderboard, Ranking
from lifesearch_local.output.leaderboard import cut_cell, groups_line, short_ci
from lifesearch_local.output.numbers import mean_ci
from lifesearch_local.output.report import svg
from lifesearch_local.output.report.html import CSS
from lifesearch_local.output.report.markup import e, slug, table
from lifesearch_local.output.report.uncertainty import comparison_matrix

PAGE_CSS = ("ul.sources{margin:4px 0 12px;padding-left:20px;font-size:13px;overflow-wrap:anywhere}"
            "svg .tag{font-weight:600;fill:#5a6472}h3 .muted,h2 .muted{font-weight:400}")


def render_leaderboard(lb: Leaderboard, title: str = "Leaderboard", sources: Sequence[str] = ()) -> str:
    """The whole page (inline CSS and SVG, no network at view time; all text escaped): a short title,
    the sources listed under it, the notes, then one section per judge."""
    parts = [f"<h1>{e(title)}</h1>"]
    if sources:
        parts.append('<p class="muted">Sources:</p><ul class="sources">'
                     + "".join(f"<li><code>{e(s)}</code></li>" for s in sources) + "</ul>")
    parts.append('<p class="muted">All scores in points (shares × 100, 0–100).</p>')
    if lb.notes:
        parts.append("".join(f'<p class="warn">{e(n)}</p>' for n in lb.notes))
    for rankings in lb.rankings:
        parts.append(_section(rankings))
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{e(title)}</title><style>{CSS}{PAGE_CSS}</style></head><body><main>" + "".join(parts)
            + "</main></body></html>\n")


def _ci_cell(r: Ranking, agent: str) -> str:
    u = r.uncertainty
    return e(mean_ci(r.means[agent], u.ci95[agent], u.ci_reason.get(agent)))


def _short_cell(r: Ranking, agent: str) -> str:
    """A further dimension's cell of the summary, its interval in whole points (the table fits 900 px)."""
    if agent not in r.means:
        return "—"
    u = r.uncertainty
    return e(short_ci(r.means[agent], u.ci95[agent], u.ci_reason.get(agent)))


def better(r: Ranking) -> str:
    return "lower is better" if r.lower_is_better else "higher is better"


def _summary(rankings: list[Ranking], sid: str) -> str:
    """Rank, group, agent, the leading dimension [CI], tasks, the other dimensions, the reports cut."""
    lead, others = rankings[0], rankings[1:]
    u, letters = lead.uncertainty, lead.letters()
    cut = any(c.reports_cut for c in lead.cuts.values())
    head = ["Rank", "Group", "Agent", f"{e(lead.dimension)} [95% CI]", "Tasks",
            *[f"{e(o.dimension)} [95% CI]" + (" (lower is better)" if o.lower_is_better else "") for o in others],
            *(["Reports cut (median seen)"] if cut else [])]
    rows = [[str(k + 1), e(letters[a]), e(a), _ci_cell(lead, a), str(u.n_tasks[a]),
             *[_short_cell(o, a) for o in others], *([e(cut_cell(lead, a))] if cut else [])]
            for k, a in enumerate(lead.agents)]
    return table(head, rows, tid=f"leaderboard-{sid}", num_from=3)


def _section(rankings: list[Ranking]) -> str:
    lead = rankings[0]
    sid = slug(lead.judge)
    sources = ", ".join(dict.fromkeys(Path(src).name for r in rankings for src in r.sources))  # in full above
    dims = ", ".join(f"{r.dimension} ({better(r)})" for r in rankings)
    out = [f'<h2 id="judge-{sid}">Judge {e(lead.judge)}</h2>',
           f'<p class="muted">From {e(sources)}. Ranked by {e(lead.dimension)}; dimensions: {e(dims)}.</p>',
           _summary(rankings, sid)]
    out += [_dimension(r, sid) for r in rankings]
    u = lead.uncertainty
    out.append(f'<p class="muted">95% CIs: bootstrap over tasks ({u.resamples} resamples, seed {u.seed}, expanded '
               "percentile interval); below 2 tasks, or with no spread, no interval is given. Pairs: paired "
               "sign-flip test over the tasks both were scored on, Holm-adjusted across the pairs of each dimension "
               "(docs/statistics.md, docs/leaderboards.md).</p>")
    return "".join(out)


def _dimension(r: Ranking, sid: str) -> str:
    """One dimension: its groups in words, the ranked chart with group letters, the comparison matrix, domains."""
    u, did = r.uncertainty, f"{sid}-{slug(r.dimension)}"
    out = [f'<h3 id="dim-{did}">{e(r.dimension)} <span class="muted">(points, {better(r)})</span></h3>',
           f"<p>{e(groups_line(r))}</p>"]
    cis = {a: (100 * c[0], 100 * c[1]) for a, c in u.ci95.items() if c[0] == c[0]}
    out.append('<div class="charts">' + svg.ranked_bars(
        {a: 100 * r.means[a] for a in r.agents}, title=f"{r.dimension}: mean per agent with 95% CI and group",
        chart_id=f"chart-{did}", x_title=f"{r.dimension}, points ({better(r)}); letters: groups", ci=cis,
        tags=r.letters()) + "</div>")
    bare = [f"{a}: {u.ci_reason[a]}" for a in r.agents if a in u.ci_reason]
    if bare:
        out.append(f'<p class="muted">No interval (and no whisker) for {e("; ".join(bare))}.</p>')
    if len(r.agents) > 1:
        held = sum(c.holds for c in u.comparisons)
        out.append(f'<h4>Which agent is better on {e(r.dimension)}? <span class="muted">({held} of '
                   f"{len(u.comparisons)} differences hold at 0.05 after Holm)</span></h4>"
                   + comparison_matrix(r.judge, r.agents, u, lower_is_better=r.lower_is_better, tid=f"compare-{did}"))
        out.append('<p class="muted">Each cell: row agent − column agent in points over the tasks both were scored '
                   "on, with its paired 95% CI (not adjusted for the number of pairs). Colour and ▲ / ▼: the "
                   "difference holds at 0.05 after Holm's adjustment (green: the row agent is better"
                   + ("; lower is better here" if r.lower_is_better else "") + "). Where the unadjusted interval "
                   "and Holm's verdict disagree, the cell says \"unadjusted\" and gives Holm's p. Agents sharing a "
                   "group letter cannot be told apart on these tasks.</p>")
    out.append(_domains(r, did))
    return "".join(out)


def _domains(r: Ranking, did: str) -> str:
    u = r.uncertainty
    doms = sorted({d for a in r.agents for d in r.domain_means[a]})
    if not doms:
        return ""
    rows = []
    for d in doms:
        n = max(u.domain_n_tasks[a].get(d, 0) for a in r.agents)
        rows.append([e(d), str(n), *[e(mean_ci(r.domain_means[a][d], u.domain_ci95[a][d], u.domain_ci_reason.get(a, {}).get(d)))
                                      if d in r.domain_means[a] else "—" for a in r.agents]])
    return (f"<details><summary>Per domain ({e(r.dimension)}, points, {len(doms)} domains)</summary>"
            + table(["Domain", "Tasks", *[e(a) for a in r.agents]], rows, tid=f"domains-{did}") + "</details>")
