"""Quality: five dimensions scored 0–4, one JSON answer per report (generate) or Σ k·p(k) per dimension (choice)."""

from __future__ import annotations

from collections.abc import Sequence

from serving.protocol import ChoiceGroup, ModelBackend

from ..config import JudgeConfig
from ..prompts import render
from .config import ReportEvalConfig
from .judgeio import (
    SCORE_PREFILL,
    SCORES,
    ReportItem,
    argmax,
    as_int,
    evaluation,
    expected,
    generate_parsed,
    parse_object,
    user,
)
from .records import DimensionScore, QualityResult, ReportEvaluation

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
    if dimension is None:
        request, h_req = render("reporteval_quality_all")
    else:
        title = dict(DIMENSIONS)[dimension]
        request, h_req = render("reporteval_quality_one", dimension=dimension, dimension_title=title)
    text, h = render("reporteval_quality", query=question, report=report, request=request)
    return text, f"{h}+{h_req}"


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


def _choice(backend: ModelBackend, items: Sequence[ReportItem]) -> list[tuple[list[DimensionScore], str | None]]:
    groups = [ChoiceGroup(
        key=f"quality|{it.report.task_id}|{it.report.agent}|{it.report.run}",
        requests=[user(quality_prompt(it.question, it.report.text, k)[0], SCORE_PREFILL) for k, _ in DIMENSIONS],
    ) for it in items]
    results = backend.score_choices(groups, SCORES) if groups else []
    return [([DimensionScore(dimension=k, score=expected(r.probs, _VALUES), label=argmax(r.probs), probs=r.probs)
              for (k, _), r in zip(DIMENSIONS, res)], None) for res in results]


def _generate(backend: ModelBackend, cfg: JudgeConfig, rcfg: ReportEvalConfig,
              items: Sequence[ReportItem]) -> list[tuple[list[DimensionScore], str | None]]:
    prompts = [quality_prompt(it.question, it.report.text)[0] for it in items]
    out = []
    for parsed, raw in generate_parsed(backend, cfg, prompts, parse_quality, max_tokens=rcfg.quality_max_tokens):
        dims = _ungraded() if parsed is None else [
            DimensionScore(dimension=k, score=float(s), label=s, justification=j) for (k, _), (s, j) in zip(DIMENSIONS, parsed)]
        out.append((dims, raw))
    return out


def judge_quality(backend: ModelBackend, cfg: JudgeConfig, rcfg: ReportEvalConfig,
                  items: Sequence[ReportItem]) -> list[ReportEvaluation]:
    """One record per report; empty reports are not sent to the judge (recorded ungraded with a note)."""
    todo = [it for it in items if it.report.text.strip()]
    results = _choice(backend, todo) if cfg.mode == "choice" else _generate(backend, cfg, rcfg, todo)
    done = {id(it): r for it, r in zip(todo, results)}
    h = quality_prompt("", "", None if cfg.mode == "generate" else DIMENSIONS[0][0])[1]
    out = []
    for it in items:
        dims, raw = done.get(id(it), (_ungraded(), None))
        note = None if id(it) in done else "empty report"
        if id(it) in done and dims[0].score is None:
            note = "ungraded: no valid JSON answer"
        out.append(evaluation(it, cfg, "quality", h, note=note, quality=QualityResult(dimensions=dims, raw=raw)))
    return out
