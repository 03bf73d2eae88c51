"""Agent configuration (YAML-validated): the model, its budgets, its tools, how many tasks run at once."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lifesearch_local.records import Id
from serving import Execution, HFConfig, ModelConfig, Result


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PythonToolConfig(_Cfg):
    """Limits of the `python` tool, applied in the child before the snippet's first line."""

    wall_s: Result[float] = Field(30.0, gt=0)
    """Wall-clock seconds before the whole process group is killed."""
    cpu_s: Result[int] = Field(20, ge=1)
    """CPU seconds per process (RLIMIT_CPU; SIGXCPU, then SIGKILL one second later)."""
    memory_mb: Result[int] = Field(1024, ge=64)
    """Memory of the whole call in MiB: each process's address space (RLIMIT_AS: allocations beyond it
    fail), and all its processes together (the call's cgroup v2 memory.max where the harness may make
    one, else measured by the runner; the call is killed past it, as `memory_limit`)."""
    max_procs: Result[int] = Field(32, ge=1)
    """Extra processes/threads the snippet may create (RLIMIT_NPROC above what its uid already runs;
    also the call cgroup's pids.max)."""
    file_mb: Result[int] = Field(16, ge=1)
    """Largest file the snippet may write, stdout and stderr included (RLIMIT_FSIZE), in MiB."""
    scratch_mb: Result[int] = Field(64, ge=1)
    """Everything the call may write together in MiB (its working directory and /dev/shm; each entry
    counts at least 4 KiB): a tmpfs of this size, else measured by the runner and the call killed
    past it; either way `scratch_limit`."""
    max_files: Result[int] = Field(256, ge=16)
    """Open file descriptors (RLIMIT_NOFILE)."""
    max_output_chars: Result[int] = Field(8000, ge=200)
    """stdout + stderr shown to the model; the middle is cut beyond this."""
    allow_weak_sandbox: Result[bool] = False
    """Run snippets even where the kernel/user gives only the weak sandbox (no private root, no
    Landlock+seccomp as root: host files readable, children may outlive the call), with a warning.
    Off: such a call fails as `sandbox_unavailable`. See the README's sandbox section."""


class ToolsConfig(_Cfg):
    """Which tools the agent has and how their results are shown."""

    enabled: Result[list[str]] = Field(default_factory=lambda: ["web_search", "web_fetch", "python"])
    """Tool names from the registry (lifesearch_local.agent.tools.TOOLS)."""
    timeout_s: Result[float] = Field(120.0, gt=0)
    """Cap on one tool call; a call past it becomes a `timeout` observation."""
    search_results: Result[int] = Field(10, ge=1, le=50)
    """Results per web_search (the model may ask for fewer)."""
    max_observation_chars: Result[int] = Field(20000, ge=200)
    """Longest tool result shown to the model when it arrives (a fetched page is cut here)."""
    truncated_observation_chars: Result[int] = Field(600, ge=0)
    """What is kept of an older tool result when the context budget forces truncation."""
    offline: Result[bool] = False
    """web_fetch never opens a connection or resolves a name: only the corpus and the cache answer."""
    python: Result[PythonToolConfig] = Field(default_factory=PythonToolConfig)
    """Limits of the python tool."""


class BatchConfig(_Cfg):
    """How concurrent agents' model calls are gathered into engine batches."""

    max_batch: Execution[int] = Field(32, ge=1)
    """Requests per backend.generate call at most."""
    max_wait_ms: Execution[float] = Field(5.0, ge=0)
    """How long the first request of a batch waits for company."""
    max_inflight: Execution[int] = Field(1, ge=1)
    """Batches in flight at once (1 for one in-process engine; the replica count for a pool)."""


class AgentConfig(_Cfg):
    """One agent: a model behind the shared ReAct harness. Its `id` tags every report."""

    id: Result[Id]
    """Name recorded in reports, trajectories and score tables."""
    model: Result[ModelConfig] = Field(default_factory=HFConfig)
    """The model and the engine hosting it."""
    max_iterations: Result[int] = Field(100, ge=1)
    """Model decisions per task (the paper's agents average 11–86); the last one must answer."""
    context_tokens: Result[int] = Field(32768, ge=256)
    """Prompt + output tokens per call; older tool results are cut first, then a final answer is forced."""
    max_tokens: Result[int] = Field(4096, ge=1)
    """Output tokens per model call."""
    wall_s: Result[float] = Field(1800.0, gt=0)
    """Wall-clock seconds per task; past it the model is asked for its final answer."""
    temperature: Result[float] = Field(0.7, ge=0)
    """Sampling temperature (0 = greedy; the paper samples three independent runs)."""
    top_p: Result[float] = Field(0.95, gt=0, le=1)
    """Nucleus sampling mass."""
    seed: Result[int] = 0
    """Base sampling seed; run r uses seed + r (one seed per run keeps requests batchable)."""
    model_retries: Result[int] = Field(2, ge=0, le=10)
    """Extra attempts (with backoff) of a model call that failed on a timeout, a lost connection or a
    429/5xx, before the task ends in error; other failures end it at once."""
    tools: Result[ToolsConfig] = Field(default_factory=ToolsConfig)
    """Tool selection and limits."""
    concurrency: Execution[int] = Field(16, ge=1)
    """Tasks in flight at once against the engine."""
    batch: Execution[BatchConfig] = Field(default_factory=BatchConfig)
    """Batching of concurrent model calls."""
