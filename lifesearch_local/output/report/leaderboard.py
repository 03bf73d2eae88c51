"""A leaderboard as one self-contained HTML page: ranking with intervals, chart, comparison matrix, dimensions, domains."""

from __future__ import annotations

from lifesearch_local.analysis.leaderboard import Leaderboard, Ranking
from lifesearch_local.output.numbers import mean_ci
from lifesearch_local.output.report import svg
from lifesearch_local.output.report.html import CSS
from lifesearch_local.output.report.markup import e, slug, table
from lifesearch_local.output.report.uncertainty import comparison_matrix


def render_leaderboard(lb: Leaderboard, title: str = "Leaderboard") -> str:
    """The whole page (inline CSS and SVG, no network at view time; all text escaped)."""
    parts = [f"<h1>{e(title)}</h1>"]
    if lb.notes:
        parts.append("".join(f'<p class="warn">{e(n)}</p>' for n in lb.notes))
    for rankings in lb.rankings:
        parts.append(_section(rankings))
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{e(title)}</title><style>{CSS}</style></head><body><main>" + "".join(parts) + "</main></body></html>\n")


def _ci_cell(r: Ranking, agent: str) -> str:
    u = r.uncertainty
    return e(mean_ci(r.means[agent], u.ci95[agent], u.ci_reason.get(agent)))


def _section(rankings: list[Ranking]) -> str:
    lead, others = rankings[0], rankings[1:]
    u, letters, sid = lead.uncertainty, lead.letters(), slug(lead.judge)
    head = ["Rank", "Group", "Agent", f"{e(lead.dimension)} [95% CI]", "Tasks", *[f"{e(o.dimension)} [95% CI]" for o in others]]
    rows = [[str(k + 1), e(letters[a]), e(a), _ci_cell(lead, a), str(u.n_tasks[a]),
             *[_ci_cell(o, a) if a in o.means else "—" for o in others]] for k, a in enumerate(lead.agents)]
    sources = ", ".join(dict.fromkeys(src for r in rankings for src in r.sources))
    out = [f'<h2 id="judge-{sid}">Judge {e(lead.judge)} <span class="muted">({e(sources)})</span></h2>',
           table(head, rows, tid=f"leaderboard-{sid}", num_from=3)]
    cis = {a: (100 * c[0], 100 * c[1]) for a, c in u.ci95.items() if c[0] == c[0]}
    out.append('<div class="charts">' + svg.hbars({a: 100 * lead.means[a] for a in lead.agents},
                                                  title=f"{lead.dimension} (points) with 95% CI",
                                                  chart_id=f"chart-{sid}", ci=cis) + "</div>")
    bare = [f"{a}: {u.ci_reason[a]}" for a in lead.agents if a in u.ci_reason]
    if bare:
        out.append(f'<p class="muted">No interval (and no whisker) for {e("; ".join(bare))}.</p>')
    held = sum(c.holds for c in u.comparisons)
    if len(lead.agents) > 1:
        out.append(f'<h3>Which agent is better? <span class="muted">({held} of {len(u.comparisons)} differences hold '
                   "at 0.05)</span></h3>" + comparison_matrix(lead.judge, lead.agents, u))
        out.append('<p class="muted">Each cell: row agent − column agent in points over the tasks both were scored on, '
                   "with its paired 95% CI; ▲ / ▼ where the difference holds at 0.05 after Holm's adjustment. Agents "
                   "sharing a group letter cannot be told apart on these tasks.</p>")
    out.append(_domains(lead))
    out.append(f'<p class="muted">95% CIs: bootstrap over tasks ({u.resamples} resamples, seed {u.seed}, expanded '
               "percentile interval); below 2 tasks, or with no spread, no interval is given (docs/statistics.md).</p>")
    return "".join(out)


def _domains(r: Ranking) -> str:
    u = r.uncertainty
    doms = sorted({d for a in r.agents for d in r.domain_means[a]})
    if not doms:
        return ""
    rows = []
    for d in doms:
        n = max(u.domain_n_tasks[a].get(d, 0) for a in r.agents)
        rows.append([e(d), str(n), *[e(mean_ci(r.domain_means[a][d], u.domain_ci95[a][d], u.domain_ci_reason.get(a, {}).get(d)))
                                      if d in r.domain_means[a] else "—" for a in r.agents]])
    return (f"<h3>Per domain ({e(r.dimension)}, points)</h3>"
            + table(["Domain", "Tasks", *[e(a) for a in r.agents]], rows, tid=f"domains-{slug(r.judge)}"))
