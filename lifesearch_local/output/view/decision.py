"""The page of one decision: the verdict, p_true, reason and raw answer, the labels, the prompt the
judge read (the cut marked), the same decision by the other judges, and the run's replays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lifesearch_local.analysis.disagreements import confidence
from lifesearch_local.output.report.markup import e
from lifesearch_local.output.view.pages import (
    label_html,
    layout,
    p_html,
    problems_html,
    source_nav,
    verdict_html,
)
from lifesearch_local.output.view.prompt import GroupOf, PromptRenderer, fitted_prompt
from lifesearch_local.output.view.query import Query, select
from lifesearch_local.output.view.sources import Source
from lifesearch_local.output.view.tokens import judge_settings
from lifesearch_local.records import Judgment, Rubric, Task


def facts(rows: Sequence[tuple[str, str]]) -> str:
    """A definition list; values are HTML already."""
    return '<dl class="facts">' + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def decision_page(n: int, src: Source, i: int, back: Query, sources: Sequence[Source],
                  render: PromptRenderer | None, group_of: GroupOf | None = None, choices: Sequence[str] = ()) -> str:
    """The page; `render` and `group_of` (+ `choices`) are the judge's own code, handed in by the command."""
    ix = src.index
    j = ix.record(i)
    task = src.tasks.get(j.task_id)
    rubric = next((r for r in task.rubrics if r.id == j.rubric_id), None) if task else None
    label = int(ix.label[i])
    agree = "—" if label == -1 else ("agrees" if int(ix.verdict[i]) == label else '<span class="no">disagrees</span>')
    conf = confidence(j.satisfied, j.p_true)
    rows = [("Task", e(j.task_id) + (f' <span class="muted">({e(task.domain.value)}, {e(task.language)})</span>' if task else "")),
            ("Agent · run", f"{e(j.agent)} · {j.run}"), ("Rubric", e(j.rubric_id)), ("Judge", e(ix.judge_of(i))),
            ("Verdict", verdict_html(int(ix.verdict[i]))), ("p_true", p_html(float(ix.p_true[i]))),
            ("Confidence in its verdict", "—" if conf is None else f"{conf:.3f}"),
            ("Label", f"{label_html(label)} {agree}" + (f' <span class="muted">({e(src.labels_path)})</span>'
                                                        if src.labels_path and label != -1 else "")),
            ("Report tokens cut", f"<b>{j.truncated_tokens}</b>" if j.truncated_tokens else "0 (read whole)"),
            ("Prompt hash · settings · rubric hash", e(f"{j.prompt_hash or '—'} · {j.settings or '—'} · {j.rubric_hash or '—'}")),
            ("Line", e(f"{src.judgments}:{int(ix.line[i])}"))]
    if j.panel is not None:
        votes = ", ".join(f"{m}: {v}" for m, v in zip(j.panel.members, j.panel.votes))
        rows.append(("Panel", e(f"{j.panel.combine} of {votes}" + (" (tie broken by mean p_true)" if j.panel.tie else ""))))
    body = [problems_html(src), nav_html(n, src, i, back), facts(rows)]
    if rubric is not None:
        body.append("<h2>Rubric</h2>" + facts([("Criterion", e(rubric.criterion)), ("Weight", f"{rubric.weight:g}"),
                                              ("Type · necessity · priority", e(f"{rubric.type} · {rubric.necessity} · {rubric.priority}"))]))
    body.append(f'<h2>Reason</h2><pre id="reason">{e(j.reason or "—")}</pre>')
    body.append(f'<h2>Raw output</h2><pre id="raw">{e(j.raw) if j.raw else "— (choice mode records p_true, no text)"}</pre>')
    body.append(prompt_html(src, j, task, rubric, render))
    body.append(refit_html(src, j, task, group_of, choices))
    body.append(others_html(sources, j))
    body.append(replay_html(src))
    return layout(f"Decision {i} · {j.task_id} · {j.rubric_id}", "".join(body), source_nav(n))


