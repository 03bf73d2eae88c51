"""Per-task drill-down of the report: each report's rubrics with every judge's decision."""

from __future__ import annotations

from collections import defaultdict
from html import escape

from lifesearch_local.analysis.scoring import judge_name, task_score
from lifesearch_local.output.report.data import RunData
from lifesearch_local.records import Judgment, Report, Task

MAX_REPORTS = 500
"""Reports shown in the drill-down; the page of a full 203-task run would otherwise weigh gigabytes."""
MAX_TEXT = 4000
"""Characters of each report's text shown; the whole text stays in reports.jsonl."""

Slot = tuple[str, str, int]  # task_id, agent, run


def e(x: object) -> str:
    return escape(str(x), quote=True)


def decision_cell(j: Judgment | None) -> str:
    if j is None:
        return '<span class="muted">—</span>'
    if j.satisfied is None:
        out = '<span class="ung">? ungraded</span>'
    else:
        out = '<span class="yes">✓ true</span>' if j.satisfied else '<span class="no">✗ false</span>'
    if j.p_true is not None:
        out += f" p={j.p_true:.2f}"
    if j.reason:
        out += f'<div class="reason">{e(j.reason)}</div>'
    return out


def _index(data: RunData) -> tuple[dict[tuple[str, Slot], dict[str, Judgment]], list[str]]:
    by: dict[tuple[str, Slot], dict[str, Judgment]] = defaultdict(dict)
    names: dict[str, None] = {}
    for j in data.judgments:
        name = judge_name(j)
        names[name] = None
        by[(name, (j.task_id, j.agent, j.run))][j.rubric_id] = j
    return by, list(names)


def report_block(
    task: Task, slot: Slot, report: Report | None, labels: dict[str, bool], index: dict, judges: list[str]
) -> str:
    """One report: status, score per judge, text excerpt, and the rubric table."""
    scores = []
    for name in judges:
        got = index.get((name, slot))
        if got:
            s = task_score(task.rubrics, {rid: j.satisfied for rid, j in got.items()})
            scores.append(f"{e(name)}: {100 * s:.1f}%")
    status = report.status if report else "no report record"
    head = f"{e(slot[1])} · run {slot[2]} · {e(status)}" + (f" · {' · '.join(scores)}" if scores else "")
    out = [f'<details class="report" data-agent="{e(slot[1])}" data-run="{slot[2]}"><summary>{head}</summary>']
    if report is not None:
        meta = [f"{k}: {v}" for k, v in (("iterations", report.iterations), ("output tokens", report.output_tokens),
                                           ("wall s", report.wall_s), ("error", report.error)) if v is not None]  # fmt: skip
        if meta:
            out.append(f'<p class="muted">{e(" · ".join(meta))}</p>')
        text = report.text[:MAX_TEXT] + (f"\n… ({len(report.text) - MAX_TEXT} more characters in reports.jsonl)"
                                          if len(report.text) > MAX_TEXT else "")  # fmt: skip
        out.append(f"<details><summary>Report text ({len(report.text)} characters)</summary><pre>{e(text)}</pre></details>")
    head_cells = ["ID", "Criterion", "Weight", "Type · necessity · priority"] + (["Label"] if labels else [])
    head_cells += [f"Judge {name}" for name in judges]
    rows = []
    for r in task.rubrics:
        cells = [e(r.id), e(r.criterion), f"{r.weight:g}", e(f"{r.type} · {r.necessity} · {r.priority}")]
        if labels:
            lab = labels.get(r.id)
            cells.append("—" if lab is None else ('<span class="yes">true</span>' if lab else '<span class="no">false</span>'))
        cells += [decision_cell(index.get((name, slot), {}).get(r.id)) for name in judges]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    th = "".join(f"<th>{e(h)}</th>" for h in head_cells)
    out.append(f'<table class="rubrics"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table></details>')
    return "".join(out)


def drilldown(data: RunData) -> str:
    """Collapsible task → report → rubric view, capped at MAX_REPORTS reports."""
    index, judges = _index(data)
    reports = {r.key: r for r in data.reports}
    labels: dict[Slot, dict[str, bool]] = defaultdict(dict)
    for lab in data.labels:
        labels[(lab.task_id, lab.agent, lab.run)][lab.rubric_id] = lab.satisfied
    slots: dict[str, set[Slot]] = defaultdict(set)
    for k in reports:
        slots[k[0]].add(k)
    for _, slot in index:
        slots[slot[0]].add(slot)
    out, shown, total = [], 0, sum(len(v) for v in slots.values())
    for task in data.tasks:
        mine = sorted(slots.get(task.id, ()), key=lambda s: (s[1], s[2]))
        if not mine or shown >= MAX_REPORTS:
            continue
        blocks = []
        for slot in mine[: MAX_REPORTS - shown]:
            blocks.append(report_block(task, slot, reports.get(slot), labels.get(slot, {}), index, judges))
            shown += 1
        q = task.question if len(task.question) <= 120 else task.question[:117] + "…"
        out.append(
            f'<details class="task" id="task-{e(task.id)}" data-task="{e(task.id)}"><summary><b>{e(task.id)}</b> · '
            f"{e(task.domain.value)} · {e(task.language)} · {len(task.rubrics)} rubrics · {e(q)}</summary>"
            f"<p>{e(task.question)}</p>{''.join(blocks)}</details>"
        )
    if shown < total:
        out.append(f'<p class="muted">{total - shown} more report(s) not shown (cap {MAX_REPORTS}).</p>')
    return "".join(out) or '<p class="muted">No reports or judgments.</p>'
