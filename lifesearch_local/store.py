"""Run directories: one writer at a time (a lock), line-atomic JSONL stages, resume by key, the manifest."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from . import __version__
from .errors import InputError, LifesearchError
from .jsonl import append_lines, check_text, cut_torn_tail, read_records, validation_field
from .records import Manifest
from .runlock import _HELD, _HELD_GUARD, LOCK_FILE, RunDirBusy, _acquire, _default_command  # noqa: F401 (RunDirBusy: re-exported)

M = TypeVar("M", bound=BaseModel)

# The run directory's layout: every stage and command names its files through these.
MANIFEST = "manifest.json"
CONFIG = "config.yaml"
TASKS = "tasks.jsonl"
REPORTS = "reports.jsonl"
JUDGMENTS = "judgments.jsonl"
REPORTEVAL = "reporteval.jsonl"
REPORTEVAL_SUMMARY = "reporteval_summary.json"
CURATION = "curation.jsonl"
LABELS = "labels.jsonl"
SCORES = "scores.json"
AGREEMENT = "agreement.json"
TRAJECTORIES = "trajectories"
WEB_CACHE = "web_cache"
"""The web cache a run keeps inside its directory (`run`, `agent`, `reporteval` alike)."""
# Settings that change where or how fast a stage runs, never what it writes: a stage resumes
# across them (on a GPU after a CPU, with larger batches, with more judge repetitions).
EXECUTION_ONLY = frozenset({"runs", "groups_per_call", "concurrency", "batch", "batch_size"})
MODEL_EXECUTION_ONLY = frozenset({
    "device", "kernel", "generate_form", "token_budget", "tensor_parallel_size", "gpu_memory_utilization", "enable_prefix_caching",
    "enforce_eager", "base_url", "api_key_env", "timeout_s", "max_retries", "max_concurrency", "retry_base_delay_s",
})


class ConfigChanged(LifesearchError):
    """A stage would resume with other settings than its records were made with."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def config_hash(cfg: BaseModel) -> str:
    """sha256 (16 hex) of a config's JSON: what the manifest records to tell two runs' settings apart."""
    return sha256_bytes(cfg.model_dump_json().encode())


def resume_config(cfg: BaseModel) -> dict[str, Any]:
    """A stage's config as the manifest records it for resume checks: without the settings
    that only change where and how fast it runs (EXECUTION_ONLY, MODEL_EXECUTION_ONLY)."""
    data = {k: v for k, v in cfg.model_dump(mode="json").items() if k not in EXECUTION_ONLY}
    if isinstance(data.get("model"), dict):
        data["model"] = {k: v for k, v in data["model"].items() if k not in MODEL_EXECUTION_ONLY}
    return data


def _hash_obj(obj: Any) -> str:
    return sha256_bytes(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode())


def _differences(old: Any, new: Any, where: str = "") -> list[str]:
    """`path: old -> new` for every leaf that differs between two JSON values."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(old.keys() | new.keys(), key=str):
            out += _differences(old.get(k), new.get(k), f"{where}.{k}" if where else str(k))
        return out
    if old == new:
        return []

    def show(v: Any) -> str:
        text = json.dumps(v, ensure_ascii=False)
        return text if len(text) <= 40 else text[:39] + "…"

    return [f"{where or '(config)'} {show(old)} -> {show(new)}"]


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_sha(where: Path | None = None) -> str | None:
    """Commit of the source checkout (suffix `+dirty` for uncommitted changes), if any."""
    where = where or Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=where, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def make_dir(path: Path, what: str) -> None:
    """`path` as a directory (created with its parents); one-line LifesearchError when a file
    stands at it or above it, or it cannot be made."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise LifesearchError(f"{path}: is a file, not a directory; name a {what} (a new or an existing directory)") from None
    except NotADirectoryError:
        above = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
        raise LifesearchError(f"{path}: {above} is a file, so no {what} can be made under it") from None
    except OSError as e:
        raise LifesearchError(f"{path}: cannot make the {what}: {e.strerror or e}") from None


