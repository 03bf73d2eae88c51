"""What each phase of a run (or a `judge` invocation) still has to do: exact counts, and its engine calls' work.

Counts come from the same functions the stages use (`pending_runs`, `pending_work`, the ReportEval
records' keys) on the same files, so they are what the run will do. Reports an agent has not written yet
are stand-ins of the agent's `max_tokens` words: the judge's decisions on them are still exact (they
depend on the rubrics), their tokens are an assumption, said in the phase's `assumptions`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lifesearch_local.agent.config import AgentConfig
from lifesearch_local.estimate.calibrate import ChoiceSample, GenerateSample
from lifesearch_local.estimate.work import Shape, Unit, choice_unit, generate_unit
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Report, Task
from serving import ModelConfig

# The calibration's real choice prompts: a few rubrics of the first report, the report cut at
# SAMPLE_TOKENS, so that calibrating costs seconds, not a report's whole scoring.
SAMPLE_RUBRICS = 3
SAMPLE_TOKENS = 4096
# A generate-mode judge's answer: the JSON verdict needs well under 200 tokens (cli/judge.py's help).
VERDICT_TOKENS = 100


@dataclass
class AgentWork:
    """How an agent phase's model calls are assumed to go (what a run cannot know before it runs)."""

    calls_per_run: tuple[int, int, int]
    """Model calls per run: low, point, high."""
    output_tokens: tuple[int, int, int]
    """Output tokens per call: low, point, high."""
    parallel: int
    """Runs in flight at once (concurrency, at most the runs pending)."""
    max_batch: int = 32
    """Requests per engine call (the agent's batch.max_batch)."""
    max_inflight: int = 1
    """Engine calls in flight at once (batch.max_inflight)."""
    first: list[Unit] = field(default_factory=list)
    """Each pending run's first call, from its real prompt."""


@dataclass
class PhasePlan:
    """One phase: its name in the manifest, its model, its counts, and the engine calls whose work is known."""

    name: str
    kind: str
    model: ModelConfig
    runs: int | None = None
    decisions: int | None = None
    per_repetition: list[int] | None = None
    records: int | None = None
    requests: int = 0
    """Model requests: choice prompts, or chat requests (an agent's: its first calls only)."""
    calls: list[list[Unit]] = field(default_factory=list)
    """Engine calls, each the units (groups or requests) it carries."""
    repeats: list[int] = field(default_factory=list)
    """How many times each call is made (a judge's repetitions with nothing done are counted once, not
    enumerated); a call without an entry is made once."""
    agent: AgentWork | None = None
    sample: ChoiceSample | GenerateSample | None = None
    """Real prompts for the engine's calibration."""
    assumptions: list[str] = field(default_factory=list)

    def weighted(self) -> Iterator[tuple[list[Unit], int]]:
        """Each call with the times it is made."""
        for i, call in enumerate(self.calls):
            yield call, self.repeats[i] if i < len(self.repeats) else 1

    @property
    def needs_model(self) -> bool:
        """Whether the phase loads its model (the stages load none when only empty reports are left)."""
        return bool(self.runs) or any(self.calls) or self.requests > 0


def placeholder_reports(pending: Sequence[tuple[Task, int]], agent: AgentConfig) -> list[Report]:
    """Stand-ins for the reports an agent has yet to write: `max_tokens` words each (a final answer is one call's output)."""
    text = " ".join(["word"] * agent.max_tokens)
    return [Report(task_id=t.id, agent=agent.id, run=r, text=text, status="budget") for t, r in pending]


