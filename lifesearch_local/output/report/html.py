"""The report page: scores, charts, judge agreement, failure modes, manifest (all text escaped)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from lifesearch_local.analysis.agreement import BREAKDOWNS
from lifesearch_local.analysis.caveats import caveats, caveats_html
from lifesearch_local.analysis.scoring import AgentScore
from lifesearch_local.analysis.truncation import agent_cuts, report_cuts
from lifesearch_local.output.numbers import (
    TABLE3_COLUMNS,
    TABLE3_LEGEND,
    fmt_metric,
    mean_ci,
    mean_pm_std,
    pct,
    run_cells,
)
from lifesearch_local.output.report import svg
from lifesearch_local.output.report.certify import section_certify
from lifesearch_local.output.report.data import RunData
from lifesearch_local.output.report.drill import drilldown
from lifesearch_local.output.report.estimate import section_estimate
from lifesearch_local.output.report.judges import section_judges
from lifesearch_local.output.report.markup import e, slug, table
from lifesearch_local.output.report.nodes import section_nodes
from lifesearch_local.output.report.uncertainty import (
    agreement_ci_tables,
    ci_note,
    comparison_matrix,
    section_disagreements,
)
from lifesearch_local.records import DOMAIN_ABBREV, Domain

STATUSES = ("completed", "clarification", "budget", "error")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC",sans-serif;
 margin:0;color:#1d2430;background:#f6f7f9}
main{max-width:1320px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d8dde5;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}.muted{color:#667085}.err{color:#b42318;font-weight:600}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}.card{background:#fff;border:1px solid #d8dde5;border-radius:6px;
 padding:6px 12px}.card b{display:block;font-size:18px}
table{border-collapse:collapse;background:#fff;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #d8dde5;padding:4px 8px;vertical-align:top}th{background:#eef1f5;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th.num{text-align:right}
.wide{max-width:100%;overflow-x:auto}.compare td{text-align:center;line-height:1.25;font-variant-numeric:tabular-nums}.compare td:first-child{text-align:left}
.win{color:#067647;font-weight:600}.loss{color:#b42318;font-weight:600}.ns{color:#475467}
.dis td{max-width:360px;overflow-wrap:anywhere}
svg.chart{background:#fff;border:1px solid #d8dde5;border-radius:6px;margin:6px 8px 12px 0;max-width:100%;height:auto}
svg .axis{stroke:#344054}svg .grid{stroke:#eaecf0}svg text{font-size:11px;fill:#344054}svg .at{font-size:12px}
svg .err{stroke-width:2}.charts{display:flex;flex-wrap:wrap;align-items:flex-start}
details{background:#fff;border:1px solid #d8dde5;border-radius:6px;margin:4px 0;padding:2px 8px}
details details{margin-left:12px}summary{cursor:pointer;padding:3px 0}
pre{white-space:pre-wrap;word-break:break-word;background:#f2f4f7;padding:8px;border-radius:4px;font-size:12px}
.yes{color:#067647;font-weight:600}.no{color:#b42318;font-weight:600}.ung{color:#b54708;font-weight:600}
.warn{background:#fffaeb;border:1px solid #f79009;border-radius:6px;padding:6px 10px;color:#93370d;font-weight:600}
.reason{color:#475467;font-size:12px}.cm td{text-align:right;min-width:64px}.cm td:first-child{text-align:left}
"""


def render(data: RunData) -> str:
    """The whole self-contained report page."""
    title = f"LifeSearch run report — {data.run_dir.name}"
    parts = [
        f"<h1>{e(title)}</h1>",
        summary(data),
        section_scores(data),
        section_charts(data),
        section_agreement(data),
        section_certify(data),
        section_disagreements(data),
        section_failures(data),
        section_reporteval(data),
        f"<h2 id=\"drilldown\">Per-task drill-down</h2>{drilldown(data)}",
        section_judges(data),
        section_estimate(data.manifest),
        section_manifest(data),
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{e(title)}</title><style>{CSS}</style></head><body><main>" + "".join(parts) + "</main></body></html>\n"
    )