class RunDir:
    """A run directory. Stages append records and skip keys already present.

    Writing needs the directory's lock (`locked()`, taken for you by `append` and
    `update_manifest`): a second process gets RunDirBusy naming the holder's pid.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        make_dir(self.path, "run directory")
        self._lock = threading.Lock()

    def file(self, name: str) -> Path:
        return self.path / name

    # -- the lock -----------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, command: str | None = None) -> Iterator[RunDir]:
        """Hold the run directory for this process (reentrant); RunDirBusy if another process holds it."""
        key = self.path.resolve()
        with _HELD_GUARD:
            held = _HELD.get(key)
            if held is None:
                held = _HELD[key] = [_acquire(key / LOCK_FILE, command or _default_command()), 0]
            held[1] += 1
        try:
            yield self
        finally:
            with _HELD_GUARD:
                held[1] -= 1
                if not held[1]:
                    del _HELD[key]
                    os.close(held[0])  # releases the flock

    def holds_lock(self) -> bool:
        return self.path.resolve() in _HELD

    def clear(self) -> None:
        """Delete everything in the directory but its lock (`--fresh`), holding the lock."""
        with self.locked():
            for child in self.path.iterdir():
                if child.name == LOCK_FILE:
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()

    # -- records ------------------------------------------------------------------------
    def load(self, name: str, model: type[M]) -> list[M]:
        """Records of a stage file (empty if absent). A torn last line from a kill is dropped:
        cut off the file by the lock holder, only skipped by a reader (it may be mid-write)."""
        p = self.file(name)
        if not p.exists():
            return []
        owner = self.holds_lock()
        try:
            return read_records(p, model, repair_tail=owner, skip_tail=not owner)
        except InputError as e:
            raise InputError(e.path, e.line, e.field, f"{e.message}; `lifesearch repair {self.path}` keeps "
                             "the valid lines and reports what it drops") from None

    def done_keys(self, name: str, model: type[M], key: Callable[[M], Hashable]) -> set[Hashable]:
        """Keys of the records a stage already wrote: the stage skips these on resume."""
        return {key(r) for r in self.load(name, model)}

    def append(self, name: str, records: Iterable[BaseModel]) -> None:
        """Append records as whole lines, holding the lock; safe from several threads of one process.
        A torn last line left by a kill is cut first, so a record never continues it."""
        batch = list(records)
        if not batch:
            return
        with self.locked(), self._lock:
            cut_torn_tail(self.file(name))
            append_lines(self.file(name), batch)

    # -- manifest ---------------------------------------------------------------------
    def manifest(self) -> Manifest | None:
        """manifest.json, or None if absent; a damaged one is an InputError naming file:line."""
        p = self.file(MANIFEST)
        if not p.exists():
            return None
        fix = f"`lifesearch repair {self.path}` sets it aside (the next run writes a new one)"
        try:
            data = json.loads(p.read_bytes())
        except json.JSONDecodeError as e:
            raise InputError(str(p), e.lineno, None, f"malformed JSON ({e.msg}, column {e.colno}); {fix}") from None
        except UnicodeDecodeError as e:
            raise InputError(str(p), None, None, f"not UTF-8 ({e.reason}); {fix}") from None
        except RecursionError:
            raise InputError(str(p), None, None, f"JSON nested too deep to read; {fix}") from None
        except ValueError as e:  # an integer beyond Python's digit limit
            raise InputError(str(p), None, None, f"not a usable JSON value ({str(e).split(';')[0]}); {fix}") from None
        if not isinstance(data, dict):
            raise InputError(str(p), None, None, f"expected a JSON object, got {type(data).__name__}; {fix}")
        try:
            check_text(data, str(p), 0)
        except InputError as e:
            raise InputError(str(p), None, e.field, f"{e.message}; {fix}") from None
        try:
            return Manifest.model_validate(data)
        except ValidationError as e:
            field, msg = validation_field(e)
            raise InputError(str(p), None, field, f"{msg}; {fix}") from None

    def update_manifest(
        self,
        *,
        hashes: dict[str, str] | None = None,
        seeds: dict[str, int] | None = None,
        stage: tuple[str, dict[str, Any]] | None = None,
        configs: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Manifest:
        """Create or merge into manifest.json (written atomically, holding the lock)."""
        with self.locked(), self._lock:
            m = self.manifest() or new_manifest()
            m.updated = _now()
            m.hashes.update(hashes or {})
            m.seeds.update(seeds or {})
            m.stage_configs.update(configs or {})
            if stage:
                m.stages.setdefault(stage[0], {}).update(stage[1])
            for k, v in extra.items():
                setattr(m, k, v)
            tmp = self.file(MANIFEST + ".tmp")
            tmp.write_text(json.dumps(m.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
            os.replace(tmp, self.file(MANIFEST))
            return m

    def check_record_settings(self, stage: str, found: dict[str, int], now: str, *, force: bool = False) -> None:
        """Refuse (ConfigChanged) to add to records that carry another settings hash than `now`
        (`found`: hash -> records) unless `force`: the records' own word, which holds when the
        manifest was lost or set aside by `repair`. Hashes accepted by an earlier --force-config
        (kept in the manifest) pass."""
        m = self.manifest()
        accepted = set((m.stages.get(stage) or {}).get("settings_accepted") or []) if m else set()
        other = {h: n for h, n in found.items() if h != now and h not in accepted}
        if not other:
            return
        what = ", ".join(f"{n} made with settings {h}" for h, n in sorted(other.items()))
        msg = f"{self.path}: {stage} has records made with other settings ({what}; now {now}), as the records themselves say"
        if not force:
            raise ConfigChanged(f"{msg}; give the new config its own id, or pass --force-config to add to those records anyway")
        print(f"warning: --force-config: {msg}; its records now mix them", file=sys.stderr)
        self.update_manifest(stage=(stage, {"settings_accepted": sorted(accepted | other.keys() | {now})}))

    def check_config(self, stage: str, config: dict[str, Any], *, resuming: bool, force: bool = False,
                     legacy: tuple[str, str] | None = None, records_check: Callable[[], None] | None = None) -> None:
        """Refuse to add to a stage's records with other settings than they were made with
        (ConfigChanged naming both hashes and what differs) unless `force`; then record `config`.

        `resuming`: the stage already has records. `legacy`: (manifest hash key, full config
        hash) compared instead for a run written before the per-stage configs were recorded.
        `records_check()` runs after the manifest's comparison and before `config` is recorded:
        what the records themselves say (their settings hashes) when the manifest has nothing to say.
        """
        m = self.manifest()
        recorded = _without_foreign_model_fields(m.stage_configs.get(stage), config) if m else None
        now = _hash_obj(config)
        changed = ""
        if resuming and recorded is not None and recorded != config:
            diffs = _differences(recorded, config)
            changed = f"hash {_hash_obj(recorded)}, now {now}: {'; '.join(diffs[:3])}{'; …' if len(diffs) > 3 else ''}"
        elif resuming and recorded is None and m and legacy and m.hashes.get(legacy[0]) not in (None, legacy[1]):
            changed = f"hash {m.hashes[legacy[0]]}, now {legacy[1]}"
        if changed and not force:
            raise ConfigChanged(f"{self.path}: {stage} has records made with another config ({changed}); give the "
                                "new config its own id, or pass --force-config to add to those records anyway")
        if records_check is not None:
            records_check()
        if changed:
            print(f"warning: --force-config: {stage} in {self.path} continues with another config ({changed}); "
                  "its records now mix both", file=sys.stderr)
        self.update_manifest(configs={stage: config}, hashes={f"resume/{stage}": now},
                             stage=(stage, {"config_forced_over": changed}) if changed else None)


def settings_hash(config: dict[str, Any]) -> str:
    """Hash of a stage's resume settings (`resume_config`): what the manifest keeps as
    `resume/<stage>` and what each record of the stage carries as its `settings`."""
    return _hash_obj(config)


def _without_foreign_model_fields(old: Any, new: Any) -> Any:
    """`old` without the model-block fields `new`'s backend does not have: a stage recorded when one
    flat model block held every backend's fields (at their defaults) resumes under the same settings."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return old
    out = {}
    for k, v in old.items():
        if k == "model" and isinstance(v, dict) and isinstance(new.get(k), dict):
            out[k] = {f: x for f, x in v.items() if f in new[k]}
        else:
            out[k] = _without_foreign_model_fields(v, new.get(k))
    return out


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
            # Under the run directory's lock: another process may have created it meanwhile and be using it.
            with contextlib.suppress(RunDirBusy), RunDir(p).locked():
                shutil.rmtree(p, ignore_errors=True)
        raise


@contextlib.contextmanager
def open_run(path: str | Path, command: str, *, inputs: dict[str, str | Path | None] | None = None,
             keep: Iterable[str] = ()) -> Iterator[RunDir]:
    """The one way a command opens a run directory: created (a file in the way is a one-line
    error), locked for the whole command as `command`, the sha256 of each input file recorded in
    the manifest under its name; removed again if this command created it and failed before
    writing any of `keep`. The stages it runs then check and record themselves (`stage.open_stage`)."""
    with new_dir_or_nothing(path, keep=keep):
        rd = RunDir(path)
        with rd.locked(command):
            given = {name: Path(f) for name, f in (inputs or {}).items() if f is not None}
            if given:  # the absolute paths let `lifesearch report` find inputs outside the directory
                rd.update_manifest(hashes={name: sha256_file(f) for name, f in given.items()},
                                   inputs={name: str(f.resolve()) for name, f in given.items()})
            yield rd


def new_manifest() -> Manifest:
    now = _now()
    return Manifest(
        package_version=__version__,
        git_sha=git_sha(),
        python=platform.python_version(),
        torch=_version("torch"),
        transformers=_version("transformers"),
        vllm=_version("vllm"),
        created=now,
        updated=now,
    )
