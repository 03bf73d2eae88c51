"""What the three metrics share: the report with its question and cutoff, record building, score helpers."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Report
from lifesearch_local.reporteval.records import Metric, ReportEvaluation
from serving import ChoiceRequest, Span

T = TypeVar("T")
SCORES = ("0", "1", "2", "3", "4")
SCORE_PREFILL = '{"score": '


@dataclass
class ReportItem:
    """A report with what its evaluation needs from its task."""

    report: Report
    question: str
    """The task's research question (a placeholder when no task file was given)."""
    as_of: dt.date | None = None
    """The task's cutoff: sources are fetched as they were on this date."""


def evaluation(item: ReportItem, cfg: JudgeConfig, metric: Metric, prompt_hash: str, **kw: Any) -> ReportEvaluation:
    r = item.report
    return ReportEvaluation(task_id=r.task_id, agent=r.agent, run=r.run, judge=cfg.id, metric=metric,
                            mode=cfg.mode, prompt_hash=prompt_hash, **kw)


def user(text: str, prefill: str = "", elastic: Span | None = None) -> ChoiceRequest:
    return ChoiceRequest(messages=[{"role": "user", "content": text}], prefill=prefill, elastic=elastic)


def expected(probs: Sequence[float], values: Sequence[float]) -> float:
    """Σ v·p(v): the expected score under the judge's distribution."""
    return float(sum(v * p for v, p in zip(values, probs)))


def argmax(probs: Sequence[float]) -> int:
    return max(range(len(probs)), key=lambda i: probs[i])


def as_int(value: Any, allowed: Sequence[int]) -> int | None:
    """An integer label from a JSON value (int, integral float or numeric string), if allowed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not re.fullmatch(r"[+-]?\d+(\.0+)?", value):
            return None
        value = float(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value in allowed else None