def summary(data: RunData) -> str:
    m = data.manifest or {}
    cards = [
        ("tasks", len(data.tasks)),
        ("agents", len({r.agent for r in data.reports} | {j.agent for j in data.judgments})),
        ("reports", len(data.reports)),
        ("judgments", len(data.judgments)),
        ("judges", len({j.judge for j in data.judgments})),
        ("judge runs", len(data.scores)),
        ("ungraded", sum(1 for j in data.judgments if j.satisfied is None)),
        ("labels", len(data.labels)),
    ]
    meta = " · ".join(
        e(f"{k}: {m[k]}") for k in ("package_version", "git_sha", "created", "updated") if m.get(k) is not None
    )
    body = "".join(f'<div class="card" data-key="{k}"><b>{v}</b>{k}</div>' for k, v in cards)
    return f'<p class="muted">{meta}</p><div class="cards">{body}</div>'


# -- scores ---------------------------------------------------------------------------------
def _domains(rows: Mapping[str, AgentScore]) -> list[Domain]:
    return [d for d in Domain if any(d.value in r.domains for r in rows.values())]


def score_table(judge: str, rows: Mapping[str, AgentScore], u: Any = None, cuts: Mapping | None = None) -> str:
    """The paper's Table 4 layout for one judge, with the 95% CI of each score beside its ± std; where the
    judge cut some report (`cuts`: truncation.agent_cuts of this judge), the reports cut and the median seen."""
    doms = _domains(rows)
    cut = bool(cuts) and any(c.reports_cut for c in cuts.values())
    head = ["Agent", *[e(DOMAIN_ABBREV[d]) for d in doms], "Score (%)", "Mean [95% CI]", "Runs", "Iter.", "Out tok (k)",
            "Tool calls", "Pages read", "Ungraded", "Missing", *(["Reports cut (median seen)"] if cut else [])]  # fmt: skip
    body = []
    for agent, r in rows.items():
        body.append(
            [
                e(agent),
                *[pct(r.domains.get(d.value)) for d in doms],
                e(mean_pm_std(r.overall_mean, r.overall_std)),
                e(mean_ci(r.overall_mean, u.ci95.get(agent) if u else None, u.ci_reason.get(agent) if u else None)),
                *run_cells(r),
                *([e(cuts[agent].cell()) if cuts and agent in cuts else "—"] if cut else []),
            ]
        )
    return table(head, body, tid=f"scores-{slug(judge)}", cls="scores")


def section_scores(data: RunData) -> str:
    # the caveats every command prints (random weights, a near-constant judge), above the tables
    out = ['<h2 id="scores">Scores (Table 4 layout)</h2>', caveats_html(caveats(manifest=data.manifest, judgments=data.judgments,
                                                                                   reports=data.reports))]
    if data.score_error:
        out.append(f'<p class="err">Scoring failed: {e(data.score_error)}</p>')
    if not data.scores:
        out.append('<p class="muted">No judgments in this run yet.</p>')
    out.append(missing_note(data))
    # A judge's repetitions (name#k, k ≥ 1) fold away: the first pass is what the benchmark reports.
    reps = [j for j in data.scores if "#" in j]
    cuts = agent_cuts(report_cuts(data.judgments, data.reports))
    for judge, rows in data.scores.items():
        if judge not in reps:
            out.append(f"<h3>Judge {e(judge)}</h3>{score_table(judge, rows, data.uncertainty.get(judge), cuts.get(judge))}")
    if reps:
        inner = "".join(f"<h3>Judge {e(j)}</h3>{score_table(j, data.scores[j], data.uncertainty.get(j), cuts.get(j))}"
                        for j in reps)
        out.append(f"<details><summary>Judge repetitions ({len(reps)})</summary>{inner}</details>")
    if data.scores:
        out.append(f'<p class="muted">{e(score_caption(data))}</p>')
        out.append(section_comparisons(data, [j for j in data.scores if j not in reps]))
    return "".join(out)


