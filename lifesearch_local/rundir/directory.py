"""The run directory: its file names, `RunDir` (lock, line-atomic JSONL stages, resume by key), `open_run`."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.records import Manifest
from lifesearch_local.rundir import manifest as _manifest
from lifesearch_local.rundir.files import disk_full, is_disk_full, refuse_link
from lifesearch_local.rundir.jsonl import append_lines, cut_torn_tail, read_records
from lifesearch_local.rundir.lock import LOCK_FILE, RunDirBusy, hold, is_held
from lifesearch_local.rundir.manifest import MANIFEST, sha256_file

M = TypeVar("M", bound=BaseModel)

# The run directory's layout: every stage and command names its files through these.
__all__ = ["MANIFEST", "CONFIG", "TASKS", "REPORTS", "JUDGMENTS", "REPORTEVAL", "REPORTEVAL_SUMMARY", "CURATION",
           "LABELS", "SCORES", "AGREEMENT", "TRAJECTORIES", "WEB_CACHE", "RunDir", "make_dir", "new_dir_or_nothing",
           "open_run", "recorded_input"]
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
        if is_disk_full(e):
            raise disk_full(path) from None
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
        with hold(self.path, command):
            yield self

    def holds_lock(self) -> bool:
        return is_held(self.path)

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
        owner = self.holds_lock()
        if owner:  # the writer's own file: a link planted there is refused before anything is read or cut
            refuse_link(p)
        if not p.exists():
            return []
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

    # -- manifest and resume guard (rundir/manifest.py) ---------------------------------
    def manifest(self) -> Manifest | None:
        """manifest.json, or None if absent; a damaged one is an InputError naming file:line."""
        return _manifest.read_manifest(self.path)

    def update_manifest(self, **fields: Any) -> Manifest:
        """Create or merge into manifest.json (`manifest.update_manifest`), holding the lock."""
        return _manifest.update_manifest(self.path, **fields)

    def check_record_settings(self, stage: str, found: dict[str | None, int], now: str, *, force: bool = False) -> None:
        """The records' own settings hashes against `now` (`manifest.check_record_settings`)."""
        _manifest.check_record_settings(self.path, stage, found, now, force=force)

    def check_config(self, stage: str, config: dict[str, Any], **kwargs: Any) -> None:
        """The stage's settings against those its records were made with (`manifest.check_config`)."""
        _manifest.check_config(self.path, stage, config, **kwargs)


def recorded_input(run_dir: Path, name: str, manifest: dict[str, Any] | None, *, why: str) -> Path | None:
    """A run's input file `name` (a stem: tasks, reports, labels): RUN_DIR/<name>.jsonl, else the path
    its manifest records (`inputs.<name>`, written by `open_run`), refused when that file changed since
    (its recorded hash; `why` ends the refusal: what using it anyway would mean); None when neither is at hand."""
    if (run_dir / f"{name}.jsonl").is_file():
        return run_dir / f"{name}.jsonl"
    recorded = ((manifest or {}).get("inputs") or {}).get(name)
    if not recorded or not Path(recorded).is_file():
        return None
    want = ((manifest or {}).get("hashes") or {}).get(name)
    if want and sha256_file(recorded) != want:
        raise LifesearchError(f"{recorded}: changed since {run_dir} was made from it (manifest hash {want}); {why}")
    return Path(recorded)


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
    writing any of `keep`. The stages it runs then check and record themselves (`runtime.skeleton.open_stage`)."""
    with new_dir_or_nothing(path, keep=keep):
        rd = RunDir(path)
        with rd.locked(command):
            given = {name: Path(f) for name, f in (inputs or {}).items() if f is not None}
            if given:  # the absolute paths let `lifesearch report` find inputs outside the directory
                rd.update_manifest(hashes={name: sha256_file(f) for name, f in given.items()},
                                   inputs={name: str(f.resolve()) for name, f in given.items()})
            yield rd
