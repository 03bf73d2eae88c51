"""Settings of `lifesearch curate` (YAML, unknown keys rejected)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from lifesearch_local.configfile import load_yaml, validate_config
from lifesearch_local.curate.records import QualityLevel
from serving import Execution, HFConfig, ModelConfig, Result


class StageTokens(BaseModel):
    """Token cap of each stage's answer."""

    model_config = ConfigDict(extra="forbid")

    filter: Result[int] = Field(512, ge=8)
    """Stage 1: the JSON object with three judgments and one-sentence reasons."""
    domain: Result[int] = Field(128, ge=8)
    """Stage 2: the JSON object with the category name and a reason of at most 10 words."""
    rewrite: Result[int] = Field(2048, ge=8)
    """Stage 3: the rewritten query (at most about as long as the original)."""


class CurateConfig(BaseModel):
    """The curation model and how it is asked: decoding, bounded retries, thresholds, batching."""

    model_config = ConfigDict(extra="forbid")

    model: Result[ModelConfig] = Field(default_factory=HFConfig)
    """The model and the engine hosting it."""
    temperature: Result[float] = Field(0.0, ge=0.0)
    """Sampling temperature of the first attempt (retries use at least 0.7 and a new seed)."""
    retries: Result[int] = Field(2, ge=0, le=10)
    """Extra attempts after an invalid answer; then the query is recorded as failed at that stage."""
    max_tokens: Result[StageTokens] = Field(default_factory=StageTokens)
    """Token cap of each stage's answer."""
    min_quality: Result[QualityLevel] = "medium"
    """Lowest stage-1 quality level kept (our reading of the paper: keep high and medium, drop low)."""
    batch_size: Execution[int] = Field(32, ge=1)
    """Queries per chunk: each chunk goes through the three stages and is then appended to curation.jsonl."""
    rewrite_max_growth: Result[float] = Field(1.25, ge=1.0)
    """Stage 3: a rewrite longer than this times the query (+20 characters) is invalid and retried;
    rewriting only removes text."""


def load_curate_config(path: str | Path) -> CurateConfig:
    """A CurateConfig from a YAML holding a `curate:` block or a bare one."""
    data = load_yaml(path)
    return validate_config(CurateConfig, (data["curate"] or {}) if "curate" in data else data, path)
