"""The rubric judge: the paper's prompts, choice mode (p_true) and generate mode (JSON + reason)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.verdict import VERDICT_SCHEMA
from lifesearch_local.llm.generate import generate_parsed_fitted, judge_template_kwargs, parse_object
from lifesearch_local.llm.prompts import render_span
from lifesearch_local.records import Judgment, Report, Rubric, Task, is_blank
from serving import ChoiceGroup, ChoiceRequest, Engine, Span

# Choice mode pre-fills the assistant turn up to the decision of the paper's JSON answer.
PREFILL = '{"satisfied": '
CHOICES = ("true", "false")


def judge_prompt(task: Task, rubric: Rubric, answer: str) -> tuple[str, str]:
    """The paper's judge prompt for the task's language: (text, template hash)."""
    text, digest, _ = judge_prompt_span(task, rubric, answer)
    return text, digest


def judge_prompt_span(task: Task, rubric: Rubric, answer: str) -> tuple[str, str, Span]:
    """`judge_prompt` and where the report sits in it: the part elided when it exceeds the judge's context."""
    text, digest, (start, end) = render_span(
        f"judge_{task.language}",
        "answer",
        question=task.question,
        answer=answer,
        criterion=rubric.criterion,
        type=rubric.type,
        necessity=rubric.necessity,
        priority=rubric.priority,
    )
    return text, digest, Span(message=0, start=start, end=end)


def judged_rubrics(task: Task) -> list[Rubric]:
    """Rubrics that get a judgment: zero-weight ones are omitted from the score, so not judged."""
    return [r for r in task.rubrics if r.weight > 0]


@dataclass
class Pending:
    """Rubrics of one report still to judge."""

    task: Task
    report: Report
    rubrics: list[Rubric]


def pending_work(
    tasks: Mapping[str, Task], reports: Sequence[Report], done: set, judge_id: str, judge_run: int
) -> list[Pending]:
    """What a (resumed) judge pass still has to do: rubrics with no judgment yet, per report."""
    out = []
    for rep in reports:
        task = tasks[rep.task_id]
        todo = [
            r for r in judged_rubrics(task)
            if (judge_id, judge_run, rep.task_id, rep.agent, rep.run, r.id) not in done
        ]
        if todo:
            out.append(Pending(task, rep, todo))
    return out


def rubric_hash(task: Task, rubric: Rubric) -> str:
    """sha256 (16 hex) of what the judge reads of a task and one rubric; the weight is not in it
    (scoring reads the current weight, the verdict does not depend on it)."""
    import hashlib

    parts = (task.language, task.question, rubric.criterion, rubric.type, rubric.necessity, rubric.priority)
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _judgment(p: Pending, rubric: Rubric, cfg: JudgeConfig, judge_run: int, prompt_hash: str, **kw) -> Judgment:
    return Judgment(
        task_id=p.task.id, agent=p.report.agent, run=p.report.run, rubric_id=rubric.id,
        judge=cfg.id, judge_run=judge_run, prompt_hash=prompt_hash, rubric_hash=rubric_hash(p.task, rubric), **kw,
    )


def choice_group(p: Pending) -> tuple[ChoiceGroup, str]:
    """The rubrics of one report as a choice group (they share the report as a prefix), and the prompt hash."""
    prompts = [judge_prompt_span(p.task, r, p.report.text) for r in p.rubrics]
    group = ChoiceGroup(
        key=f"{p.task.id}|{p.report.agent}|{p.report.run}",
        requests=[ChoiceRequest(messages=[{"role": "user", "content": text}], prefill=PREFILL, elastic=span)
                  for text, _, span in prompts],
    )
    return group, prompts[0][1]


def judge_choice(backend: Engine, cfg: JudgeConfig, batch: Sequence[Pending], judge_run: int) -> list[list[Judgment]]:
    """One forward pass per packed group: p_true from the next-token probabilities."""
    return [row for _, rows in iter_judge_choice(backend, cfg, batch, judge_run) for row in rows]


