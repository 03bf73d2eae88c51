"""Run directories: line-atomic JSONL stages, resume by key, and the manifest."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import threading
from collections.abc import Callable, Hashable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from . import __version__
from .jsonl import append_lines, read_records
from .records import Manifest

M = TypeVar("M", bound=BaseModel)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def config_hash(cfg: BaseModel) -> str:
    """sha256 (16 hex) of a config's JSON: what the manifest records to tell two runs' settings apart."""
    return sha256_bytes(cfg.model_dump_json().encode())


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


class RunDir:
    """A run directory. Stages append records and skip keys already present."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def file(self, name: str) -> Path:
        return self.path / name

    def load(self, name: str, model: type[M]) -> list[M]:
        """Records of a stage file (empty if absent); a torn last line from a kill is dropped."""
        p = self.file(name)
        if not p.exists():
            return []
        return read_records(p, model, repair_tail=True)

    def done_keys(self, name: str, model: type[M], key: Callable[[M], Hashable]) -> set[Hashable]:
        """Keys of the records a stage already wrote: the stage skips these on resume."""
        return {key(r) for r in self.load(name, model)}

    def append(self, name: str, records: Iterable[BaseModel]) -> None:
        """Append records as whole lines; safe from several threads of one process."""
        batch = list(records)
        with self._lock:
            append_lines(self.file(name), batch)

    # -- manifest ---------------------------------------------------------------------
    def manifest(self) -> Manifest | None:
        p = self.file("manifest.json")
        return Manifest.model_validate_json(p.read_text()) if p.exists() else None

    def update_manifest(
        self,
        *,
        hashes: dict[str, str] | None = None,
        seeds: dict[str, int] | None = None,
        stage: tuple[str, dict[str, Any]] | None = None,
        **extra: Any,
    ) -> Manifest:
        """Create or merge into manifest.json (written atomically)."""
        with self._lock:
            m = self.manifest() or new_manifest()
            m.updated = _now()
            m.hashes.update(hashes or {})
            m.seeds.update(seeds or {})
            if stage:
                m.stages.setdefault(stage[0], {}).update(stage[1])
            for k, v in extra.items():
                setattr(m, k, v)
            tmp = self.file("manifest.json.tmp")
            tmp.write_text(json.dumps(m.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
            os.replace(tmp, self.file("manifest.json"))
            return m


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
