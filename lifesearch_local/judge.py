"""The rubric judge: the paper's prompts, choice mode (p_true) and generate mode (JSON + reason)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest, ModelBackend

from .config import JudgeConfig
from .prompts import render
from .records import Judgment, Report, Rubric, Task

# Choice mode pre-fills the assistant turn up to the decision of the paper's JSON answer.
PREFILL = '{"satisfied": '
CHOICES = ("true", "false")


def judge_prompt(task: Task, rubric: Rubric, answer: str) -> tuple[str, str]:
    """The paper's judge prompt for the task's language: (text, template hash)."""
    return render(
        f"judge_{task.language}",
        question=task.question,
        answer=answer,
        criterion=rubric.criterion,
        type=rubric.type,
        necessity=rubric.necessity,
        priority=rubric.priority,
    )


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


def judge_choice(backend: ModelBackend, cfg: JudgeConfig, batch: Sequence[Pending], judge_run: int) -> list[list[Judgment]]:
    """One forward pass per packed group: p_true from the next-token probabilities."""
    groups, hashes = [], []
    for p in batch:
        prompts = [judge_prompt(p.task, r, p.report.text) for r in p.rubrics]
        hashes.append(prompts[0][1])
        groups.append(ChoiceGroup(
            key=f"{p.task.id}|{p.report.agent}|{p.report.run}",
            requests=[ChoiceRequest(messages=[{"role": "user", "content": text}], prefill=PREFILL) for text, _ in prompts],
        ))
    results = backend.score_choices(groups, CHOICES)
    out = []
    for p, res, h in zip(batch, results, hashes):
        out.append([
            _judgment(p, r, cfg, judge_run, h, satisfied=x.probs[0] >= cfg.threshold, p_true=x.probs[0])
            for r, x in zip(p.rubrics, res)
        ])
    return out


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_verdict(text: str) -> tuple[bool, str] | None:
    """(satisfied, reason) from a judge's JSON answer, or None if there is no usable verdict.

    Accepts the paper's object with or without a code fence and with text around it;
    `satisfied` must be a JSON boolean (or the strings "true"/"false").
    """
    body = _FENCE.sub("", text.strip())
    start = body.find("{")
    while start != -1:  # bounded: each turn moves past one opening brace
        try:
            obj, _ = json.JSONDecoder().raw_decode(body[start:])
        except json.JSONDecodeError:
            start = body.find("{", start + 1)
            continue
        if isinstance(obj, dict) and "satisfied" in obj:
            s = obj["satisfied"]
            if isinstance(s, str) and s.strip().lower() in ("true", "false"):
                s = s.strip().lower() == "true"
            if isinstance(s, bool):
                return s, str(obj.get("reason", ""))
        start = body.find("{", start + 1)
    return None


def judge_generate(backend: ModelBackend, cfg: JudgeConfig, batch: Sequence[Pending], judge_run: int) -> list[list[Judgment]]:
    """Full JSON answers; unparseable ones are retried (bounded), then recorded as ungraded."""
    work = [(bi, ri) for bi, p in enumerate(batch) for ri in range(len(p.rubrics))]
    prompts = {(bi, ri): judge_prompt(batch[bi].task, batch[bi].rubrics[ri], batch[bi].report.text) for bi, ri in work}
    verdicts: dict[tuple[int, int], tuple[bool, str] | None] = {}
    raws: dict[tuple[int, int], str] = {}
    for attempt in range(cfg.retries + 1):
        todo = [k for k in work if verdicts.get(k) is None]
        if not todo:
            break
        reqs = [ChatRequest(
            messages=[{"role": "user", "content": prompts[k][0]}], max_tokens=cfg.max_tokens,
            temperature=cfg.temperature if attempt == 0 else max(cfg.temperature, 0.7),
            seed=cfg.model.seed + 1000 * judge_run + attempt,
        ) for k in todo]
        for k, gen in zip(todo, backend.generate(reqs)):
            raws[k] = gen.text
            verdicts[k] = parse_verdict(gen.text)
    out = []
    for bi, p in enumerate(batch):
        row = []
        for ri, r in enumerate(p.rubrics):
            v = verdicts.get((bi, ri))
            row.append(_judgment(p, r, cfg, judge_run, prompts[(bi, ri)][1], satisfied=v[0] if v else None,
                                 reason=v[1] if v else "ungraded: no valid JSON verdict", raw=raws.get((bi, ri))))
        out.append(row)
    return out


MODES = {"choice": judge_choice, "generate": judge_generate}


def judge_batches(
    backend: ModelBackend, cfg: JudgeConfig, work: Sequence[Pending], judge_run: int = 0
) -> Iterator[tuple[Sequence[Pending], list[list[Judgment]]]]:
    """Judge pending reports `groups_per_call` at a time; yields each batch with its judgments."""
    fn = MODES[cfg.mode]
    for i in range(0, len(work), cfg.groups_per_call):
        batch = work[i : i + cfg.groups_per_call]
        yield batch, fn(backend, cfg, batch, judge_run)
