"""The report's uncertainty parts: the agent comparison matrix, agreement intervals, judge vs judge, disagreements."""

from __future__ import annotations

from collections.abc import Sequence

from lifesearch_local.analysis.resampling import ScoreUncertainty
from lifesearch_local.output.numbers import CI_COLUMNS, fmt_interval, fmt_p, pts
from lifesearch_local.output.report.data import RunData
from lifesearch_local.output.report.markup import e, slug, table

MAX_DISAGREEMENTS = 300
"""Rows of the disagreement list on the page; `lifesearch agree --disagreements --csv` has them all."""
SHOWN_OPEN = 10
"""Rows shown before the rest fold away under "N more"."""


def ci_note(u: ScoreUncertainty) -> str:
    """How the intervals and comparisons were made, in one line."""
    return (f"Mean [95% CI]: bootstrap over tasks, a task's runs resampled together ({u.resamples} resamples, "
            f"seed {u.seed}, expanded percentile interval). Comparisons: paired over the tasks both agents were "
            "judged on; sign-flip permutation test, Holm-adjusted across pairs (docs/statistics.md).")


def _oriented(u: ScoreUncertainty, a: str, b: str) -> tuple[float, tuple[float, float], float, int, str | None] | None:
    """(a − b, its CI, Holm p, tasks, why no CI) from whichever way round the pair was computed."""
    for c in u.comparisons:
        if (c.a, c.b) == (a, b):
            return c.diff, c.ci95, c.p_holm, c.n_tasks, c.ci_reason
        if (c.a, c.b) == (b, a):
            return -c.diff, (-c.ci95[1], -c.ci95[0]), c.p_holm, c.n_tasks, c.ci_reason
    return None


def comparison_matrix(judge: str, agents: Sequence[str], u: ScoreUncertainty, *, lower_is_better: bool = False,
                      tid: str | None = None) -> str:
    """Row agent − column agent in points with its paired 95% CI; ▲/▼ where the difference holds at
    0.05 after Holm's adjustment (green: the row agent is better, red: worse; with `lower_is_better`
    a negative difference is the better one). The colour is Holm's verdict and the interval is not
    adjusted: where the two disagree (a grey cell whose interval excludes 0, or a coloured one whose
    interval holds 0) the cell says "unadjusted" and gives Holm's p."""
    rows = []
    for a in agents:
        cells = [e(a)]
        for b in agents:
            got = None if a == b else _oriented(u, a, b)
            cells.append('<span class="muted">—</span>' if got is None or got[0] != got[0]  # diagonal, no shared task
                         else matrix_cell(a, b, *got, lower_is_better=lower_is_better))
        rows.append(cells)
    head = ["row − column (points)", *[e(b) for b in agents]]
    return table(head, rows, tid=tid or f"compare-{slug(judge)}", cls="compare", num_from=len(head))  # cells may wrap


def matrix_cell(a: str, b: str, diff: float, ci: tuple[float, float], p_holm: float, n: int, why: str | None, *,
                lower_is_better: bool = False) -> str:
    """One cell of `comparison_matrix`: a − b, its interval, and Holm's verdict as colour and mark."""
    holds = p_holm < 0.05
    better = (diff < 0) if lower_is_better else (diff > 0)
    cls, mark = ("win", "▲ ") if holds and better else ("loss", "▼ ") if holds else ("ns", "")
    span = why or f"[{pts(ci[0])}, {pts(ci[1])}]"
    if not why and (ci[0] > 0 or ci[1] < 0) != holds:
        span += f" unadjusted; Holm p {fmt_p(p_holm)}"
    tip = (f"{a} − {b}: {pts(diff, 2)} points, "
           + (why or f"unadjusted 95% CI [{pts(ci[0], 2)}, {pts(ci[1], 2)}]") + f", Holm p {fmt_p(p_holm)}, {n} tasks")
    return f'<span class="{cls}" title="{e(tip)}">{mark}{pts(diff)}<br><small>{e(span)}</small></span>'


