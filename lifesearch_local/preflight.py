"""Preflight: what a command's models need (CUDA, vLLM, weights, Ray resources), checked before any phase starts."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlparse

from serving.config import ModelConfig, RayConfig

from .errors import LifesearchError

VLLM_EXTRA = 'pip install -e ".[vllm]"'


class SetupError(LifesearchError):
    """This machine cannot run what the command asks for (no GPU, a missing extra, weights out of reach)."""


def preflight(models: Iterable[tuple[str, ModelConfig]], ray: RayConfig | None = None) -> None:
    """Raise SetupError (one line, naming the fix) if any (role, model) cannot run here.

    Ray resources first: a config that needs GPUs this machine lacks is the root cause, and
    Ray would otherwise wait out its startup timeout before saying so.
    """
    problems: dict[str, list[str]] = {}  # message -> roles, so that a shared cause is said once
    for role, model in models:
        problem = ray_problem(model, ray) or model_problem(model, ray)
        if problem:
            problems.setdefault(problem, []).append(role)
    if problems:
        raise SetupError("; ".join(f"{', '.join(roles)}: {msg}" for msg, roles in problems.items()))


def model_problem(model: ModelConfig, ray: RayConfig | None = None) -> str | None:
    """Why `model` cannot be loaded here, or None: a missing extra, no CUDA, weights out of reach."""
    if model.backend == "openai":
        return None  # a remote endpoint: its own machine hosts the model
    from serving.ray.session import cluster_address

    remote = bool(ray and cluster_address(ray))  # a joined cluster's workers have their own packages and GPUs
    if model.backend == "vllm" and not remote and importlib.util.find_spec("vllm") is None:
        return (f"backend vllm ({model.model}) needs vLLM, which is not installed: {VLLM_EXTRA} "
                "(GPU machines), or use backend: hf")
    if model.backend == "hf" and model.device == "cuda" and not remote and not cuda_available():
        return (f"device cuda ({model.model}) but this machine has no usable CUDA GPU "
                f"({torch_build()}); use --device cpu (or auto), or run on a GPU machine")
    return weights_problem(model.model, model.revision)


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
    from serving.ray.session import cluster_address, replica_resources

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
    from serving.engines.real_models import REAL_MODELS, real_model_problem
    from serving.engines.tiny import TINY_MODELS

    if name in REAL_MODELS:
        return real_model_problem(name)
    if name in TINY_MODELS or Path(name).expanduser().is_dir():
        return None
    if name.startswith((".", "/", "~")) or name.count("/") != 1:
        return f"model {name!r} is neither a local directory nor a Hugging Face repo id (org/name)"
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


@contextlib.contextmanager
def new_dir_or_nothing(path: str | Path, keep: Iterable[str] = ()) -> Iterator[None]:
    """Remove `path` if this block created it and failed before writing any work (files named in
    `keep` are work); a rerun must not mistake a half-written directory for progress."""
    p = Path(path)
    existed = p.exists()
    try:
        yield
    except BaseException:
        if not existed and p.is_dir() and not any((p / name).exists() for name in keep):
            from .store import RunDir, RunDirBusy

            # Under the run directory's lock: another process may have created it meanwhile and be using it.
            with contextlib.suppress(RunDirBusy), RunDir(p).locked():
                shutil.rmtree(p, ignore_errors=True)
        raise