def missing_note(data: RunData) -> str:
    """A warning naming how many rubric decisions no judge made (scored with --allow-missing), per judge."""
    missing = {j: n for j, rows in data.scores.items() if (n := sum(r.missing for r in rows.values()))}
    if not missing:
        return ""
    each = "; ".join(f"judge {j}: {n}" for j, n in missing.items())
    return (f'<p class="warn missing" id="missing-judgments">Missing judgments counted as not satisfied '
            f"(--allow-missing): {e(each)} rubric decision(s) were never judged, so these scores are lower bounds "
            "until they are.</p>")


def score_caption(data: RunData) -> str:
    """What the score columns are; the ± only where an agent has more than one run."""
    runs = {len(r.runs) for rows in data.scores.values() for r in rows.values()}
    if runs == {1}:
        spread = "Score: one run per agent, so no ± (a sample std needs two runs)"
    elif 1 in runs:
        spread = "Score: mean ± sample std over agent runs (no ± where an agent has one run)"
    else:
        spread = "Score: mean ± sample std over agent runs, as the paper reports"
    u = next(iter(data.uncertainty.values()), None)
    return (f"{spread}. " + (ci_note(u) + " " if u else "")
            + "Domain columns are means over runs; ungraded and missing judgments count as not satisfied.")


def section_comparisons(data: RunData, judges: Sequence[str]) -> str:
    """The comparison matrix of each judge (not of its repetitions)."""
    out = []
    for judge in judges:
        u, agents = data.uncertainty.get(judge), list(data.scores[judge])
        if u is None or len(agents) < 2:
            continue
        held = sum(c.holds for c in u.comparisons)
        out.append(f"<h3>Which agent is better? Judge {e(judge)} <span class=\"muted\">({held} of {len(u.comparisons)} "
                   "differences hold at 0.05)</span></h3>" + comparison_matrix(judge, agents, u))
    if out:
        out.append('<p class="muted">Each cell: row agent − column agent in points, with its paired 95% CI; ▲ / ▼ '
                   "where the difference holds at 0.05 after Holm's adjustment across all pairs. A CI that spans 0 "
                   "means these tasks cannot tell the two agents apart.</p>")
    return "".join(out)


def section_charts(data: RunData) -> str:
    if not data.scores:
        return ""
    judge, rows = next(iter(data.scores.items()))
    out = [f'<h2 id="charts">Charts <span class="muted">(judge {e(judge)})</span></h2><div class="charts">']
    u = data.uncertainty.get(judge)
    cis = {a: (100 * c[0], 100 * c[1]) for a, c in (u.ci95 if u else {}).items() if c[0] == c[0]}
    out.append(svg.hbars({a: 100 * r.overall_mean for a, r in rows.items()}, title="Overall score (%) with 95% CI",
                         chart_id="chart-overall", ci=cis))
    pts = [
        svg.Point(a, r.output_tokens / 1000, 100 * r.overall_mean, *cis.get(a, (None, None)))
        for a, r in rows.items()
        if r.output_tokens is not None
    ]
    if pts:
        out.append(svg.scatter(pts, x_title="Output tokens per task (k)", y_title="Overall score (%)", chart_id="chart-scatter"))
    else:
        out.append('<p class="muted">No output-token counts in the reports: no score vs tokens chart.</p>')
    out.append(domain_chart(rows, u))
    return "".join(out) + "</div>"


