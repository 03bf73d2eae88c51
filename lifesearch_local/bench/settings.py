"""What a judge benchmark measures: the settings `lifesearch bench judge` gathers from its options."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class JudgeBench:
    """What `lifesearch bench judge` measures (its options, documented in its --help)."""

    model: str = "tiny-llama"
    prefix_tokens: int = 2048
    rubrics: int = 20
    suffix_tokens: int = 128
    reports: int = 1
    reports_from: str | None = None
    tasks: str | None = None
    limit: int | None = None
    form: str = "auto"
    baseline: str = "single"
    repeats: int = 3
    backend: str = "hf"
    token_budget: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    peak_tflops: float | None = None
    seed: int = 0
