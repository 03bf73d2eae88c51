"""Repair a run directory: keep every valid line of its JSONL stages, set bad lines and duplicates aside."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lifesearch_local.errors import InputError
from lifesearch_local.rundir.directory import (
    CURATION,
    JUDGMENTS,
    LABELS,
    MANIFEST,
    REPORTEVAL,
    REPORTS,
    TRAJECTORIES,
    RunDir,
)
from lifesearch_local.rundir.jsonl import append_lines, parse_json, validation_field, write_atomic


@dataclass
class Dropped:
    """One line that repair took out of a file."""

    line: int
    why: str
    raw: bytes


@dataclass
class FileRepair:
    """What repair found in one file."""

    name: str
    kept: int = 0
    dropped: list[Dropped] = field(default_factory=list)
    set_aside: str | None = None


def stage_models() -> dict[str, tuple[type[BaseModel], Callable[[Any], Hashable]]]:
    """The stage files whose records repair validates and de-duplicates, with each record's key."""
    from lifesearch_local.curate.records import CurationRecord
    from lifesearch_local.records import Judgment, Label, Report
    from lifesearch_local.reporteval.records import ReportEvaluation

    return {
        REPORTS: (Report, lambda r: r.key),
        JUDGMENTS: (Judgment, lambda r: r.key),
        REPORTEVAL: (ReportEvaluation, lambda r: r.key),
        CURATION: (CurationRecord, lambda r: r.id),
        LABELS: (Label, lambda r: (r.key, r.source)),
    }


def check_line(raw: bytes, model: type[BaseModel] | None) -> tuple[Any, str | None]:
    """(parsed record or object, None) for a valid line, else (None, why it is not)."""
    try:
        obj = parse_json(raw, "", None)
    except InputError as e:
        return None, f"{e.field}: {e.message}" if e.field else e.message
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    if model is None:
        return obj, None
    try:
        return model.model_validate(obj), None
    except ValidationError as e:
        where, msg = validation_field(e)
        return None, f"{where}: {msg}"


def repair_file(path: Path, model: type[BaseModel] | None, key: Callable[[Any], Hashable] | None,
                *, dry_run: bool = False) -> FileRepair:
    """Keep every valid line of `path` (the first record of each key, as a resume does), drop
    the rest; the file is rewritten atomically and dropped lines appended to `<name>.dropped`."""
    out = FileRepair(path.name)
    keep: list[bytes] = []
    first: dict[Hashable, tuple[int, bytes]] = {}
    data = path.read_bytes()
    unterminated = data.count(b"\n") + 1  # the line after the last newline, if any
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        rec, why = check_line(raw, model)
        if why is not None and lineno == unterminated:
            why = f"torn last line, a write cut by a kill: {why}"
        if why is None and key is not None:
            k = key(rec)
            if k in first:
                same = json.loads(first[k][1]) == json.loads(raw)
                why = f"duplicate of line {first[k][0]} ({'identical' if same else 'conflicting'})"
            else:
                first[k] = (lineno, raw)
        if why is None:
            keep.append(raw)
        else:
            out.dropped.append(Dropped(lineno, why, raw))
    out.kept = len(keep)
    if out.dropped and not dry_run:
        side = path.with_name(path.name + ".dropped")
        append_lines(side, [{"line": d.line, "why": d.why, "raw": d.raw.decode("utf-8", "replace")}
                            for d in out.dropped])
        write_atomic(path, b"".join(line + b"\n" for line in keep))
    return out


def repair_manifest(rd: RunDir, *, dry_run: bool = False) -> FileRepair | None:
    """A manifest.json that does not load is renamed aside (the next stage writes a new one)."""
    p = rd.file(MANIFEST)
    try:
        rd.manifest()
        return None
    except InputError as e:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        aside = p.with_name(f"{MANIFEST}.corrupt-{stamp}")
        if not dry_run:
            p.rename(aside)
        return FileRepair(MANIFEST, dropped=[Dropped(e.line or 0, e.message.split(";")[0], b"")],
                          set_aside=aside.name)


def repair_run_dir(path: str | Path, *, dry_run: bool = False) -> list[FileRepair]:
    """Repair every stage file, trajectory log and the manifest of a run directory, holding its lock."""
    rd = RunDir(path)
    models = stage_models()
    out: list[FileRepair] = []
    with rd.locked("repair"):
        for name, (model, key) in models.items():
            if rd.file(name).is_file():
                out.append(repair_file(rd.file(name), model, key, dry_run=dry_run))
        for traj in sorted(rd.file(TRAJECTORIES).glob("*.jsonl")):
            rep = repair_file(traj, None, None, dry_run=dry_run)
            rep.name = f"{TRAJECTORIES}/{traj.name}"
            out.append(rep)
        manifest = repair_manifest(rd, dry_run=dry_run)
        if manifest:
            out.append(manifest)
    return out