def agreement_ci_tables(data: RunData) -> str:
    """The 95% cluster-bootstrap intervals of the Table 3 metrics, then judge vs judge."""
    res, st = data.agreement or {}, data.agreement_stats
    if not res or st is None:
        return ""
    b = st["bootstrap"]
    head = ["Judge", "Reports", *[e(name) for name, _, _ in CI_COLUMNS]]
    rows = [[e(j), str(m.get("n_reports", "—")),
             *[e(fmt_interval((m.get("ci95") or {}).get(k), how, (m.get("ci95_reason") or {}).get(k))) for _, k, how in CI_COLUMNS]]
            for j, m in res.items()]  # fmt: skip
    out = [f"<h3>95% confidence intervals</h3>{table(head, rows, tid='agreement-ci')}"
           f'<p class="muted">Cluster bootstrap over reports (a report\'s rubric decisions are resampled together), '
           f"{b['resamples']} resamples, seed {b['seed']}; ρ and τ resample tasks.</p>"]
    vs = st["judge_vs_judge"]
    if vs:
        vrows = []
        for c in vs:
            acc, kap, mc = c["diff_accuracy_mean"], c["diff_kappa"], c["mcnemar"]
            vrows.append([e(c["a"]), e(c["b"]), _points(acc["diff"], acc["ci95"], acc.get("ci95_reason")),
                          _signed(kap["diff"], kap["ci95"], kap.get("ci95_reason")),
                          str(mc["b"]), str(mc["c"]), fmt_p(c["paired_test"]["p_value"])])
        head = ["A", "B", "Accuracy A − B (points) [95% CI]", "κ A − B [95% CI]", "Only A right", "Only B right", "p (by report)"]
        out.append(f"<h3>Judge vs judge on the same labelled decisions</h3>{table(head, vrows, tid='judge-vs-judge', num_from=2)}"
                   '<p class="muted">Paired cluster bootstrap (one resampling of reports for both judges), 95% intervals; '
                   "p: two-sided sign-flip permutation test of the per-report accuracy differences (the report is the "
                   "unit: a decision-level test such as McNemar's claims differences that report-to-report skill makes "
                   "up; it stays in the JSON for reference). A CI that excludes 0 says which judge "
                   "agrees better with the labels; one that includes 0 says these labels cannot tell them apart.</p>")
    return "".join(out)


def _points(diff: float | None, ci: Sequence[float] | None, why: str | None = None) -> str:
    if diff is None:
        return "—"
    return f"{pts(diff)} " + (e(f"({why})" if why else "[—]") if ci is None else f"[{pts(ci[0])}, {pts(ci[1])}]")


def _signed(diff: float | None, ci: Sequence[float] | None, why: str | None = None) -> str:
    if diff is None:
        return "—"
    return f"{diff:+.3f} " + (e(f"({why})" if why else "[—]") if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]")


def section_disagreements(data: RunData) -> str:
    """Every labelled decision a judge got wrong, most confident mistakes first (capped on the page)."""
    if not data.labels or data.agreement is None:
        return ""
    rows = data.disagreements
    out = [f'<h2 id="disagreements">Disagreements with the labels <span class="muted">({len(rows)})</span></h2>']
    if not rows:
        return out[0] + '<p class="muted">Every judged decision equals its label.</p>'
    shown = rows[:MAX_DISAGREEMENTS]
    body = [[e(d["judge"] + (f"#{d['judge_run']}" if d["judge_run"] else "")), e(d["task_id"]), e(d["agent"]),
             str(d["run"]), e(d["rubric_id"]), e(d["criterion"] or "—"), _verdict(d["label"]), _verdict(d["verdict"]),
             "—" if d["p_true"] is None else f"{d['p_true']:.3f}",
             f'<span class="reason">{e(d["reason"])}</span>' if d["reason"] else '<span class="muted">—</span>']
            for d in shown]  # fmt: skip
    head = ["Judge", "Task", "Agent", "Run", "Rubric", "Criterion", "Label", "Verdict", "p_true", "Reason"]
    out.append(table(head, body[:SHOWN_OPEN], tid="disagreements-list", cls="dis", num_from=99))
    if len(body) > SHOWN_OPEN:
        out.append(f"<details><summary>{len(body) - SHOWN_OPEN} more</summary>"
                   f"{table(head, body[SHOWN_OPEN:], tid='disagreements-more', cls='dis', num_from=99)}</details>")
    note = "Most confident mistakes first (confidence = the probability the judge gave its own verdict); "
    if len(rows) > len(shown):
        note += f"the first {len(shown)} of {len(rows)} shown; "
    out.append(f'<p class="muted">{e(note)}all of them: <code>lifesearch agree --disagreements --csv</code>.</p>')
    return "".join(out)


def _verdict(v: bool | None) -> str:
    if v is None:
        return '<span class="ung">ungraded</span>'
    return '<span class="yes">true</span>' if v else '<span class="no">false</span>'