def nav_html(n: int, src: Source, i: int, back: Query) -> str:
    """The way back to the list this decision was opened from, and its neighbours in that list."""
    back_href = f"/s/{n}/decisions" + (f"?{back.encode()}" if back.encode() else "")
    out = [f'<a id="back" href="{e(back_href)}">← back to the decisions</a>']
    shown = select(src.index, back)
    at = np.flatnonzero(shown == i)
    if len(at):
        k = int(at[0])
        for m, rel, text in ((k - 1, "prev", "‹ previous"), (k + 1, "next", "next ›")):
            if 0 <= m < len(shown):  # the neighbour keeps the list, and the page of it that holds the neighbour
                q = back.encode(page=m // back.per_page + 1)
                out.append(f'<a id="{rel}" href="/s/{n}/d/{int(shown[m])}?{e(q)}">{text}</a>')
        out.append(f'<span class="muted">{k + 1} of {len(shown)} in this list</span>')
    return f'<p class="pager">{"".join(out)}</p>'


def prompt_html(src: Source, j: Judgment, task: Task | None, rubric: Rubric | None, render: PromptRenderer | None) -> str:
    head = "<h2>The prompt the judge read</h2>"
    report = src.report((j.task_id, j.agent, j.run))
    if render is None or task is None or rubric is None or report is None:
        missing = ("the prompt renderer" if render is None else "the task (no tasks file)" if task is None
                   else f"rubric {j.rubric_id} in the tasks file" if rubric is None else "the report (no reports file)")
        return head + f'<p class="warn">Not shown: {e(missing)} is not at hand.</p>'
    jt = src.tokenizers.get(j.judge) if j.truncated_tokens else None
    model = jt.model if jt is not None else None
    fp = fitted_prompt(render, task, rubric, report.text, j.truncated_tokens, jt.offsets if jt is not None else None)
    notes = []
    if j.prompt_hash and fp.template_hash != j.prompt_hash:
        notes.append(f"The prompt template changed since this decision (recorded hash {j.prompt_hash}, now "
                     f"{fp.template_hash}): below is today's template around the same report.")
    if fp.truncated_tokens:
        where = (f"The cut is placed with the judge's tokenizer ({model}), where its fitting placed it"
                 if fp.exact else f"Where the cut falls is estimated here at {fp.chars_per_token:g} characters per "
                 f"token (the judge's tokenizer{f' ({model})' if model else ''} is not on this machine)")
        notes.append(f"The judge read the head and tail of this report: {fp.truncated_tokens} tokens of its middle were "
                     f"cut to fit its context, and the marker below is what it read there. {where}; the struck-through "
                     "text is what it did not read.")
    spans = "".join(f'<span class="{p.kind}">{e(p.text)}</span>' for p in fp.pieces)
    return (head + "".join(f'<p class="warn">{e(x)}</p>' for x in notes)
            + '<p class="muted">Template text plain, the report shaded; rendered with the judge\'s own prompt renderer.</p>'
            + f'<pre class="prompt" id="prompt">{spans}</pre>')


def refit_html(src: Source, j: Judgment, task: Task | None, group_of: GroupOf | None, choices: Sequence[str]) -> str:
    """Choice mode, the judge's model on this machine: its choice group for this report rebuilt and fitted
    again by the engines' own code; the tokens that cuts against those recorded, and the decoded prompt."""
    report = src.report((j.task_id, j.agent, j.run))
    settings = judge_settings(src.manifest, j.judge)
    if group_of is None or task is None or report is None or settings.get("mode") != "choice":
        return ""
    jt = src.tokenizers.get(j.judge)
    if jt is None or jt.tokenizer is None:
        return ""
    group, ids = group_of(task, report)
    if j.rubric_id not in ids:
        return ""
    try:
        cut, text = jt.refit(group, choices, ids.index(j.rubric_id))
    except Exception as exc:  # noqa: BLE001 - a re-run that fails is said; the page stays
        return f'<p class="warn" id="refit">The fitting could not be re-run here: {e(type(exc).__name__)}: {e(exc)}</p>'
    same = cut == j.truncated_tokens
    verdict = (f"cuts {cut} token(s), as recorded" if same else
               f'<span class="no">cuts {cut} token(s), but {j.truncated_tokens} are recorded</span> (the rubrics judged '
               "together, the judge's settings or the files differ from when it ran)")
    return (f'<h2>Exactly what the model read</h2><p id="refit">Re-run here with {e(jt.model)}\'s tokenizer and '
            f"context limit ({e(jt.limit)} positions), the engines' fitting {verdict}.</p>"
            "<details><summary>The token ids up to the decision, decoded (chat template included)</summary>"
            f'<pre id="decoded">{e(text)}</pre></details>')


def others_html(sources: Sequence[Source], j: Judgment) -> str:
    """The same task, agent, run and rubric as decided by every judge of every source."""
    rows = []
    for n, s in enumerate(sources):
        ix = s.index
        codes = [ix.tasks.codes.get(j.task_id), ix.agents.codes.get(j.agent), ix.rubrics.codes.get(j.rubric_id)]
        if None in codes:
            continue
        hit = np.flatnonzero((ix.task == codes[0]) & (ix.agent == codes[1]) & (ix.rubric == codes[2]) & (ix.run == j.run))
        for k in hit:
            k = int(k)
            rows.append(f'<tr><td>{e(s.name)}</td><td><a href="/s/{n}/d/{k}">{e(ix.judge_of(k))}</a></td>'
                        f"<td>{verdict_html(int(ix.verdict[k]))}</td><td class=\"num\">{p_html(float(ix.p_true[k]))}</td>"
                        f"<td>{label_html(int(ix.label[k]))}</td></tr>")
    return ('<h2>This decision by every judge</h2><div class="wide"><table id="others"><thead><tr><th>Source</th>'
            '<th>Judge</th><th>Verdict</th><th class="num">p_true</th><th>Label</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table></div>")


def replay_html(src: Source) -> str:
    replays = (src.manifest or {}).get("replays") or []
    if not replays:
        return ('<h2>Replay</h2><p class="muted">No replay recorded in this run directory '
                "(<code>lifesearch rejudge</code> writes one into its manifest).</p>")
    last = replays[-1] if isinstance(replays[-1], dict) else {}
    dp = last.get("max_abs_dp")
    return (f"<h2>Replay</h2><p>{len(replays)} replay(s) recorded; the latest ({e(last.get('at'))}) judged "
            f"{e(last.get('sampled'))} of {e(last.get('eligible'))} decisions again: max |Δp| "
            f"{'—' if dp is None else f'{dp:.4f}'}, {e(last.get('flips'))} flip(s). "
            '<span class="muted">A replay records its summary, not which decisions it drew, so this decision\'s own '
            "replay is not known.</span></p>")