def domain_chart(rows: Mapping[str, AgentScore], u: Any = None) -> str:
    """Domain scores per agent with their 95% CIs as error bars and each domain's task count under
    its name; a domain resting on one task gets no error bar, and the note under the chart says so."""
    doms = _domains(rows)
    n_of = {d.value: max((n.get(d.value, 0) for n in (u.domain_n_tasks.values() if u else ())), default=0) for d in doms}
    label = {d: DOMAIN_ABBREV[d] + (f" (n={n_of[d.value]})" if n_of[d.value] else "") for d in doms}
    series = {a: {label[d]: 100 * r.domains[d.value] for d in doms if d.value in r.domains} for a, r in rows.items()}
    cis = {a: {label[d]: (100 * c[0], 100 * c[1]) for d in doms
               if (c := u.domain_ci95.get(a, {}).get(d.value)) is not None and c[0] == c[0]} for a in rows} if u else {}
    chart = svg.grouped_bars([label[d] for d in doms], series, y_title="Domain score (%) with 95% CI",
                             chart_id="chart-domains", ci=cis)
    bare = sorted({f"{DOMAIN_ABBREV[d]}: {why}" for a in rows for d in doms
                   if (why := (u.domain_ci_reason.get(a, {}).get(d.value) if u else None))})
    note = f'<p class="muted">No error bar where there is no interval: {e("; ".join(bare))}.</p>' if bare else ""
    return chart + note


# -- agreement ------------------------------------------------------------------------------
def section_agreement(data: RunData) -> str:
    if not data.labels:
        return ""
    src = ", ".join(sorted({lab.source for lab in data.labels}))
    out = [f'<h2 id="agreement">Judge agreement <span class="muted">({len(data.labels)} labels: {e(src)})</span></h2>']
    if data.agreement_error:
        return out[0] + f'<p class="err">Agreement not computed: {e(data.agreement_error)}</p>'
    if not data.agreement:
        return out[0] + '<p class="muted">No judgments to compare.</p>'
    res = data.agreement
    head = ["Judge", "Runs", *[e(c[0]) for c in TABLE3_COLUMNS], "Rank ρ", "Rank τ", "Agents", "n", "Ungraded"]
    rows = [
        [e(j), str(m["n_runs"]), *[fmt_metric(m[k], how) for _, _, k, how in TABLE3_COLUMNS],
         fmt_metric(m["rank_spearman"], "f3"), fmt_metric(m["rank_kendall"], "f3"), str(m.get("rank_agents", "—")), str(m["n"]),
         str(m["ungraded"])]
        for j, m in res.items()
    ]  # fmt: skip
    out.append(table(head, rows, tid="agreement-table", cls="agreement") + f'<p class="muted">{e(TABLE3_LEGEND)}</p>')
    out.append(agreement_ci_tables(data))
    for attr in BREAKDOWNS:
        values = sorted({v for m in res.values() for v in m["by"][attr]})
        brows = [
            [e(j), *[_acc_n(m["by"][attr].get(v)) for v in values]]
            for j, m in res.items()
        ]  # fmt: skip
        out.append(f"<h3>Mean accuracy (%) by {e(attr)}</h3>" + table(["Judge", *map(e, values)], brows, tid=f"by-{attr}"))
    out.append("<h3>Confusion matrices (pooled over judge runs)</h3>")
    out += [confusion_table(j, m["confusion"]) for j, m in res.items()]
    return "".join(out)


def _acc_n(g: Mapping | None) -> str:
    return "—" if g is None else f"{fmt_metric(g['accuracy_mean'], 'pct1')} (n={g['n']})"


def confusion_table(judge: str, cm: Mapping) -> str:
    """Label rows × decision columns, each cell shaded by its share of the row."""
    head = [f"{e(judge)}: label ↓ / decision →", *[e(d) for d in cm["decisions"]]]
    rows = []
    for label, counts in zip(cm["labels"], cm["counts"], strict=True):
        total = sum(counts) or 1
        cells = [f'<span style="display:block;background:rgba(78,121,167,{0.5 * c / total:.2f})">{c}</span>' for c in counts]
        rows.append([e(label), *cells])
    return table(head, rows, tid=f"confusion-{slug(judge)}", cls="cm")


