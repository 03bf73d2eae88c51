"""vLLM's CPU build, set up before its engine starts: compute threads on every allowed core, a KV cache that fits.

Two of vLLM's CPU defaults hurt here. Its thread binding (`VLLM_CPU_OMP_THREADS_BIND=auto`)
keeps one core per worker for its scheduler process: on a 2-core machine the model ran on
core 0 alone (`core ids=[0], reserved_cpus=[1]` in vLLM's log). And with no KV-cache size it
reserves 90% of the machine's RAM, which fails with a long traceback as soon as other
processes use some. `cpu_setup` fixes both in every path that opens `VLLMEngine` (judge,
agent, ReportEval, Ray actors, bench): the binding goes to the environment vLLM reads, and
the KV cache is sized from `max_model_len` and the free memory, or refused in one line.
The functions that decide are pure, for tests without vLLM.
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping, Sequence
from typing import Any

log = logging.getLogger(__name__)
BIND = "VLLM_CPU_OMP_THREADS_BIND"
RESERVED = "VLLM_CPU_NUM_OF_RESERVED_CPU"
GIB = 2**30
# Room for this many full-length sequences: the rubric prompts of several reports at once
# (with prefix caching a report's rubrics share one copy of the report's KV).
KV_SEQUENCES = 4
# Never take more than this share of the memory free now: the weights, activations and the
# other processes of a shared machine need the rest.
KV_SHARE_OF_FREE = 0.5


class CPUSetupError(ValueError):
    """A vLLM-on-CPU setting that cannot work here, said in one line naming the setting to change."""


def cpu_list(cpus: Sequence[int]) -> str:
    """`[0, 1, 2, 5]` as vLLM's list syntax, `0-2,5`."""
    out: list[str] = []
    ids = sorted(set(cpus))
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def parse_cpu_list(text: str) -> list[int]:
    """`0-2,5` → `[0, 1, 2, 5]` (vLLM's syntax for one worker's cores)."""
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def allowed_cpus() -> list[int]:
    """The cores this process may run on (its affinity mask, which taskset, Slurm or a container set)."""
    return sorted(os.sched_getaffinity(0))


def thread_binding(cores: str | None, allowed: Sequence[int], environ: MutableMapping[str, str]) -> dict[str, str]:
    """The variables to set so that vLLM's CPU worker computes on `cores` (default: every allowed core)
    with no core kept back for its scheduler process (which mostly waits). A binding the user already
    put in the environment wins: nothing is returned then."""
    if BIND in environ:
        return {}
    bind = cores or cpu_list(allowed)
    return {BIND: bind, RESERVED: environ.get(RESERVED, "0")}


def bound_threads(environ: MutableMapping[str, str]) -> int | None:
    """Compute threads the binding in `environ` gives vLLM's worker (None: vLLM decides)."""
    bind = environ.get(BIND, "auto")
    if bind in ("auto", "nobind"):
        return None
    return len(parse_cpu_list(bind.split("|")[0]))


def kv_bytes_per_token(hf_config: Any, dtype_bytes: int) -> int:
    """Bytes of keys and values one token takes across all layers."""
    heads = getattr(hf_config, "num_attention_heads", 1)
    kv_heads = getattr(hf_config, "num_key_value_heads", None) or heads
    head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // heads
    return 2 * hf_config.num_hidden_layers * kv_heads * head_dim * dtype_bytes


def kv_cache_plan(per_token: int, max_len: int, free: int) -> tuple[int, str]:
    """(KV-cache bytes, the log line saying why) for `max_len` positions with `free` bytes of memory free.

    Room for KV_SEQUENCES full-length sequences, within KV_SHARE_OF_FREE of the free memory;
    at least one full-length sequence (vLLM refuses less), else CPUSetupError naming `kv_cache_gib`.
    """
    need = per_token * max_len
    cap = int(free * KV_SHARE_OF_FREE)
    if need > cap:
        raise CPUSetupError(
            f"vllm on CPU: one sequence of max_model_len {max_len} tokens needs {need / GIB:.2f} GiB of KV cache, "
            f"more than {KV_SHARE_OF_FREE:.0%} of the {free / GIB:.2f} GiB free now; set kv_cache_gib (and a smaller "
            "max_model_len) in the model block")
    size = min(KV_SEQUENCES * need, cap)
    return size, (f"vllm on CPU: kv_cache_gib not set; KV cache {size / GIB:.2f} GiB = {size // per_token:,} tokens "
                  f"(max_model_len {max_len}, {per_token / 1024:.1f} KiB a token, {free / GIB:.2f} GiB free); "
                  "set kv_cache_gib to choose")


def kv_cache_problem(model: Any) -> str | None:
    """Why the KV cache vLLM's CPU build would give `model` (a vllm block without kv_cache_gib) cannot hold one
    sequence of max_model_len tokens in the memory free now (vLLM would fail after a traceback); None when it can,
    or when the model's config is not readable here (the engine says why when it loads)."""
    from ..models.real_models import resolve_model_path

    try:
        from transformers import AutoConfig

        hf = AutoConfig.from_pretrained(resolve_model_path(model.model), revision=model.revision,
                                        trust_remote_code=model.trust_remote_code)
        dtype_bytes = 2 if model.dtype in ("bfloat16", "float16") else 4
        kv_cache_plan(kv_bytes_per_token(hf, dtype_bytes), model_max_len(hf, model.max_model_len), free_memory())
    except CPUSetupError as e:
        return str(e)
    except (OSError, ValueError):
        return None
    return None


def free_memory() -> int:
    """Bytes of memory available now (MemAvailable: free plus reclaimable caches)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise CPUSetupError("vllm on CPU: /proc/meminfo has no MemAvailable; set kv_cache_gib in the model block")


def model_max_len(hf_config: Any, cap: int | None) -> int:
    """Positions vLLM will allow: the config's cap, else the model's own limit."""
    if cap is not None:
        return cap
    text = getattr(hf_config, "get_text_config", lambda: hf_config)()
    n = getattr(text, "max_position_embeddings", None)
    if not isinstance(n, int):
        raise CPUSetupError("vllm on CPU: the model declares no max_position_embeddings; set max_model_len "
                            "and kv_cache_gib in the model block")
    return n


def cpu_setup(cfg: Any, hf_config: Any, *, environ: MutableMapping[str, str] | None = None,
              allowed: Sequence[int] | None = None, free: int | None = None) -> int | None:
    """Before `vllm.LLM` on CPU: set the thread binding in `environ` (default os.environ), and return
    the KV-cache bytes to use when the config sets none (None when it does). Logs both (INFO)."""
    env = os.environ if environ is None else environ
    binding = thread_binding(getattr(cfg, "cpu_cores", None), allowed_cpus() if allowed is None else allowed, env)
    env.update(binding)
    where = "" if binding else " (from the environment)"
    log.info("vllm on CPU: compute threads bound to cores %s%s, %s reserved", env.get(BIND, "auto"), where,
             env.get(RESERVED, "vLLM default"))
    if cfg.kv_cache_gib is not None:
        return None
    dtype_bytes = 2 if cfg.dtype in ("bfloat16", "float16") else 4  # auto means fp32 on CPU
    size, line = kv_cache_plan(kv_bytes_per_token(hf_config, dtype_bytes), model_max_len(hf_config, cfg.max_model_len),
                               free_memory() if free is None else free)
    log.info("%s", line)
    return size
