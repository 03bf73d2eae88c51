"""Quality: five dimensions scored 0–4, one JSON answer per report (generate) or Σ k·p(k) per dimension (choice)."""

from __future__ import annotations

from collections.abc import Sequence

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.llm.generate import generate_parsed_fitted, parse_object
from lifesearch_local.llm.prompts import render, render_span
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.items import (
    SCORE_PREFILL,
    SCORES,
    ReportItem,
    argmax,
    as_int,
    evaluation,
    expected,
    user,
)
from lifesearch_local.reporteval.records import DimensionScore, QualityResult, ReportEvaluation
from serving import ChoiceGroup, ChoiceRequest, Engine, Span

# (key in the JSON answer, how the prompt names it), in the paper's order.
DIMENSIONS: tuple[tuple[str, str], ...] = (
    ("comprehensiveness", "coverage and depth"),
    ("coherence", "structure and logic"),
    ("clarity", "language"),
    ("insightfulness", "integration and original analysis"),
    ("overall", "overall quality"),
)
_VALUES = tuple(range(5))


def quality_prompt(question: str, report: str, dimension: str | None = None) -> tuple[str, str]:
    """(prompt, hash): all five dimensions (generate), or the one named (choice; differs only at the end)."""
    text, h, _ = quality_prompt_span(question, report, dimension)
    return text, h


def quality_prompt_span(question: str, report: str, dimension: str | None = None) -> tuple[str, str, Span]:
    """`quality_prompt` and where the report sits in it (elided in the middle when too long for the judge)."""
    if dimension is None:
        request, h_req = render("reporteval_quality_all")
    else:
        title = dict(DIMENSIONS)[dimension]
        request, h_req = render("reporteval_quality_one", dimension=dimension, dimension_title=title)
    text, h, (start, end) = render_span("reporteval_quality", "report", query=question, report=report, request=request)
    return text, f"{h}+{h_req}", Span(message=0, start=start, end=end)


def parse_quality(text: str) -> list[tuple[int, str]] | None:
    """[(score, justification)] for the five dimensions, or None unless all five have a 0–4 integer."""

    def accept(obj: dict) -> list[tuple[int, str]] | None:
        out = []
        for key, _ in DIMENSIONS:
            v = obj.get(key)
            score = as_int(v.get("score") if isinstance(v, dict) else v, _VALUES)
            if score is None:
                return None
            out.append((score, str(v.get("justification", "")) if isinstance(v, dict) else ""))
        return out

    return parse_object(text, accept)


def _ungraded() -> list[DimensionScore]:
    return [DimensionScore(dimension=k) for k, _ in DIMENSIONS]


def _choice(backend: Engine, items: Sequence[ReportItem]) -> list[tuple[list[DimensionScore], str | None, int]]:
    groups = [ChoiceGroup(
        key=f"quality|{it.report.task_id}|{it.report.agent}|{it.report.run}",
        requests=[_request(quality_prompt_span(it.question, it.report.text, k)) for k, _ in DIMENSIONS],
    ) for it in items]
    results = backend.score_choices(groups, SCORES) if groups else []
    return [([DimensionScore(dimension=k, score=expected(r.probs, _VALUES), label=argmax(r.probs), probs=r.probs)
              for (k, _), r in zip(DIMENSIONS, res)], None, max(r.truncated_tokens for r in res)) for res in results]


def _request(prompt: tuple[str, str, Span]) -> ChoiceRequest:
    text, _, span = prompt
    return user(text, SCORE_PREFILL, elastic=span)


def _generate(backend: Engine, cfg: JudgeConfig, rcfg: ReportEvalConfig,
              items: Sequence[ReportItem]) -> list[tuple[list[DimensionScore], str | None, int]]:
    prompts = [quality_prompt_span(it.question, it.report.text) for it in items]
    out = []
    for parsed, raw, cut in generate_parsed_fitted(backend, cfg, [p[0] for p in prompts], parse_quality,
                                                   max_tokens=rcfg.quality_max_tokens, spans=[p[2] for p in prompts]):
        dims = _ungraded() if parsed is None else [
            DimensionScore(dimension=k, score=float(s), label=s, justification=j) for (k, _), (s, j) in zip(DIMENSIONS, parsed)]
        out.append((dims, raw, cut))
    return out


def judge_quality(backend: Engine, cfg: JudgeConfig, rcfg: ReportEvalConfig,
                  items: Sequence[ReportItem]) -> list[ReportEvaluation]:
    """One record per report; empty reports are not sent to the judge (recorded ungraded with a note)."""
    todo = [it for it in items if it.report.text.strip()]
    results = _choice(backend, todo) if cfg.mode == "choice" else _generate(backend, cfg, rcfg, todo)
    done = {id(it): r for it, r in zip(todo, results)}
    h = quality_prompt("", "", None if cfg.mode == "generate" else DIMENSIONS[0][0])[1]
    out = []
    for it in items:
        dims, raw, cut = done.get(id(it), (_ungraded(), None, 0))
        note = None if id(it) in done else "empty report"
        if id(it) in done and dims[0].score is None:
            note = "ungraded: no valid JSON answer"
        out.append(evaluation(it, cfg, "quality", h, note=note, truncated_tokens=cut,
                              quality=QualityResult(dimensions=dims, raw=raw)))
    return out
