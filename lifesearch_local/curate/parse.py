"""Pure parsers of each stage's answer (None = invalid, so the answer is retried) and the stage-1 decision."""

from __future__ import annotations

import re
from typing import Any

from lifesearch_local.curate.queries import detect_language
from lifesearch_local.curate.records import QUALITY_RANK, DomainResult, FilterResult, Query, ReasonCode
from lifesearch_local.llm.generate import parse_object
from lifesearch_local.tasks import parse_domain

FILTER_FIELDS: dict[str, type] = {
    "quality_level": str, "quality_reason": str,
    "is_unrelated_to_search": bool, "unrelated_reason": str,
    "is_time_dependent": bool, "time_dependent_reason": str,
}
DOMAIN_FIELDS: dict[str, type] = {"taxonomy": str, "reason": str}
# A rewrite only removes text; this slack lets a very short query take its one minimal edit.
REWRITE_SLACK_CHARS = 20
# What models write when told to "return an empty string".
_EMPTY_ANSWERS = {'""', "''", "“”", "``"}
_FENCED = re.compile(r"\A```[^\n]*\n?(.*?)\n?```\Z", re.DOTALL)


def _typed(obj: dict[str, Any], fields: dict[str, type]) -> bool:
    """Exactly these keys, each of its type (a JSON boolean is a bool, never a string or a number)."""
    return set(obj) == set(fields) and all(isinstance(obj[k], t) for k, t in fields.items())


def _filter_object(obj: dict[str, Any]) -> FilterResult | None:
    if not _typed(obj, FILTER_FIELDS):
        return None
    level = obj["quality_level"].strip().lower()
    if level not in QUALITY_RANK:
        return None
    return FilterResult.model_validate({**obj, "quality_level": level})


def parse_filter(text: str) -> FilterResult | None:
    """Stage 1: the paper's JSON object (fences and chatter around it tolerated), or None.

    The object must have exactly the six fields of App. B.1: quality_level one of high/medium/low
    (case and surrounding spaces ignored), the two flags JSON booleans, the three reasons strings.
    """
    return parse_object(text, _filter_object)


def _domain_object(obj: dict[str, Any]) -> DomainResult | None:
    if not _typed(obj, DOMAIN_FIELDS):
        return None
    try:
        domain = parse_domain(obj["taxonomy"])
    except ValueError:
        return None
    return DomainResult(taxonomy=obj["taxonomy"], reason=obj["reason"], domain=domain)


def parse_domain_answer(text: str) -> DomainResult | None:
    """Stage 2: `{"taxonomy": …, "reason": …}` whose taxonomy names one of the seven domains
    (English or Chinese name, any accepted spelling), or None."""
    return parse_object(text, _domain_object)


def strip_fences(text: str) -> str:
    """The text inside a Markdown code fence wrapping the whole answer, else the text; trimmed."""
    body = text.strip()
    m = _FENCED.match(body)
    return (m.group(1) if m else body).strip()


def rewrite_limit(query: str, max_growth: float) -> int:
    """Longest valid rewrite of `query`, in characters."""
    return int(len(query.strip()) * max_growth) + REWRITE_SLACK_CHARS


def is_empty_answer(text: str) -> bool:
    """Whether a rewrite answer says "nothing left" (empty, whitespace, `""`, an empty fence)."""
    body = strip_fences(text)
    return not body or body in _EMPTY_ANSWERS


def parse_rewrite(text: str, query: Query, max_growth: float) -> str | None:
    """Stage 3: the rewritten query, or None (retried) when it is empty, in the other language than
    the query's text, or much longer than the query.

    An empty answer is invalid here so that it is asked again: a broken model also answers
    nothing. `curate_chunk` accepts "only engineering operations" when every attempt is empty.
    """
    if is_empty_answer(text):
        return None
    body = strip_fences(text)
    if detect_language(body) != detect_language(query.text):
        return None
    if len(body) > rewrite_limit(query.text, max_growth):
        return None
    return body


def filter_decision(result: FilterResult, min_quality: str) -> tuple[ReasonCode, str] | None:
    """Why stage 1 drops the query (first code, every reason joined), or None to keep it."""
    found: list[tuple[ReasonCode, str]] = []
    if QUALITY_RANK[result.quality_level] < QUALITY_RANK[min_quality]:
        found.append(("low_quality", f"{result.quality_level} quality: {result.quality_reason}"))
    if result.is_unrelated_to_search:
        found.append(("unrelated_to_search", f"unrelated to search: {result.unrelated_reason}"))
    if result.is_time_dependent:
        found.append(("time_dependent", f"time-dependent: {result.time_dependent_reason}"))
    if not found:
        return None
    return found[0][0], "; ".join(reason for _, reason in found)