def agent_plan(agent: AgentConfig, pending: Sequence[tuple[Task, int]], shape: Shape | None,
               today: Any = None) -> PhasePlan:
    """An agent phase: the pending runs (exact), their first calls' real prompts, and the stated assumptions."""
    from lifesearch_local.agent.context import Context
    from lifesearch_local.agent.loop import system_prompt
    from lifesearch_local.agent.tools import build_tools
    from lifesearch_local.llm.models import random_weights
    from serving import ChatRequest

    plan = PhasePlan(f"agent/{agent.id}", "agent", agent.model, runs=len(pending))
    n = agent.max_iterations
    point = 1 if random_weights(agent.model) else math.ceil(n / 2)
    out = agent.max_tokens
    work = AgentWork(calls_per_run=(1, point, n), output_tokens=(min(out, 128), out, out),
                     parallel=max(1, min(len(pending), agent.concurrency)), max_batch=agent.batch.max_batch,
                     max_inflight=agent.batch.max_inflight)
    plan.assumptions += [
        f"model calls per run: {point} (low 1, high max_iterations {n})"
        + ("; a random-weight model's first answer ends the run" if point == 1 else "; the paper's agents use 11–86"),
        f"output tokens per call: {out} (max_tokens; low {work.output_tokens[0]})",
        "each later call's prompt: the first one's (tool results not counted); tool calls' own time not counted",
    ]
    schemas = [t.schema for t in build_tools(agent, None).values()]
    by_task: dict[str, Any] = {}  # a task's first request is the same for each of its runs (but the seed)
    reqs = []
    for task, run in pending:
        if task.id not in by_task:
            ctx = Context(system_prompt(task, today)[0], task.question, schemas, agent.tools.truncated_observation_chars)
            by_task[task.id] = ChatRequest(messages=ctx.request_messages(), max_tokens=agent.max_tokens,
                                           temperature=agent.temperature, top_p=agent.top_p, seed=agent.seed + run,
                                           tools=schemas or None)
        reqs.append(by_task[task.id])
    if shape is not None and shape.countable:
        kwargs = dict(agent.model.chat_template_kwargs)
        units = {k: generate_unit(shape, r, kwargs, out) for k, r in by_task.items()}
        work.first = [units[task.id] for task, _ in pending]
        b = min(work.parallel, agent.batch.max_batch)
        plan.sample = GenerateSample(requests=reqs[:b], prompt_tokens=sum(u.prompt_tokens for u in work.first[:b]))
    plan.agent, plan.requests = work, len(reqs)
    return plan


def judge_plan(cfg: JudgeConfig, tasks: Sequence[Task], reports: Sequence[Report], done: set,
               shape: Shape | None) -> PhasePlan:
    """A judge phase: decisions per repetition (exact: `pending_work` on the same records), its calls' work."""
    from lifesearch_local.judge.rubric import CHOICES, choice_group, is_empty_report, pending_work

    by_id = {t.id: t for t in tasks}
    plan = PhasePlan(f"judge/{cfg.id}", "judge", cfg.model, per_repetition=[])
    # a generate-mode report: its rubric prompts prefilled as one shared-prefix group, then the verdicts decoded together
    steps = min(VERDICT_TOKENS, cfg.max_tokens) if cfg.mode == "generate" else None
    started = {k[1] for k in done if k[0] == cfg.id}
    fresh: tuple[int, int, range] | None = None  # a repetition with nothing done: decisions, requests, its calls
    units: dict[tuple, Unit] = {}
    for judge_run in range(cfg.runs):
        if fresh is not None and judge_run not in started:  # the same work again: counted, not enumerated
            plan.per_repetition.append(fresh[0])  # type: ignore[union-attr]
            plan.requests += fresh[1]
            for i in fresh[2]:
                plan.repeats[i] += 1
            continue
        work = pending_work(by_id, reports, done, cfg.id, judge_run)
        plan.per_repetition.append(sum(len(p.rubrics) for p in work))  # type: ignore[union-attr]
        live = [p for p in work if not is_empty_report(p.report)]  # empty reports never reach the model
        requests, first_call = sum(len(p.rubrics) for p in live), len(plan.calls)
        plan.requests += requests
        if shape is not None and shape.countable:
            for i in range(0, len(live), cfg.groups_per_call):
                plan.calls.append([_unit(shape, cfg, p, units) for p in live[i : i + cfg.groups_per_call]])
                plan.repeats.append(1)
            if plan.sample is None and live and shape.tokenizer is not None:
                plan.sample = _choice_sample(shape, choice_group(live[0])[0], CHOICES)
        if judge_run not in started:
            fresh = (plan.per_repetition[-1], requests, range(first_call, len(plan.calls)))  # type: ignore[index]
    plan.decisions = sum(plan.per_repetition)  # type: ignore[arg-type]
    if cfg.mode == "generate":
        plan.assumptions.append(f"generate mode: {steps} output tokens per verdict "
                                f"(high: max_tokens {cfg.max_tokens}); retries after unparseable answers not counted")
    return plan


