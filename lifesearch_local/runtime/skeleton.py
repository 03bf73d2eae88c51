"""The one stage skeleton: run-directory lock, settings check, SIGTERM, a lazily opened engine, the manifest."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import NODE_KEYS, settings_hash
from lifesearch_local.runtime.signals import StopFlag, graceful_stop
from serving import (
    ChatRequest,
    ChoiceGroup,
    ChoiceResult,
    Engine,
    EngineInfo,
    Generation,
    ModelConfig,
    RayConfig,
    honoured,
)

# (model, ray) -> a context manager yielding the engine: serving.hosting.host_engine, or a test's fake
OpenModel = Callable[[ModelConfig, "RayConfig | None"], AbstractContextManager[Engine]]


class LazyEngine(Engine):
    """The stage's engine, opened on first use: a stage with nothing left to do loads no model.

    `open()` loads it now (the agent stage does, in the main thread, before its workers start).
    After the stage, `stats()`, `model_hash()` and `identity()` still answer from what the engine
    reported; the engine itself is dropped so that its memory can be freed. `on_open(engine)` runs
    once the engine is loaded, before its first use: it may refuse it (raise).
    """

    def __init__(self, opener: Callable[[], Engine], on_open: Callable[[Engine], None] | None = None):
        self._opener = opener
        self._on_open = on_open
        self._inner: Engine | None = None
        self._hash: str | None = None
        self._identity: EngineInfo | None = None
        self._stats: dict[str, Any] = {}
        self.open_s: float | None = None
        """Seconds the engine took to open (model load, engine start-up); None until it is opened."""

    def open(self) -> Engine:
        if self._inner is None:
            t0 = time.perf_counter()
            inner = self._opener()
            self._hash, self._identity = inner.model_hash(), inner.identity()
            self.open_s = round(time.perf_counter() - t0, 3)
            if self._on_open is not None:
                self._on_open(inner)
            self._inner = inner
        return self._inner

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        return self.open().generate(requests)

    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        return self.open().score_choices(groups, choices)

    def iter_score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]):
        return self.open().iter_score_choices(groups, choices)

    def model_hash(self) -> str | None:
        return self._hash

    def identity(self) -> EngineInfo | None:  # type: ignore[override]
        """What the engine said of itself when it opened; None while it has not been opened."""
        return self._identity

    def stats(self) -> dict[str, Any]:
        return self._inner.stats() if self._inner is not None else dict(self._stats)

    def release(self) -> None:
        """Keep the closed engine's counters, drop the engine."""
        if self._inner is not None:
            self._stats = self._inner.stats()
            self._inner = None


@dataclass
class Stage:
    """One stage invocation in a locked run directory (see `open_stage`)."""

    rd: RunDir
    name: str
    """Manifest key of the stage, e.g. `judge/<id>`, `curate`."""
    stop: StopFlag
    engine: LazyEngine
    models: contextlib.ExitStack
    recorded: Any = None
    """What `open_stage` read of the stage's records under the lock (its `recorded()`)."""
    stamp: str = ""
    """The hash of the stage's settings (`settings_hash`): what each record it adds carries as its `settings`."""
    t0: float = field(default_factory=time.perf_counter)

    def close_engine(self) -> None:
        """Close the engine now (a Ray pool gathers its replicas' counters as it closes)."""
        self.models.close()
        self.engine.release()

    def wall(self) -> float:
        return round(time.perf_counter() - self.t0, 3)

    def record(self, stats: dict[str, Any], *, hashes: dict[str, str], seeds: dict[str, int], model_key: str,
               **extra: Any) -> None:
        """The stage's stats, config/prompt hashes, seeds and (if a model was loaded) its hash, in the manifest.
        A Ray pool's counters, gathered from its replicas on close, go under `engine`; the nodes that
        did its work (`nodes`) and the replicas it lost (`replicas_lost`) beside the stage's figures."""
        digest = self.engine.model_hash()
        engine = self.engine.stats()
        if engine.get("ray_replicas"):  # where the work ran goes beside the stage's figures, merged over reruns
            stats = {**stats, "engine": {k: v for k, v in engine.items() if k not in NODE_KEYS},
                     **{k: engine[k] for k in NODE_KEYS if k in engine}}
        self.rd.update_manifest(hashes={**hashes, **({f"model/{model_key}": digest} if digest else {})},
                                seeds=seeds, stage=(self.name, stats), **extra)


@contextlib.contextmanager
def open_stage(rd: RunDir, name: str, *, command: str, settings: dict[str, Any], recorded: Callable[[], Any],
               resuming: Callable[[Any], bool], force: bool, model: ModelConfig, ray: RayConfig | None = None,
               engine: Engine | None = None, open_model: OpenModel | None = None,
               honour_stop: bool = True, stamps: Callable[[Any], dict[str | None, int]] | None = None,
               check: Callable[[Any], None] | None = None,
               on_open: Callable[[Engine], None] | None = None) -> Iterator[Stage]:
    """Lock the run directory (as `command`), refuse records made under other `settings` unless
    `force` (`recorded()` is read once, under the lock, and kept as `stage.recorded`;
    `resuming(recorded)`: this stage has records already), turn SIGTERM into the stage's stop
    flag (and, with `honour_stop`, into `Stopped` inside long model calls), and give a lazily opened engine: `engine` if given, else
    `open_model(model, ray)` (default: in-process, or Ray actors with `ray`), closed when the
    block ends. `stamps(recorded())` counts the settings hashes the records carry: records made with other
    settings than these are refused too (what the records themselves say, when the manifest is lost), and
    each record the stage adds carries `stage.stamp`. `check(recorded())` may then refuse on its own grounds;
    `on_open(engine)` may refuse the engine once it is loaded, before its first call (what only
    the loaded engine can say: the judge's fingerprint). Record the stage inside the block:
    `stage.close_engine()`, then `stage.record(...)`."""
    models = contextlib.ExitStack()  # what the engine holds: closed when the block ends (or by `close_engine`)

    def opener() -> Engine:
        if engine is not None:
            return engine
        return models.enter_context(open_model(model, ray) if open_model else default_open(model, ray, name))

    stamp = settings_hash(settings)

    def check_records(records: Any) -> None:
        if stamps is not None:
            rd.check_record_settings(name, stamps(records), stamp, force=force)
        if check is not None:
            check(records)

    with rd.locked(command):
        records = recorded()
        rd.check_config(name, settings, resuming=resuming(records), force=force,
                        records_check=lambda: check_records(records))
        with graceful_stop() as stop, (honoured(stop.event) if honour_stop else contextlib.nullcontext()):
            with models:
                stage = Stage(rd, name, stop, LazyEngine(opener, on_open), models, records, stamp)
                yield stage
            stage.engine.release()


def default_open(model: ModelConfig, ray: RayConfig | None, name: str) -> AbstractContextManager[Engine]:
    """The stage `name`'s model as serving hosts it: in-process, or Ray actors with `ray`."""
    from lifesearch_local.llm.models import engine_config
    from serving import host_engine

    return host_engine(engine_config(model), ray, phase=name.replace("/", "-"))
