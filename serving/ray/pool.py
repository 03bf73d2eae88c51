"""A pool of Ray actors, one engine each, that is itself a model backend (routes groups, survives deaths)."""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._util.threads import actor_env
from ..config import ModelConfig, RayConfig
from ..protocol import ChatRequest, ChoiceGroup, ChoiceResult, Engine, EngineInfo, Generation
from .nodes import count_records, node_of, tally, where
from .session import cluster_address, connect, in_session, replica_resources

log = logging.getLogger(__name__)


class PoolError(RuntimeError):
    """The pool could not finish a call: every replica died or hung, or retries ran out."""


# -- routing (pure) -----------------------------------------------------------------


def _text(messages: Sequence[dict[str, Any]], prefill: str) -> str:
    return "".join(str(m.get("content") or "") for m in messages) + prefill


def group_cost(group: ChoiceGroup) -> int:
    """Estimated tokens a group costs an engine that shares its prefix (packed kernel, prefix cache):
    the common prefix of the prompts once, plus each prompt's own suffix (about 4 characters a token)."""
    texts = [_text(r.messages, r.prefill) for r in group.requests]
    if not texts:
        return 1
    shared = len(os.path.commonprefix(texts))
    return max(1, (shared + sum(len(t) - shared for t in texts)) // 4)


def request_cost(req: ChatRequest) -> int:
    """Estimated tokens of a chat request: its prompt plus its output budget."""
    return len(_text(req.messages, req.prefill)) // 4 + req.max_tokens


def assign(costs: Sequence[float], loads: Sequence[float]) -> list[list[int]]:
    """Greedy longest-first: each item (by index) goes whole to the replica with the least load.

    `loads` is the work each replica already has; returns each replica's item indices in
    input order. An item is never split, so a report's rubric group stays on one replica.
    """
    if not loads:
        raise ValueError("no replica to assign to")
    load = list(loads)
    out: list[list[int]] = [[] for _ in load]
    for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
        r = min(range(len(load)), key=lambda r: (load[r], r))
        out[r].append(i)
        load[r] += costs[i]
    return [sorted(x) for x in out]


# -- the pool ---------------------------------------------------------------------


@dataclass
class Replica:
    """One actor and what the pool knows of it."""

    index: int
    name: str
    handle: Any
    alive: bool = True
    info: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    records: int = 0
    """Records (decisions, generations) of the results it returned."""
    failed: bool = False
    """Dropped from the pool (died, hung, never ready), not merely closed."""

    @property
    def node(self) -> dict[str, str]:
        return node_of(self.info)


class RayPool(Engine):
    """`replicas` Ray actors hosting `model`, usable wherever a Engine is.

    `with RayPool(model, ray_cfg) as backend:` creates the actors (per phase) and kills them
    on exit. `score_choices` sends each group whole to one replica, balancing estimated tokens;
    `generate` spreads requests the same way. Work on a replica that dies or hangs past
    `call_timeout_s` is re-sent to a live one, at most `max_task_retries` times; then, or when
    no replica is left, the call raises PoolError. Every wait has a timeout.
    """

    def __init__(self, model: ModelConfig, ray_cfg: RayConfig, *, phase: str = "serve", host: type | None = None):
        self.model, self.ray_cfg, self.phase = model, ray_cfg, phase
        self._host = host
        self.replicas: list[Replica] = []
        self._inflight: dict[int, float] = {}
        self._lock = threading.Lock()
        self._started_ray = False
        self._model_hash: str | None = None
        self._identity: EngineInfo | None = None
        self.counters: dict[str, Any] = {"ray_replicas": ray_cfg.replicas, "replica_failures": 0, "retried_items": 0}

    def __repr__(self) -> str:
        return f"RayPool({self.model.backend}:{self.model.model}, replicas={self.ray_cfg.replicas}, phase={self.phase!r})"

    # lifecycle -------------------------------------------------------------------
    def __enter__(self) -> RayPool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> RayPool:
        """Connect to Ray, create the actors, and wait (bounded) until each has loaded its model."""
        import ray

        self._started_ray = connect(self.ray_cfg)
        try:
            self._create_actors(ray)
            self._await_ready(ray)
        except BaseException:
            self.close()
            raise
        return self

    def _create_actors(self, ray: Any) -> None:
        from .actor import EngineHost

        total = ray.cluster_resources()
        res = replica_resources(self.model, self.ray_cfg, total.get("GPU", 0.0))
        self._check_fits(res, total)
        env = {**self.ray_cfg.runtime_env}
        if self.ray_cfg.env_vars:
            env["env_vars"] = {**env.get("env_vars", {}), **self.ray_cfg.env_vars}
        actor_cls = ray.remote(self._host or EngineHost)
        threads = max(1, int(res["num_cpus"])) if res["num_gpus"] == 0 else None
        if threads and self.model.backend == "hf":  # the wait policy must be in the worker's env before torch starts
            wait = actor_env(remote=cluster_address(self.ray_cfg) is not None)
            env["env_vars"] = {**wait, **env.get("env_vars", {})}  # the config's own env_vars win
        run = uuid.uuid4().hex[:8]
        for i in range(self.ray_cfg.replicas):
            name = f"{self.phase}-{run}-{i}"
            handle = actor_cls.options(
                name=name, namespace=self.ray_cfg.namespace, max_restarts=self.ray_cfg.max_restarts,
                runtime_env=env or None, **res,
            ).remote(self.model, threads)
            self.replicas.append(Replica(i, name, handle))
            self._inflight[i] = 0.0

    def _check_fits(self, res: dict[str, float], total: dict[str, float]) -> None:
        """Replicas that can never be placed would wait out startup_timeout_s: say so now."""
        n = self.ray_cfg.replicas
        short = [f"{n} x {res[k]:g} {name} > {total.get(name, 0):g} in the cluster"
                 for k, name in (("num_cpus", "CPU"), ("num_gpus", "GPU")) if n * res[k] > total.get(name, 0)]
        if not short:
            return
        msg = f"{n} replicas of {self.model.model} do not fit: {'; '.join(short)}"
        if cluster_address(self.ray_cfg) is None:  # a local cluster does not grow
            raise PoolError(msg + " (lower ray.replicas or the per-replica resources, or raise ray.num_cpus)")
        log.warning("%s; waiting for the cluster to grow (up to %g s)", msg, self.ray_cfg.startup_timeout_s)

    def _await_ready(self, ray: Any) -> None:
        refs = {r.handle.ready.remote(): r for r in self.replicas}
        done, pending = ray.wait(list(refs), num_returns=len(refs), timeout=self.ray_cfg.startup_timeout_s)
        for ref in pending:
            self._drop(refs[ref], f"not ready after {self.ray_cfg.startup_timeout_s:g} s", kill=True)
        for ref in done:
            try:
                refs[ref].info = ray.get(ref, timeout=10)
            except Exception as e:  # a model that fails to load kills its actor at creation
                self._drop(refs[ref], _short(e), kill=True)
        live = self._live()
        if not live:
            raise PoolError(f"no replica of {self.model.model} started: {self._errors()}")
        self._model_hash = live[0].info.get("model_hash")
        if live[0].info.get("identity"):  # every replica loads the same config: the first speaks for all
            self._identity = EngineInfo.model_validate(live[0].info["identity"])
        log.info("%s: %d/%d replicas ready", self, len(live), len(self.replicas))

    def close(self) -> None:
        """Snapshot the replicas' engine counters, kill every actor, leave Ray if we started it."""
        import ray

        if self.replicas and ray.is_initialized():
            self.counters.update(self._engine_stats(ray))
            for r in self.replicas:
                try:
                    ray.kill(r.handle, no_restart=True)
                except Exception as e:  # already gone
                    log.debug("kill %s: %s", r.name, e)
                r.alive = False
        if self._started_ray and not in_session() and ray.is_initialized():
            ray.shutdown()
        self._started_ray = False

    def _engine_stats(self, ray: Any) -> dict[str, Any]:
        live = self._live()
        refs = [r.handle.stats.remote() for r in live]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=30) if refs else ([], [])
        total: dict[str, Any] = {}
        for ref in done:
            try:
                s = ray.get(ref, timeout=5)
            except Exception:  # a replica that died has no counters to give
                continue
            for k, v in s.items():
                total[k] = total.get(k, 0) + v if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        if "kernel_seconds" in total:
            total["kernel_seconds"] = round(total["kernel_seconds"], 3)
        return total

    # the protocol ----------------------------------------------------------------
    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        return self._run("score_choices", list(groups), [group_cost(g) for g in groups], lambda part: (part, list(choices)))

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        return self._run("generate", list(requests), [request_cost(r) for r in requests], lambda part: (part,))

    def model_hash(self) -> str | None:
        return self._model_hash

    def identity(self) -> EngineInfo:
        return self._identity or super().identity()

    def stats(self) -> dict[str, Any]:
        """Replicas, failures and retries, the nodes that did the work (`nodes`) and each replica lost
        with its node (`replicas_lost`); after `close`, the replicas' engine counters summed too."""
        lost = [{"replica": r.name, **r.node, "error": r.error} for r in self.replicas if r.failed]
        return {**self.counters, "nodes": tally((r.node, r.records, r.failed) for r in self.replicas),
                "replicas_lost": lost}

    def served_keys(self) -> list[list[list[str]]]:
        """Per replica, the group keys of each score_choices call it served (for checks and logs)."""
        import ray

        return [ray.get(r.handle.served_keys.remote(), timeout=30) if r.alive else [] for r in self.replicas]

    # dispatch ---------------------------------------------------------------------
    def _run(self, method: str, items: list, costs: list[float], args: Callable[[list], tuple]) -> list:
        from serving._util.retry import RetryableError, RetryPolicy, retry

        from .._util.stop import check

        results: dict[int, Any] = {}
        attempts = 1 + self.ray_cfg.max_task_retries

        def attempt() -> None:
            check()  # a stop requested since the last attempt: no retry
            todo = [i for i in range(len(items)) if i not in results]
            failed = self._dispatch(method, items, costs, todo, args, results)
            if failed:
                self.counters["retried_items"] += failed
                raise RetryableError(f"{failed} item(s) lost with their replica")

        if not items:
            return []
        try:
            retry(attempt, RetryPolicy(attempts=attempts, base_delay=0.05, max_delay=1.0))
        except RetryableError:
            raise PoolError(f"{method}: work still failing after {attempts} attempts; replicas: {self._errors()}") from None
        return [results[i] for i in range(len(items))]

    def _dispatch(self, method: str, items: list, costs: list[float], todo: list[int],
                  args: Callable[[list], tuple], results: dict[int, Any]) -> int:
        """Send `todo` to live replicas, wait (bounded), store results; returns how many items were lost."""
        import ray

        with self._lock:
            live = self._live()
            if not live:
                raise PoolError(f"{method}: no live replica left; replicas: {self._errors()}")
            shares = assign([costs[i] for i in todo], [self._inflight[r.index] for r in live])
            calls: dict[Any, tuple[Replica, list[int], float]] = {}
            for rep, share in zip(live, shares):
                if share:
                    idxs = [todo[k] for k in share]
                    load = sum(costs[i] for i in idxs)
                    self._inflight[rep.index] += load
                    ref = getattr(rep.handle, method).remote(*args([items[i] for i in idxs]))
                    calls[ref] = (rep, idxs, load)
        try:
            done, hung = self._wait(ray, list(calls))
            lost = 0
            for ref in done:
                rep, idxs, _ = calls[ref]
                lost += self._take(ray, ref, rep, idxs, results)
            for ref in hung:
                rep, idxs, _ = calls[ref]
                self._drop(rep, f"{method} took over {self.ray_cfg.call_timeout_s:g} s", kill=True)
                lost += len(idxs)
            return lost
        finally:
            with self._lock:
                for rep, _, load in calls.values():
                    self._inflight[rep.index] -= load

    def _wait(self, ray: Any, refs: list) -> tuple[list, list]:
        """(done, hung) after at most call_timeout_s. Waits in short slices: when a stop is requested
        (SIGTERM, in a stage that honours it) the call is abandoned at once, as in-process calls are,
        so a driver whose Ray cluster is going down with it (`scontrol requeue` signals every step
        at once) still flushes what it has and exits before Slurm's KillWait."""
        import time

        from .._util.stop import check

        deadline = time.monotonic() + self.ray_cfg.call_timeout_s
        done: list = []
        while refs and time.monotonic() < deadline:  # bounded by the deadline
            check()
            ready, refs = ray.wait(refs, num_returns=len(refs), timeout=min(0.5, max(0.0, deadline - time.monotonic())))
            done += ready
        return done, refs

    def _take(self, ray: Any, ref: Any, rep: Replica, idxs: list[int], results: dict[int, Any]) -> int:
        from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

        try:
            out = ray.get(ref, timeout=60)
        except ActorUnavailableError as e:
            if self.ray_cfg.max_restarts > 0:  # Ray is restarting it: keep it, re-send this work
                log.warning("replica %s unavailable, retrying its work elsewhere: %s", rep.name, _short(e))
                return len(idxs)
            self._drop(rep, _short(e), kill=True)
            return len(idxs)
        except (RayActorError, GetTimeoutError) as e:  # died for good, or unreadable
            self._drop(rep, _short(e), kill=isinstance(e, GetTimeoutError))
            return len(idxs)
        if len(out) != len(idxs):
            raise PoolError(f"replica {rep.name} returned {len(out)} results for {len(idxs)} items")
        results.update(zip(idxs, out))
        rep.records += count_records(out)
        return 0

    def _drop(self, rep: Replica, why: str, *, kill: bool) -> None:
        if rep.alive:
            self.counters["replica_failures"] += 1
            log.warning("replica %s on node %s out of the pool: %s", rep.name, where(rep.node), why)
        rep.alive, rep.error, rep.failed = False, why, True
        if kill:
            import ray

            try:
                ray.kill(rep.handle, no_restart=True)
            except Exception as e:
                log.debug("kill %s: %s", rep.name, e)

    def _live(self) -> list[Replica]:
        return [r for r in self.replicas if r.alive]

    def _errors(self) -> str:
        return "; ".join(f"{r.name}: {'alive' if r.alive else r.error or 'dead'}" for r in self.replicas) or "none"


def _short(e: BaseException, limit: int = 400) -> str:
    """One line for an error: Ray's first line (what died) and the traceback's last (why)."""
    lines = [ln.strip() for ln in re.sub(r"\x1b\[[0-9;]*m", "", str(e)).splitlines() if ln.strip()]
    text = f"{type(e).__name__}: " + (lines[0] if len(lines) < 2 else f"{lines[0][:200]} … {lines[-1]}") if lines else type(e).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"

