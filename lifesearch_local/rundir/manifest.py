"""manifest.json (versions, hashes, seeds, each stage's figures) and the resume guard that reads it."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import platform
import subprocess
import threading
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lifesearch_local import __version__
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.records import Manifest
from lifesearch_local.rundir.files import refuse_link, write_atomic
from lifesearch_local.rundir.jsonl import read_json_file, validation_field
from lifesearch_local.rundir.lock import hold
from serving import result_settings

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
# One process writes a run directory (its lock); its threads take turns on the manifest.
_WRITE = threading.Lock()


class ConfigChanged(LifesearchError):
    """A stage would resume with other settings than its records were made with."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def config_hash(cfg: BaseModel) -> str:
    """sha256 (16 hex) of a config's JSON: what the manifest records to tell two runs' settings apart."""
    return sha256_bytes(cfg.model_dump_json().encode())


def resume_config(cfg: BaseModel) -> dict[str, Any]:
    """A stage's config as the manifest records it for resume checks: without the settings
    marked as changing only where and how fast it runs (serving.affects)."""
    return result_settings(cfg)


def settings_hash(config: dict[str, Any]) -> str:
    """Hash of a stage's resume settings (`resume_config`): what the manifest keeps as
    `resume/<stage>` and what each record of the stage carries as its `settings`."""
    return _hash_obj(config)


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


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_sha(where: Path | None = None) -> str | None:
    """Commit of the source checkout (suffix `+dirty` for uncommitted changes), if any."""
    where = where or Path(__file__).resolve().parents[2]
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


def manifest_data(directory: Path) -> dict[str, Any] | None:
    """manifest.json of a run directory as written (a dict), or None if absent; a damaged one
    (malformed, nested deep, a huge number, not UTF-8, not an object) is one InputError naming
    file:line and `lifesearch repair`."""
    p = directory / MANIFEST
    if not p.exists():
        return None
    fix = _repair_hint(directory)
    try:
        data = read_json_file(p)
    except InputError as e:
        raise InputError(e.path, e.line, e.field, f"{e.message}; {fix}") from None
    if not isinstance(data, dict):
        raise InputError(str(p), None, None, f"expected a JSON object, got {type(data).__name__}; {fix}")
    return data


def read_manifest(directory: Path) -> Manifest | None:
    """manifest.json of a run directory, or None if absent; a damaged one is an InputError naming file:line."""
    data = manifest_data(directory)
    if data is None:
        return None
    try:
        return Manifest.model_validate(data)
    except ValidationError as e:
        field, msg = validation_field(e)
        raise InputError(str(directory / MANIFEST), None, field, f"{msg}; {_repair_hint(directory)}") from None


def _repair_hint(directory: Path) -> str:
    return f"`lifesearch repair {directory}` sets it aside (the next run writes a new one)"


def update_manifest(
    directory: Path,
    *,
    hashes: dict[str, str] | None = None,
    seeds: dict[str, int] | None = None,
    stage: tuple[str, dict[str, Any]] | None = None,
    configs: dict[str, Any] | None = None,
    **extra: Any,
) -> Manifest:
    """Create or merge into manifest.json (written atomically, holding the directory's lock)."""
    with hold(directory), _WRITE:
        refuse_link(directory / MANIFEST)  # before reading through it
        m = read_manifest(directory) or new_manifest()
        m.updated = _now()
        m.hashes.update(hashes or {})
        m.seeds.update(seeds or {})
        m.stage_configs.update(configs or {})
        if stage:
            m.stages.setdefault(stage[0], {}).update(stage[1])
        for k, v in extra.items():
            setattr(m, k, v)
        write_atomic(directory / MANIFEST, json.dumps(m.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
        return m


def check_record_settings(directory: Path, stage: str, found: dict[str | None, int], now: str, *,
                          force: bool = False) -> None:
    """Refuse (ConfigChanged) to add to records that carry another settings hash than `now`
    (`found`: hash -> records) unless `force`: the records' own word, which holds when the
    manifest was lost or set aside by `repair`. Hashes accepted by an earlier --force-config
    (kept in the manifest) pass. Records without a hash (None: an earlier version's, or
    imported) cannot say what they were made with: refused too, unless `force`."""
    unstamped = found.get(None, 0)
    if unstamped and not force:
        raise ConfigChanged(f"{directory}: {stage} has {unstamped} record(s) without a settings hash (made by an "
                            "earlier version of lifesearch, or imported); continue in a fresh directory, or pass "
                            "--force-config to add to them anyway")
    m = read_manifest(directory)
    accepted = set((m.stages.get(stage) or {}).get("settings_accepted") or []) if m else set()
    other = {h: n for h, n in found.items() if h is not None and h != now and h not in accepted}
    if not other:
        return
    what = ", ".join(f"{n} made with settings {h}" for h, n in sorted(other.items()))
    msg = f"{directory}: {stage} has records made with other settings ({what}; now {now}), as the records themselves say"
    if not force:
        raise ConfigChanged(f"{msg}; give the new config its own id, or pass --force-config to add to those records anyway")
    log.warning("warning: --force-config: %s; its records now mix them", msg)
    update_manifest(directory, stage=(stage, {"settings_accepted": sorted(accepted | other.keys() | {now})}))


def check_config(directory: Path, stage: str, config: dict[str, Any], *, resuming: bool, force: bool = False,
                 records_check: Callable[[], None] | None = None) -> None:
    """Refuse to add to a stage's records with other settings than they were made with
    (ConfigChanged naming both hashes and what differs) unless `force`; then record `config`.

    `resuming`: the stage already has records. `records_check()` runs after the manifest's
    comparison and before `config` is recorded: what the records themselves say (their settings
    hashes) when the manifest has nothing to say.
    """
    m = read_manifest(directory)
    recorded = m.stage_configs.get(stage) if m else None
    now = _hash_obj(config)
    changed, fix = "", "give the new config its own id"
    if resuming and recorded is not None and recorded != config:
        diffs = _differences(recorded, config)
        changed = f"hash {_hash_obj(recorded)}, now {now}: {'; '.join(diffs[:3])}{'; …' if len(diffs) > 3 else ''}"
        one_sided = _one_sided(recorded, config)
        if one_sided:  # a setting added or removed since: the records are another version's
            changed = (f"recorded by another version of lifesearch; settings only one version has: "
                       f"{', '.join(one_sided[:3])}{', …' if len(one_sided) > 3 else ''}")
            fix = "continue in a fresh directory"
    if changed and not force:
        raise ConfigChanged(f"{directory}: {stage} has records made with another config ({changed}); {fix}, "
                            "or pass --force-config to add to those records anyway")
    if records_check is not None:
        records_check()
    if changed:
        log.warning("warning: --force-config: %s in %s continues with another config (%s); its records now mix both",
                    stage, directory, changed)
    update_manifest(directory, configs={stage: config}, hashes={f"resume/{stage}": now},
                    stage=(stage, {"config_forced_over": changed}) if changed else None)


def _one_sided(old: Any, new: Any, where: str = "") -> list[str]:
    """The settings (dotted paths) that only one of two recorded configs has (model blocks of two
    backends have different settings by design: not counted)."""
    if not (isinstance(old, dict) and isinstance(new, dict)) or old.get("backend") != new.get("backend"):
        return []
    out = [f"{where}{k}" for k in sorted(old.keys() ^ new.keys(), key=str)]
    for k in sorted(old.keys() & new.keys(), key=str):
        out += _one_sided(old[k], new[k], f"{where}{k}.")
    return out
