"""Joining or starting Ray for a run, and the resources (GPUs) its replicas hold."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..config import ModelConfig, RayConfig


def replica_resources(model: ModelConfig, ray_cfg: RayConfig, cluster_gpus: float) -> dict[str, float]:
    """Ray resources of one replica: GPUs = tensor-parallel size for vllm, CPU-only for hf on CPU."""
    gpus = ray_cfg.num_gpus_per_replica
    if gpus is None:
        if model.backend == "vllm":
            gpus = float(model.tensor_parallel_size)
        elif model.backend == "hf" and model.device == "cuda":
            gpus = 1.0
        elif model.backend == "hf" and model.device == "auto":
            gpus = 1.0 if cluster_gpus > 0 else 0.0
        else:
            gpus = 0.0
    return {"num_cpus": ray_cfg.num_cpus_per_replica, "num_gpus": gpus}


def gpus_held(model: ModelConfig, ray_cfg: RayConfig | None) -> float:
    """GPUs a phase holds while its model is loaded (GPU-seconds = wall × this, in the manifest)."""
    if model.backend == "openai":
        return 0.0  # a remote endpoint: its GPUs are not this run's to count
    if ray_cfg is not None:
        import ray

        cluster = ray.cluster_resources().get("GPU", 0.0) if ray.is_initialized() else 0.0
        return ray_cfg.replicas * replica_resources(model, ray_cfg, cluster)["num_gpus"]
    if model.backend == "vllm":
        return float(model.tensor_parallel_size)
    if model.device == "auto":
        import torch

        return 1.0 if torch.cuda.is_available() else 0.0
    return 1.0 if model.device == "cuda" else 0.0


# -- the Ray session --------------------------------------------------------------


def cluster_address(ray_cfg: RayConfig) -> str | None:
    """The existing cluster a run joins: `ray.address`, else $RAY_ADDRESS (set by slurm/ray-cluster.sh
    and by `ray start`'s instructions); None starts a local cluster. Ray itself reads RAY_ADDRESS,
    so a config written for a local cluster must join when it is set, or ray.init refuses it."""
    import os

    return ray_cfg.address or os.environ.get("RAY_ADDRESS") or None


def connect(ray_cfg: RayConfig) -> bool:
    """Join the configured cluster or start a local one; False when Ray was already up here."""
    import ray

    if ray.is_initialized():
        return False
    address = cluster_address(ray_cfg)
    if not address:
        token_auth_for_local_cluster()
    kw: dict[str, Any] = {"namespace": ray_cfg.namespace, "log_to_driver": ray_cfg.log_to_driver,
                          "logging_level": logging.WARNING}
    with _keep_sigterm():
        if address:
            sizing = [k for k in ("num_cpus", "num_gpus", "object_store_memory_mb") if getattr(ray_cfg, k) is not None]
            if sizing:  # the cluster is already sized (e.g. by the Slurm job): these apply to a local one only
                logging.getLogger(__name__).info("joining the Ray cluster at %s; ray.%s apply to a local cluster "
                                                 "only and are not used", address, ", ray.".join(sizing))
            ray.init(address=address, **kw)
        else:
            mem = ray_cfg.object_store_memory_mb
            ray.init(num_cpus=ray_cfg.num_cpus, num_gpus=ray_cfg.num_gpus, include_dashboard=False,
                     object_store_memory=mem * 2**20 if mem else None, **kw)
    return True


def token_auth_for_local_cluster() -> None:
    """Ask for token authentication explicitly, as Ray recommends: a local cluster then uses (or
    creates) ~/.ray/auth_token without Ray's warning that it enabled token auth by default. A
    user's own RAY_AUTH_MODE (e.g. `disabled`) is respected."""
    import os

    if "RAY_AUTH_MODE" in os.environ:
        return
    os.environ["RAY_AUTH_MODE"] = "token"  # inherited by the GCS, raylet and workers
    try:  # the driver read its config when ray was imported: refresh it, as Ray does itself
        from ray._raylet import Config

        Config.initialize("")
    except (ImportError, AttributeError):  # another Ray version: the warning is all that is at stake
        pass


@contextmanager
def _keep_sigterm() -> Iterator[None]:
    """Ray's driver installs a SIGTERM handler that kills the process on the spot; put ours back
    so that SIGTERM (Slurm preemption) still finishes the batch, flushes, and exits 0."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)


_sessions = 0  # open ray_session blocks: pools inside one leave Ray up for the next phase


@contextmanager
def ray_session(ray_cfg: RayConfig | None) -> Iterator[None]:
    """Keep Ray up across the pools (phases) opened inside; it is started by the first pool that
    needs it (a rerun with nothing left to do starts nothing) and shut down here if so."""
    global _sessions
    if ray_cfg is None:
        yield
        return
    import ray

    was_up = ray.is_initialized()
    _sessions += 1
    try:
        yield
    finally:
        _sessions -= 1
        if not was_up and not _sessions and ray.is_initialized():
            ray.shutdown()


def in_session() -> bool:
    """Whether a `ray_session` block is open (a pool then leaves Ray up for the next phase)."""
    return _sessions > 0


# -- an existing cluster's nodes (batch scripts) ------------------------------------


def alive_nodes() -> list[dict[str, Any]]:
    """The cluster's live nodes as Ray reports them (connected by `connect`)."""
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


class ClusterGone(RuntimeError):
    """The process hosting the cluster's head exited while a caller waited for the cluster."""


def wait_for_nodes(address: str, nodes: int, timeout_s: float, poll_s: float = 1.0,
                   gone: Callable[[], str | None] = lambda: None) -> list[str]:
    """Join the cluster at `address` and wait until `nodes` are alive or `timeout_s` passes;
    returns the addresses of the nodes alive then (Ray is left as it was found). `gone()` returns
    why the wait is hopeless (the head's process exited) and raises ClusterGone at once.

    Ray is joined and polled in a helper thread: ray.init blocks in C++ while the head is not
    up, and the caller's main thread must stay free to act on SIGTERM and on `gone` at once."""
    import time

    state: dict[str, Any] = {"alive": []}
    done = threading.Event()
    helper = threading.Thread(target=_poll_nodes, args=(address, poll_s, state, done), daemon=True)
    helper.start()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and len(state["alive"]) < nodes:  # bounded by the deadline
            why = gone()
            if why:
                raise ClusterGone(why)
            if "error" in state:
                raise state["error"]
            time.sleep(0.2)
        return state["alive"]
    finally:
        done.set()
        helper.join(timeout=10)


def _listening(address: str) -> bool:
    """Whether the head's port at `address` (host:port, or `auto` = $RAY_ADDRESS) accepts a
    connection; True when the address has another form (e.g. ray://), which Ray handles itself."""
    import os
    import socket

    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return True
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


class _Drop(logging.Filter):
    """Drops log records whose message starts with `prefix`."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


def _poll_nodes(address: str, poll_s: float, state: dict[str, Any], done: threading.Event) -> None:
    """The helper of `wait_for_nodes`: connect, then count live nodes until `done`."""
    import ray

    # Ray warns that it cannot install its SIGTERM handler off the main thread: that is the point.
    quiet = _Drop("SIGTERM handler is not set")
    logging.getLogger("ray._private.worker").addFilter(quiet)
    try:
        # Ray's connection attempts log a warning every 5 s while the head is not listening: knock first.
        while not done.is_set() and not _listening(address):
            done.wait(0.2)
        if done.is_set():
            return
        started = connect(RayConfig(address=address))
    except Exception as e:  # handed to the waiting thread, which raises it
        state["error"] = e
        return
    finally:
        logging.getLogger("ray._private.worker").removeFilter(quiet)
    try:
        while not done.is_set():
            state["alive"] = sorted(n["NodeManagerAddress"] for n in alive_nodes())
            done.wait(poll_s)
    except Exception as e:
        state["error"] = e
    finally:
        if started:
            ray.shutdown()


def node_resources(address: str) -> list[tuple[str, dict[str, float]]]:
    """(address, resources) of each live node of the cluster at `address`."""
    import ray

    started = connect(RayConfig(address=address))
    try:
        return [(n["NodeManagerAddress"], {k: v for k, v in n["Resources"].items() if not k.startswith("node:")})
                for n in alive_nodes()]
    finally:
        if started:
            ray.shutdown()