# -- failure modes --------------------------------------------------------------------------
def section_failures(data: RunData) -> str:
    agents = sorted({r.agent for r in data.reports})
    by_agent: dict[str, Counter] = {a: Counter(r.status for r in data.reports if r.agent == a) for a in agents}
    has_fetch = bool(data.fetch)
    head = ["Agent", "Reports", *STATUSES]
    if has_fetch:
        head += ["Fetches", "Fetch failures", "Failure kinds"]
    rows = []
    for a in sorted(set(agents) | set(data.fetch)):
        c = by_agent.get(a, Counter())
        row = [e(a), str(sum(c.values())), *[str(c[s]) for s in STATUSES]]
        if has_fetch:
            f = data.fetch.get(a)
            kinds = ", ".join(f"{k}: {n}" for k, n in sorted(f.failures.items())) if f else ""
            row += [str(f.calls if f else 0), str(sum(f.failures.values()) if f else 0), e(kinds)]
        rows.append(row)
    note = "" if has_fetch else '<p class="muted">No trajectories/ step logs: fetch failures not counted.</p>'
    return '<h2 id="failures">Failure modes</h2>' + table(head, rows, tid="failures-table") + note


# -- ReportEval -----------------------------------------------------------------------------
REPORTEVAL_COLUMNS = [  # (header, metric, field, format)
    ("Compr.", "quality", "comprehensiveness", "{:.2f}"), ("Coher.", "quality", "coherence", "{:.2f}"),
    ("Clarity", "quality", "clarity", "{:.2f}"), ("Insight", "quality", "insightfulness", "{:.2f}"),
    ("Overall", "quality", "overall", "{:.2f}"), ("Redund. (4 = none)", "redundancy", "mean", "{:.2f}"),
    ("Mean support", "factuality", "mean_support", "{:+.2f}"),
    ("Full support", "factuality", "full_support_rate", "{:.1%}"),
    ("Claims/report", "factuality", "claims_per_report", "{:.1f}"),
    ("Unverifiable", "factuality", "unverifiable_share", "{:.1%}"),
]


def section_reporteval(data: RunData) -> str:
    """DeepResearch-ReportEval metrics per judge and agent (0–4 scales; support in [−1, 1])."""
    if not data.reporteval:
        return ""
    out = ['<h2 id="reporteval">Report quality, redundancy, factuality (ReportEval)</h2>']
    for judge, agents in data.reporteval.items():
        rows = []
        for agent, metrics in agents.items():
            cells = []
            for _, metric, fld, fmt in REPORTEVAL_COLUMNS:
                v = (metrics.get(metric) or {}).get(fld)
                cells.append("—" if v is None else fmt.format(v))
            rows.append([e(agent), *cells])
        out.append(f"<h3>Judge {e(judge)}</h3>" + table(["Agent", *[c[0] for c in REPORTEVAL_COLUMNS]], rows,
                                                          tid=f"reporteval-{slug(judge)}"))
    return "".join(out)


# -- manifest -------------------------------------------------------------------------------
def _flat(d: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, Mapping):
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def section_manifest(data: RunData) -> str:
    out = ['<h2 id="manifest">Manifest</h2>']
    m = data.manifest
    if m is None:
        out.append('<p class="muted">No manifest.json.</p>')
    else:
        stages = m.get("stages") or {}
        if stages:
            rows = [[e(stage), e(k), e(_fmt_value(v))] for stage, vals in stages.items() for k, v in _flat(vals)
                    if k not in ("nodes", "replicas_lost")]  # shown in their own tables
            out.append("<h3>Stages (cost and throughput)</h3>" + table(["Stage", "Figure", "Value"], rows, tid="stages", num_from=2))
            out.append(section_nodes(stages))
        out.append(f"<details><summary>manifest.json</summary><pre>{e(json.dumps(m, indent=2, ensure_ascii=False))}</pre></details>")
    if data.config_text is not None:
        out.append(f"<details><summary>config.yaml</summary><pre>{e(data.config_text)}</pre></details>")
    return "".join(out)


def _fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
