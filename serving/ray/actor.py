"""The Ray actor body: one engine (hf or vllm) per process, behind the model protocol."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from .._util.logs import log_to_stderr
from .._util.threads import fit_torch_threads
from ..config import ModelConfig
from ..engines import open_engine
from ..engines.vllm import clear_stray_vllm_env
from ..protocol import ChatRequest, ChoiceGroup, ChoiceResult, Generation


class EngineHost:
    """Loads the engine named by the config and serves the two protocol verbs.

    Wrapped with `ray.remote` by the pool (so this module never imports ray). Keeps a short
    record of the group keys it scored, which tells which replica served which report.
    """

    def __init__(self, cfg: ModelConfig, threads: int | None = None):
        # this process's own entry point: the engine's notices reach the driver through its stderr
        log_to_stderr(ours=("serving",))
        self.cleared_env = clear_stray_vllm_env()
        if threads and cfg.backend == "hf":
            # Ray sets OMP_NUM_THREADS=1 in workers; match the CPUs the actor reserved (and may use here).
            fit_torch_threads(reserved=threads)
        t0 = time.perf_counter()
        self.cfg = cfg
        self.engine = open_engine(cfg)
        self.load_s = time.perf_counter() - t0
        self.keys: list[list[str]] = []
        self.requests_served = 0

    def ready(self) -> dict[str, Any]:
        """Identity of this replica once its model is loaded, and the node it runs on."""
        return {"pid": os.getpid(), "load_s": round(self.load_s, 3), "model_hash": self.engine.model_hash(),
                "identity": self.engine.identity().model_dump(), "cleared_env": self.cleared_env, **this_node()}

    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        self.keys.append([g.key for g in groups])
        return self.engine.score_choices(groups, choices)

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        self.requests_served += len(requests)
        return self.engine.generate(requests)

    def served_keys(self) -> list[list[str]]:
        """Group keys of every score_choices call, one list per call."""
        return self.keys

    def stats(self) -> dict[str, Any]:
        """The engine's counters (kernel work, generation tokens) and what this replica served."""
        return {"requests_served": self.requests_served, "groups_served": sum(map(len, self.keys)),
                **self.engine.stats()}


def this_node() -> dict[str, str | None]:
    """This process's host name and the address its Ray node was started with (the one other
    nodes reach it at); None for the address outside Ray."""
    import socket

    try:  # under Ray only (the pool's actors); this module itself never needs ray
        import ray

        ip: str | None = ray.util.get_node_ip_address() if ray.is_initialized() else None
    except Exception:  # no ray here, or no node yet: the host name still says where
        ip = None
    return {"hostname": socket.gethostname(), "ip": ip}