def _unit(shape: Shape, cfg: JudgeConfig, p: Any, seen: dict[tuple, Unit]) -> Unit:
    """A report's work, computed once for every report with the same task, text and rubrics (the stand-ins for
    the runs an agent has yet to do are alike)."""
    from lifesearch_local.judge.rubric import CHOICES, choice_group

    key = (p.task.id, hash(p.report.text), tuple(r.id for r in p.rubrics))
    if key not in seen:
        seen[key] = choice_unit(shape, choice_group(p)[0], CHOICES) if cfg.mode == "choice" else \
            _verdict_unit(shape, cfg, p)
    return seen[key]


def _verdict_unit(shape: Shape, cfg: JudgeConfig, p: Any) -> Unit:
    """A generate-mode report: its rubric prompts prefilled as one shared-prefix group, then the verdicts decoded together."""
    from lifesearch_local.judge.rubric import CHOICES, choice_group

    u = choice_unit(shape, choice_group(p)[0], CHOICES)
    u.steps = min(VERDICT_TOKENS, cfg.max_tokens)
    return u


def _choice_sample(shape: Shape, group: Any, choices: Sequence[str]) -> ChoiceSample:
    """The first SAMPLE_RUBRICS prompts of a real group, with their work, for the calibration; a report
    (the prompts' elastic span) longer than SAMPLE_TOKENS is cut short, so a calibration stays short."""
    sub = group.model_copy(update={"requests": group.requests[:SAMPLE_RUBRICS]})
    u = choice_unit(shape, sub, choices)
    longest = max(u.prompt_tokens // max(1, u.rows), 1)
    if longest > SAMPLE_TOKENS:
        sub = sub.model_copy(update={"requests": [_shorten(r, SAMPLE_TOKENS / longest) for r in sub.requests]})
        u = choice_unit(shape, sub, choices)
    return ChoiceSample(group=sub, choices=tuple(choices), flops=u.flops, tokens=u.tokens)


def _shorten(req: Any, ratio: float) -> Any:
    """The request with its elastic span (the report) cut to `ratio` of its characters."""
    span = req.elastic
    if span is None:
        return req
    msgs = [dict(m) for m in req.messages]
    text = msgs[span.message]["content"]
    keep = int((span.end - span.start) * ratio)
    msgs[span.message]["content"] = text[: span.start + keep] + text[span.end :]
    return req.model_copy(update={"messages": msgs, "elastic": span.model_copy(update={"end": span.start + keep})})


def reporteval_plan(judge: JudgeConfig, rcfg: Any, items: Sequence[Any], recorded: set, shape: Shape | None,
                    unwritten: set) -> PhasePlan:
    """ReportEval with one judge: records per metric (exact), model requests counted from the report texts
    (quality: 5 per non-empty report in choice mode, 1 in generate mode; redundancy: the sampled section pairs;
    factuality: each cited claim–source pair, one chunk each), and the choice calls' work where it is known."""
    from lifesearch_local.reporteval.items import SCORES

    plan = PhasePlan(f"reporteval/{judge.id}", "reporteval", judge.model, records=0, decisions=0)
    seen: dict[tuple, tuple[int, list[Unit], Any]] = {}  # reports alike (an agent's stand-ins) counted once
    for metric in rcfg.metrics:
        todo = [it for it in items if (judge.id, metric, *it.report.key) not in recorded]
        plan.records += len(todo)  # type: ignore[operator]
        for i in range(0, len(todo), judge.groups_per_call):
            units: list[Unit] = []
            for it in todo[i : i + judge.groups_per_call]:
                n, us, first = _item_work(metric, judge, rcfg, it, shape, seen)
                plan.requests += n
                plan.decisions += n  # type: ignore[operator]
                units += us
                if plan.sample is None and first is not None and shape is not None and shape.tokenizer is not None:
                    plan.sample = _choice_sample(shape, first, SCORES)
            if units:
                plan.calls.append(units)
    if "factuality" in rcfg.metrics:
        plan.assumptions.append("factuality: one chunk per cited source, every source fetched; its prompts' tokens "
                                "(the source texts) and the fetching are not counted")
    if unwritten:
        plan.assumptions.append("reports not yet written: redundancy and factuality counted as for a report "
                                "without sections or citations")
    if judge.mode == "generate":
        plan.assumptions.append("generate mode: counted as choice prompts (one answer per prompt)")
    return plan


def _item_work(metric: str, judge: JudgeConfig, rcfg: Any, item: Any, shape: Shape | None,
               seen: dict[tuple, tuple[int, list[Unit], Any]]) -> tuple[int, list[Unit], Any]:
    """One report's requests under one metric, its choice groups' work, its first group (for a calibration)."""
    from lifesearch_local.reporteval.items import SCORES

    key = (metric, item.report.task_id, hash(item.report.text))
    if key not in seen:
        if metric == "factuality":
            seen[key] = (_cited_pairs([item]), [], None)
        else:
            groups = _metric_groups(metric, judge, rcfg, [item])
            units = [choice_unit(shape, g, SCORES) for g in groups] if shape is not None and shape.countable else []
            seen[key] = (sum(len(g.requests) for g in groups), units, groups[0] if groups else None)
    return seen[key]


def _cited_pairs(batch: Sequence[Any]) -> int:
    from lifesearch_local.reporteval.claims import extract_claims

    return sum(1 for it in batch for cl in extract_claims(it.report.text) for c in cl.citations if c.url)


def _metric_groups(metric: str, judge: JudgeConfig, rcfg: Any, batch: Sequence[Any]) -> list[Any]:
    """The choice groups the metric sends for a batch (quality: 5 dimensions per report; redundancy: its pairs)."""
    from lifesearch_local.reporteval.items import SCORE_PREFILL, user
    from lifesearch_local.reporteval.quality import DIMENSIONS
    from lifesearch_local.reporteval.redundancy import plan_pairs, redundancy_prompt
    from serving import ChoiceGroup

    live = [it for it in batch if it.report.text.strip()]
    if metric == "quality":
        dims = [k for k, _ in DIMENSIONS] if judge.mode == "choice" else [None]
        return [ChoiceGroup(key=f"quality|{it.report.task_id}", requests=[_quality_request(it, k) for k in dims])
                for it in live]
    if metric == "redundancy":
        out = []
        for it in batch:
            result, kept = plan_pairs(it, rcfg)
            if result.pairs:
                out.append(ChoiceGroup(key=f"redundancy|{it.report.task_id}", requests=[
                    user(redundancy_prompt(kept[x.a].text, kept[x.b].text), SCORE_PREFILL) for x in result.pairs]))
        return out
    return []


def _quality_request(item: Any, dimension: str | None) -> Any:
    from lifesearch_local.reporteval.items import SCORE_PREFILL, user
    from lifesearch_local.reporteval.quality import quality_prompt_span

    text, _, span = quality_prompt_span(item.question, item.report.text, dimension)
    return user(text, SCORE_PREFILL, elastic=span)
