"""The rubric judge: the paper's prompts, choice mode (p_true) and generate mode (JSON + reason)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from serving.config import ModelConfig
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest, ModelBackend, Span

from .config import JudgeConfig
from .prompts import render_span
from .records import Judgment, Report, Rubric, Task

T = TypeVar("T")

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


def _judgment(p: Pending, rubric: Rubric, cfg: JudgeConfig, judge_run: int, prompt_hash: str, **kw) -> Judgment:
    return Judgment(
        task_id=p.task.id, agent=p.report.agent, run=p.report.run, rubric_id=rubric.id,
        judge=cfg.id, judge_run=judge_run, prompt_hash=prompt_hash, **kw,
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


def judge_choice(backend: ModelBackend, cfg: JudgeConfig, batch: Sequence[Pending], judge_run: int) -> list[list[Judgment]]:
    """One forward pass per packed group: p_true from the next-token probabilities."""
    return [row for _, rows in iter_judge_choice(backend, cfg, batch, judge_run) for row in rows]


def iter_judge_choice(
    backend: ModelBackend, cfg: JudgeConfig, batch: Sequence[Pending], judge_run: int
) -> Iterator[tuple[list[Pending], list[list[Judgment]]]]:
    """`judge_choice`, yielding each report's judgments as soon as the backend has them: per
    report where it offers `iter_score_choices` (hf), else all at the end of the call."""
    groups, hashes = zip(*(choice_group(p) for p in batch)) if batch else ((), ())
    stream = getattr(backend, "iter_score_choices", None)
    parts = (stream(list(groups), CHOICES) if stream is not None
             else [(list(range(len(groups))), backend.score_choices(list(groups), CHOICES))])
    for idxs, results in parts:
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
    return not report.text.strip()


def empty_report_judgments(p: Pending, cfg: JudgeConfig, judge_run: int) -> list[Judgment]:
    """Every rubric of an empty report unsatisfied, with reason "empty report" and no model output."""
    return [_judgment(p, r, cfg, judge_run, None, satisfied=False, reason=EMPTY_REPORT) for r in p.rubrics]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_object(text: str, accept: Callable[[dict], T | None]) -> T | None:
    """The first JSON object in `text` that `accept` turns into a value (fences and chatter tolerated)."""
    body = _FENCE.sub("", text.strip())
    start = body.find("{")
    while start != -1:  # bounded: each turn moves past one opening brace
        try:
            obj, _ = json.JSONDecoder().raw_decode(body[start:])
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            value = accept(obj)
            if value is not None:
                return value
        start = body.find("{", start + 1)
    return None


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


class RetrySettings(Protocol):
    """What the retrying generators read from a config (JudgeConfig, CurateConfig, …)."""

    retries: int
    temperature: float
    model: ModelConfig


def generate_attempts(
    backend: ModelBackend, cfg: RetrySettings, prompts: Sequence[str], parses: Sequence[Callable[[str], T | None]], *,
    max_tokens: int, seed: int = 0, reject_truncated: bool = False,
) -> list[tuple[T | None, list[str]]]:
    """`generate_parsed` with one parser per prompt, keeping every attempt's raw text.

    With `reject_truncated`, an answer cut off at `max_tokens` is invalid whatever it parses to
    (a cut-off rewrite would otherwise pass for a shorter one). Returns (parsed or None, raw
    texts of all attempts in order) per prompt.
    """
    results = _attempts(backend, cfg, prompts, parses, max_tokens=max_tokens, seed=seed, reject_truncated=reject_truncated)
    return [(v, raws) for v, raws, _ in results]


def _attempts(
    backend: ModelBackend, cfg: RetrySettings, prompts: Sequence[str], parses: Sequence[Callable[[str], T | None]], *,
    max_tokens: int, seed: int = 0, reject_truncated: bool = False, spans: Sequence[Span | None] | None = None,
    template_kwargs: dict | None = None, stop_after_json: bool = False,
) -> list[tuple[T | None, list[str], int]]:
    """The retry loop; also returns the prompt tokens the backend elided to fit its context.
    `stop_after_json`: each answer ends where its first JSON object closes (see ChatRequest)."""
    parsed: list[T | None] = [None] * len(prompts)
    raws: list[list[str]] = [[] for _ in prompts]
    cut = [0] * len(prompts)
    for attempt in range(cfg.retries + 1):
        todo = [i for i, v in enumerate(parsed) if v is None]
        if not todo:
            break
        reqs = [ChatRequest(
            messages=[{"role": "user", "content": prompts[i]}], max_tokens=max_tokens,
            temperature=cfg.temperature if attempt == 0 else max(cfg.temperature, 0.7),
            seed=cfg.model.seed + seed + attempt, elastic=spans[i] if spans else None,
            chat_template_kwargs=template_kwargs or {}, stop_after_json=stop_after_json,
        ) for i in todo]
        for i, gen in zip(todo, backend.generate(reqs)):
            raws[i].append(gen.text)
            cut[i] = gen.truncated_tokens
            parsed[i] = None if reject_truncated and gen.finish_reason == "length" else parses[i](gen.text)
    return list(zip(parsed, raws, cut))


def judge_template_kwargs(cfg: RetrySettings) -> dict:
    """A judge answers with thinking off (Qwen3-style templates), unless its model config says otherwise."""
    return {"enable_thinking": False, **cfg.model.chat_template_kwargs}


def generate_parsed(
    backend: ModelBackend, cfg: RetrySettings, prompts: Sequence[str], parse: Callable[[str], T | None], *,
    max_tokens: int, seed: int = 0,
) -> list[tuple[T | None, str | None]]:
    """Generate an answer per prompt (thinking off); unparseable ones are retried (cfg.retries times,
    a new seed and at least temperature 0.7), then left None. Returns (parsed, raw text) per prompt."""
    return [(v, raws[-1] if raws else None) for v, raws, _ in generate_parsed_fitted(
        backend, cfg, prompts, parse, max_tokens=max_tokens, seed=seed)]


def generate_parsed_fitted(
    backend: ModelBackend, cfg: RetrySettings, prompts: Sequence[str], parse: Callable[[str], T | None], *,
    max_tokens: int, seed: int = 0, spans: Sequence[Span | None] | None = None, stop_after_json: bool = False,
) -> list[tuple[T | None, str | None, int]]:
    """`generate_parsed` where `spans` mark what may be elided to fit the context; adds the tokens elided."""
    results = _attempts(backend, cfg, prompts, [parse] * len(prompts), max_tokens=max_tokens, seed=seed, spans=spans,
                        template_kwargs=judge_template_kwargs(cfg), stop_after_json=stop_after_json)
    return [(v, raws[-1] if raws else None, cut) for v, raws, cut in results]


def judge_generate(backend: ModelBackend, cfg: JudgeConfig, batch: Sequence[Pending], judge_run: int) -> list[list[Judgment]]:
    """Full JSON answers; unparseable ones are retried (bounded), then recorded as ungraded.

    With thinking off (the default), decoding ends where the answer's JSON object closes (what
    follows is never read; a thinking judge's braces could be in its thinking), and the
    rubric prompts of a report are sent together: the report is their shared token prefix
    (prefilled once by the hf engine, prefix-cached by vLLM)."""
    prompts = [[judge_prompt_span(p.task, r, p.report.text) for r in p.rubrics] for p in batch]
    flat = [text for row in prompts for text, _, _ in row]
    spans = [span for row in prompts for _, _, span in row]
    results = iter(generate_parsed_fitted(backend, cfg, flat, parse_verdict, max_tokens=cfg.max_tokens,
                                          seed=1000 * judge_run, spans=spans,
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
    backend: ModelBackend, cfg: JudgeConfig, work: Sequence[Pending], judge_run: int = 0
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
