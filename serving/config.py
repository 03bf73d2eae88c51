"""Model configuration (YAML-validated): which engine hosts which model, and how."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ModelConfig(BaseModel):
    """One model served by one backend; the same block drives in-process, GPU and Ray use."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["hf", "vllm", "openai"] = "hf"
    """Engine: transformers in-process, vLLM in-process, or an OpenAI-compatible endpoint."""
    model: str = "tiny-llama"
    """Hub name, local path, served model name (openai), or a built-in tiny-* random model."""
    revision: str | None = None
    """Hub revision (commit) to pin."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights dtype; auto = bfloat16 on GPU, float32 on CPU."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the hf backend runs."""
    kernel: Literal["auto", "dense", "flex", "two_stage", "naive", "single"] = "auto"
    """Choice-scoring form of the hf backend (auto: flex on CUDA, two_stage on CPU)."""
    token_budget: int = Field(8192, ge=64)
    """Max tokens per packed forward pass (a group larger than this runs alone)."""
    seed: int = 0
    """Seed for sampling and for building tiny models."""
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra chat-template switches for generation (choice scoring always disables thinking)."""
    trust_remote_code: bool = False
    """Allow model repositories' own code (off by default)."""
    # vLLM engine settings
    tensor_parallel_size: int = Field(1, ge=1)
    """GPUs per replica (vllm)."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """Share of GPU memory vLLM may take."""
    max_model_len: int | None = None
    """Context length cap (vllm)."""
    enable_prefix_caching: bool = True
    """vLLM automatic prefix caching: the rubric prompts of a report share their prefix."""
    load_format: str = "auto"
    """vLLM load format; `dummy` gives random weights for benchmarks."""
    # OpenAI-compatible endpoint
    base_url: str | None = None
    """Endpoint root, e.g. http://localhost:8000/v1."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (the key is never logged)."""
    timeout_s: float = 600.0
    """Per-request timeout (openai)."""
    max_retries: int = Field(4, ge=1)
    """Attempts per request on 429/5xx/timeouts (openai)."""
    max_concurrency: int = Field(32, ge=1)
    """Requests in flight to the endpoint (openai)."""
