"""Short calibrations on the configured engine, kept as profiles: how long it opens, closes and computes here.

A profile is what one engine (a model block, in-process or as a Ray pool of a given shape) measured on
this machine: opening it (model load, actor start), one small call, real prompts timed (choice scoring
in FLOP/s, generation per prefill and per decoding step), closing it. It is stored under the cache
directory by a key of the engine's settings, the Ray shape and the machine, so the next estimate (and a
run's own estimate at its start) reads it instead of loading the model again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from lifesearch_local.rundir.files import write_atomic
from serving import ChatRequest, ChoiceGroup, ChoiceRequest, Engine, ModelConfig, RayConfig

log = logging.getLogger(__name__)
PROFILE_VERSION = 1
# Timed repeats of the real choice prompts (their spread is the calibration's own noise): up to
# REPEATS while they take under REPEAT_S in all, so a slow model is timed once.
REPEATS = 3
REPEAT_S = 5.0
# Decoding steps timed per generation calibration (a step costs about the same at any length here).
GEN_STEPS = 16


class EngineProfile(BaseModel):
    """What one engine measured on this machine (one calibration)."""

    version: int = PROFILE_VERSION
    """Format of this record."""
    key: str
    """Hash of the engine settings, the Ray shape and the machine it was measured for."""
    model: str
    """The model block's `model`."""
    where: str
    """in-process, or the Ray pool's shape."""
    machine: dict[str, Any]
    """The machine it was measured on (CPU, cores, threads, GPUs, torch)."""
    measured_at: str
    """UTC time of the calibration."""
    load_average: list[float]
    """1/5/15-minute load averages when it started (timings on a loaded machine are slower)."""
    open_s: float
    """Seconds to open the engine: model load, or actor start and load on every replica."""
    close_s: float
    """Seconds to close it (actors killed, memory released)."""
    warm_s: float
    """Seconds of the first, tiny call (one-time kernel and thread start-up)."""
    call_s: float
    """Seconds of the same tiny call once warm: the per-call overhead (a Ray round trip included)."""
    choice_s: list[float] = Field(default_factory=list)
    """Seconds of each timed repeat of the real choice prompts (empty: not calibrated)."""
    choice_flops: float = 0.0
    """FLOPs of those prompts (0: the model's shape is unknown; then `choice_tokens` is the unit)."""
    choice_tokens: int = 0
    """Tokens they compute."""
    prefill_s: float | None = None
    """Seconds of a generation call with one output token (the prefill of `gen_rows` real prompts)."""
    prefill_tokens: int | None = None
    """Prompt tokens of that call."""
    step_s: float | None = None
    """Seconds per further decoding step of that batch."""
    gen_rows: int | None = None
    """Requests in the generation calls."""

    def choice_rate(self, fast: bool | None = None) -> float | None:
        """FLOPs (or tokens) per second of choice scoring: at the median repeat, or its fastest
        (`fast=True`) or slowest (`fast=False`) one; None if not calibrated."""
        if not self.choice_s:
            return None
        runs = sorted(max(1e-6, s - self.call_s) for s in self.choice_s)
        s = runs[0] if fast else runs[-1] if fast is False else runs[len(runs) // 2]
        return (self.choice_flops or self.choice_tokens) / s


class SessionProfile(BaseModel):
    """What a command pays around its phases on this machine: interpreter start, Ray up and down."""

    version: int = PROFILE_VERSION
    """Format of this record."""
    key: str
    """Hash of the Ray settings and the machine."""
    measured_at: str
    """UTC time of the calibration."""
    load_average: list[float]
    """Load averages when it started."""
    startup_s: float
    """Seconds a fresh interpreter takes to import what a run imports (torch, transformers, Ray if used)."""
    ray_start_s: float = 0.0
    """Seconds to start (or join) the Ray cluster (0 without Ray)."""
    ray_stop_s: float = 0.0
    """Seconds to shut it down."""


def cache_dir() -> Path:
    """Where profiles live: <LIFESEARCH_CACHE or ~/.cache/lifesearch-local>/profiles."""
    from serving import cache_root

    return cache_root() / "profiles"


def machine() -> dict[str, Any]:
    """What makes timings on this machine comparable: CPU model, usable cores, torch threads, GPUs."""
    import torch

    cpu = platform.processor() or platform.machine()
    with suppress(OSError, StopIteration):
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {"cpu": cpu, "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "threads": torch.get_num_threads(), "gpus": gpus, "torch": torch.__version__}


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def ray_shape(ray: RayConfig | None) -> dict[str, Any] | None:
    """The Ray settings that change timings (not the namespace, timeouts or retries)."""
    if ray is None:
        return None
    return ray.model_dump(include={"address", "replicas", "num_cpus_per_replica", "num_gpus_per_replica", "num_cpus",
                                   "num_gpus", "object_store_memory_mb", "runtime_env", "env_vars"})


def engine_key(model: ModelConfig, ray: RayConfig | None, where: dict[str, Any]) -> str:
    """The profile key of an engine: every model setting, the Ray shape, the machine."""
    return _hash({"v": PROFILE_VERSION, "model": model.model_dump(mode="json"),
                  "ray": ray_shape(None if model.backend == "openai" else ray), "machine": where})


def session_key(ray: RayConfig | None, where: dict[str, Any]) -> str:
    return _hash({"v": PROFILE_VERSION, "session": ray_shape(ray), "machine": where})


def profile_path(key: str) -> Path:
    """Where the profile of `key` lives (named in an estimate's basis)."""
    return cache_dir() / f"{key}.json"


def load_profile(kind: type[BaseModel], key: str) -> Any:
    """A stored profile, or None (missing, or written by another version)."""
    p = profile_path(key)
    try:
        prof = kind.model_validate_json(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return prof if getattr(prof, "version", None) == PROFILE_VERSION else None


def save_profile(prof: BaseModel) -> Path:
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{prof.key}.json"  # type: ignore[attr-defined]
    write_atomic(p, prof.model_dump_json(indent=2) + "\n")  # the one writer: no link followed, a full disk in one line
    return p


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


@dataclass
class ChoiceSample:
    """Real choice prompts to time (the first pending report's first rubrics) and their work."""

    group: ChoiceGroup
    choices: tuple[str, ...]
    flops: float
    tokens: int


@dataclass
class GenerateSample:
    """Real chat requests to time (the first agent calls of a wave) and their prompt tokens."""

    requests: list[ChatRequest]
    prompt_tokens: int


_PROBE = ChoiceGroup(key="calibrate", requests=[ChoiceRequest(messages=[{"role": "user", "content": "Is this a test?"}],
                                                              prefill='{"satisfied": ')])


def _probe(engine: Engine, generate: bool) -> None:
    """The smallest real call of the verb the phase uses."""
    if generate:
        engine.generate([ChatRequest(messages=[{"role": "user", "content": "Hello"}], max_tokens=1)])
    else:
        engine.score_choices([_PROBE], ("true", "false"))


def calibrate_engine(model: ModelConfig, ray: RayConfig | None, *, phase: str, choice: ChoiceSample | None = None,
                     generate: GenerateSample | None = None) -> EngineProfile:
    """Open the engine as a run's phase opens it (in-process, or a Ray pool inside the current session),
    time a tiny call twice, the real prompts, then its closing; the profile is saved and returned."""
    from lifesearch_local.runtime.skeleton import default_open

    where, load = machine(), _load()
    log.info("calibrating %s (%s) on this machine: load average %s", model.model, phase, load)
    t0 = time.perf_counter()
    cm = default_open(model, ray, f"calibrate/{phase}")
    engine = cm.__enter__()
    open_s = time.perf_counter() - t0
    try:
        warm_s, _ = _timed(lambda: _probe(engine, choice is None))
        call_s = min(_timed(lambda: _probe(engine, choice is None))[0] for _ in range(2))
        choice_s = _repeat(lambda: engine.score_choices([choice.group], choice.choices)) if choice else []
        gen = _calibrate_generate(engine, generate) if generate else {}
    finally:
        t1 = time.perf_counter()
        cm.__exit__(None, None, None)
        close_s = time.perf_counter() - t1
    prof = EngineProfile(key=engine_key(model, ray, where), model=model.model, where=_where(model, ray), machine=where,
                         measured_at=_now(), load_average=load, open_s=round(open_s, 3), close_s=round(close_s, 3),
                         warm_s=round(warm_s, 4), call_s=round(call_s, 4), choice_s=[round(s, 4) for s in choice_s],
                         choice_flops=choice.flops if choice else 0.0, choice_tokens=choice.tokens if choice else 0, **gen)
    save_profile(prof)
    return prof


def _repeat(fn: Callable[[], Any]) -> list[float]:
    out: list[float] = []
    while len(out) < REPEATS and sum(out) < REPEAT_S:
        out.append(_timed(fn)[0])
    return out


def _calibrate_generate(engine: Engine, sample: GenerateSample) -> dict[str, Any]:
    """A batch of real first requests with one output token (the prefill), then with GEN_STEPS more."""
    one = [r.model_copy(update={"max_tokens": 1}) for r in sample.requests]
    more = [r.model_copy(update={"max_tokens": GEN_STEPS + 1}) for r in sample.requests]
    t1, _ = _timed(lambda: engine.generate(one))
    tk, gens = _timed(lambda: engine.generate(more))
    steps = max((g.output_tokens for g in gens), default=1) - 1
    return {"prefill_s": round(t1, 4), "prefill_tokens": sample.prompt_tokens,
            "step_s": round(max(0.0, tk - t1) / steps, 5) if steps > 0 else 0.0, "gen_rows": len(sample.requests)}


def _where(model: ModelConfig, ray: RayConfig | None) -> str:
    if ray is None or model.backend == "openai":
        return "in-process" if model.backend != "openai" else "endpoint"
    return f"Ray pool: {ray.replicas} replica(s) × {ray.num_cpus_per_replica:g} CPU"


@contextmanager
def session_calibration(ray: RayConfig | None) -> Iterator[SessionProfile]:
    """Time a fresh interpreter's imports and Ray's start; engines calibrated inside run in that session;
    Ray's shutdown is timed on exit and the profile saved."""
    from serving import connect, ray_session

    where, load = machine(), _load()
    mods = "import torch, transformers" + (", ray" if ray else "")
    startup_s, _ = _timed(lambda: subprocess.run([sys.executable, "-c", mods], check=True, capture_output=True))
    prof = SessionProfile(key=session_key(ray, where), measured_at=_now(), load_average=load, startup_s=round(startup_s, 3))
    with ray_session(ray) if ray else nullcontext():
        if ray:
            t, started = _timed(lambda: connect(ray))
            prof.ray_start_s = round(t, 3) if started else 0.0
        yield prof
        if ray:
            import ray as ray_mod

            t, _ = _timed(ray_mod.shutdown)
            prof.ray_stop_s = round(t, 3)
    save_profile(prof)
