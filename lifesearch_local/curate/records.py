"""Typed records of curation: input queries, the parsed answer of each stage, one record per query."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from lifesearch_local.records import Domain, Language

QualityLevel = Literal["high", "medium", "low"]
QUALITY_RANK: dict[str, int] = {"low": 0, "medium": 1, "high": 2}
Status = Literal["kept", "dropped", "failed"]
StageName = Literal["filter", "domain", "rewrite"]
STAGES: tuple[StageName, ...] = ("filter", "domain", "rewrite")
ReasonCode = Literal[
    "kept", "low_quality", "unrelated_to_search", "time_dependent", "only_engineering_operations", "no_valid_answer"
]


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Query(_Rec):
    """One query seed to curate."""

    id: str
    """Query id, unique within the queries file; becomes the draft task's id."""
    text: str
    """The query as the user (crowd worker) wrote it."""
    language: Language
    """`en` or `zh`: given in the file, or detected from the share of CJK characters."""


class FilterResult(_Rec):
    """Stage 1 (paper App. B.1): the three judgments, with exactly the paper's fields."""

    quality_level: QualityLevel
    """high, medium or low task quality."""
    quality_reason: str
    """One-sentence reason for the quality level."""
    is_unrelated_to_search: bool
    """True when the request is not information seeking (pure coding, file editing, chat, …)."""
    unrelated_reason: str
    """One-sentence reason ("ok" when the flag is false)."""
    is_time_dependent: bool
    """True when the task presupposes a specific, unstated recent event or change in state."""
    time_dependent_reason: str
    """One-sentence reason ("ok" when the flag is false)."""


class DomainResult(_Rec):
    """Stage 2 (paper App. B.2): the category the classifier chose."""

    taxonomy: str
    """The category name as the model wrote it (English or Chinese)."""
    reason: str
    """The model's short reason."""
    domain: Domain
    """The LifeSearch domain that name maps to (`tasks.parse_domain`)."""


class CurationRecord(_Rec):
    """What curation decided about one query: kept, dropped (with the reason) or failed (no valid answer)."""

    id: str
    """The query's id."""
    language: Language
    """The query's language (given or detected)."""
    query: str
    """The original query text."""
    status: Status
    """kept (a draft task), dropped (a stage filtered it out) or failed (a stage never got a valid answer)."""
    stage: StageName
    """The stage that decided: where it was dropped or failed; `rewrite` for a kept query."""
    code: ReasonCode
    """Machine-readable reason: kept, low_quality, unrelated_to_search, time_dependent,
    only_engineering_operations or no_valid_answer."""
    reason: str
    """Human-readable reason, e.g. "low quality: …", "time-dependent: …", "only engineering operations"."""
    filter: FilterResult | None = None
    """Stage 1 answer, when it was valid."""
    classification: DomainResult | None = None
    """Stage 2 answer, when the query got that far and the answer was valid."""
    rewritten: str | None = None
    """Stage 3 output: the query with operations removed ("" = nothing but engineering operations)."""
    raw: dict[str, list[str]] = Field(default_factory=dict)
    """Raw model outputs of every attempt, by stage (filter, domain, rewrite), kept for audit."""
    prompts: dict[str, str] = Field(default_factory=dict)
    """Templates used, by name (curate_filter, curate_domain_en|zh, curate_rewrite) -> sha256[:16]."""
    model: str
    """The curation model (hub id, path, tiny-* or smollm2-135m)."""
