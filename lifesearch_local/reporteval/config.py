"""Settings of the ReportEval stage (the judge itself is a JudgeConfig)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lifesearch_local.reporteval.records import METRICS, Metric
from serving import Result


class ReportEvalConfig(BaseModel):
    """What to evaluate and how: metrics, pair sampling, source chunking, token caps."""

    model_config = ConfigDict(extra="forbid")

    metrics: Result[list[Metric]] = Field(default_factory=lambda: list(METRICS))
    """Metrics to compute, in this order."""
    seed: Result[int] = 0
    """Base seed of the redundancy pair sampler (recorded in the manifest)."""
    max_pairs: Result[int] = Field(30, ge=1)
    """Redundancy: at most this many section pairs per report (the paper caps at 30)."""
    chunk_tokens: Result[int] = Field(6000, ge=200)
    """Factuality: estimated tokens of source text per prompt; longer sources are split into chunks."""
    context_reserve: Result[int] = Field(1024, ge=0)
    """Tokens kept free for the template, the claim and the answer when max_model_len caps chunk_tokens."""
    quality_max_tokens: Result[int] = Field(1024, ge=8)
    """generate mode: token cap of the quality answer (five scores with justifications)."""

    def chunk_budget(self, max_model_len: int | None) -> int:
        """Source tokens per chunk: chunk_tokens, capped so template + claim + answer still fit the context."""
        if max_model_len is None:
            return self.chunk_tokens
        return max(200, min(self.chunk_tokens, max_model_len - self.context_reserve))