def iter_judge_choice(
    backend: Engine, cfg: JudgeConfig, batch: Sequence[Pending], judge_run: int
) -> Iterator[tuple[list[Pending], list[list[Judgment]]]]:
    """`judge_choice`, yielding each report's judgments as soon as the engine has them: per report
    where it scores reports one at a time (hf), else all at the end of the call."""
    groups, hashes = zip(*(choice_group(p) for p in batch)) if batch else ((), ())
    for idxs, results in backend.iter_score_choices(list(groups), CHOICES):
        out = []
        for i, res in zip(idxs, results):
            p, h = batch[i], hashes[i]
            out.append([
                _judgment(p, r, cfg, judge_run, h, satisfied=x.probs[0] >= cfg.threshold, p_true=x.probs[0],
                          truncated_tokens=x.truncated_tokens)
                for r, x in zip(p.rubrics, res)
            ])
        yield [batch[i] for i in idxs], out


EMPTY_REPORT = "empty report"
def is_empty_report(report: Report) -> bool:
    """Nothing but whitespace: not sent to the judge (the paper's eq. 1 counts it 0)."""
    return is_blank(report.text)


def empty_report_judgments(p: Pending, cfg: JudgeConfig, judge_run: int) -> list[Judgment]:
    """Every rubric of an empty report unsatisfied, with reason "empty report" and no model output."""
    return [_judgment(p, r, cfg, judge_run, None, satisfied=False, reason=EMPTY_REPORT) for r in p.rubrics]


def _verdict(obj: dict) -> tuple[bool, str] | None:
    s = obj.get("satisfied")
    if isinstance(s, str) and s.strip().lower() in ("true", "false"):
        s = s.strip().lower() == "true"
    return (s, str(obj.get("reason", ""))) if isinstance(s, bool) else None


def parse_verdict(text: str) -> tuple[bool, str] | None:
    """(satisfied, reason) from a judge's JSON answer, or None if there is no usable verdict.

    Accepts the paper's object with or without a code fence and with text around it;
    `satisfied` must be a JSON boolean (or the strings "true"/"false"). A reasoning judge's
    thinking (up to `</think>`) is skipped: its braces are not the verdict.
    """
    return parse_object(text.rpartition("</think>")[2], _verdict)


def judge_generate(backend: Engine, cfg: JudgeConfig, batch: Sequence[Pending], judge_run: int) -> list[list[Judgment]]:
    """Full JSON answers decoded under VERDICT_SCHEMA; unparseable ones (cut at the token cap) are
    retried (bounded), then recorded as ungraded.

    With thinking off (the default), decoding ends where the answer's JSON object closes (what
    follows is never read; a thinking judge's braces could be in its thinking), and the
    rubric prompts of a report are sent together: the report is their shared token prefix
    (prefilled once by the hf engine, prefix-cached by vLLM)."""
    prompts = [[judge_prompt_span(p.task, r, p.report.text) for r in p.rubrics] for p in batch]
    flat = [text for row in prompts for text, _, _ in row]
    spans = [span for row in prompts for _, _, span in row]
    results = iter(generate_parsed_fitted(backend, cfg, flat, parse_verdict, max_tokens=cfg.max_tokens,
                                          seed=1000 * judge_run, spans=spans, json_schema=VERDICT_SCHEMA,
                                          stop_after_json=judge_template_kwargs(cfg).get("enable_thinking") is False))
    out = []
    for p, row in zip(batch, prompts):
        judged = []
        for r, (_, h, _) in zip(p.rubrics, row):
            v, raw, cut = next(results)
            judged.append(_judgment(p, r, cfg, judge_run, h, satisfied=v[0] if v else None,
                                    reason=v[1] if v else "ungraded: no valid JSON verdict", raw=raw,
                                    truncated_tokens=cut))
        out.append(judged)
    return out


MODES = {"choice": judge_choice, "generate": judge_generate}


def judge_batches(
    backend: Engine, cfg: JudgeConfig, work: Sequence[Pending], judge_run: int = 0
) -> Iterator[tuple[Sequence[Pending], list[list[Judgment]]]]:
    """Judge pending reports `groups_per_call` at a time; yields reports with their judgments as
    soon as they exist (so a kill loses at most the report in progress where the backend streams):
    empty reports first, without the model; in choice mode report by report (`iter_judge_choice`);
    in generate mode each call's."""
    empty = [p for p in work if is_empty_report(p.report)]
    if empty:
        yield empty, [empty_report_judgments(p, cfg, judge_run) for p in empty]
    work = [p for p in work if not is_empty_report(p.report)]
    for i in range(0, len(work), cfg.groups_per_call):
        batch = work[i : i + cfg.groups_per_call]
        if cfg.mode == "choice":
            yield from iter_judge_choice(backend, cfg, batch, judge_run)
        else:
            yield batch, MODES[cfg.mode](backend, cfg, batch, judge_run)
