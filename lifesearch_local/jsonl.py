"""JSONL reading with located errors, and line-atomic appends."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .errors import InputError

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def iter_json_lines(path: str | Path, *, repair_tail: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line.

    A last line without its newline is a write torn by a kill: with `repair_tail` it is
    cut off the file (the stage that wrote it will redo that record); otherwise it is an
    error like any malformed line.
    """
    path = Path(path)
    data = path.read_bytes()
    if repair_tail and data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)
        data = data[:cut]
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(str(path), lineno, None, f"malformed JSON ({e})") from None
        if not isinstance(obj, dict):
            raise InputError(str(path), lineno, None, f"expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def load_unique(path: str | Path, parse: Callable[[dict[str, Any], str, int], T], noun: str, plural: str) -> list[T]:
    """Every line of `path` through `parse(obj, path, line)`; ids (`.id`) must be unique and the file
    non-empty. Errors name file:line: field."""
    path = str(path)
    if not Path(path).is_file():
        raise InputError(path, None, None, "no such file")
    out: list[T] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_json_lines(path):
        item = parse(obj, path, lineno)
        key = item.id  # type: ignore[attr-defined]
        if key in seen:
            raise InputError(path, lineno, "id", f"duplicate {noun} id {key!r} (first on line {seen[key]})")
        seen[key] = lineno
        out.append(item)
    if not out:
        raise InputError(path, None, None, f"no {plural} in file")
    return out


def validation_field(err: ValidationError) -> tuple[str, str]:
    """The first failing field of a pydantic error as `a.b[2].c` and its message."""
    first = err.errors()[0]
    parts: list[str] = []
    for p in first["loc"]:
        if isinstance(p, int):
            parts[-1:] = [f"{parts[-1]}[{p}]" if parts else f"[{p}]"]
        else:
            parts.append(str(p))
    return ".".join(parts) or "(record)", first["msg"]


def numbered_records(path: str | Path, model: type[M], *, repair_tail: bool = False) -> Iterator[tuple[int, M]]:
    """(line number, record) for every line of a JSONL file parsed into `model`; the first bad
    line is an InputError naming file:line: field."""
    for lineno, obj in iter_json_lines(path, repair_tail=repair_tail):
        try:
            yield lineno, model.model_validate(obj)
        except ValidationError as e:
            field, msg = validation_field(e)
            raise InputError(str(path), lineno, field, msg) from None


def read_records(path: str | Path, model: type[M], *, repair_tail: bool = False) -> list[M]:
    """Parse every line of a JSONL file into `model`, failing on the first bad line."""
    return [rec for _, rec in numbered_records(path, model, repair_tail=repair_tail)]


def dumps(record: BaseModel | dict[str, Any]) -> str:
    obj = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def append_lines(path: str | Path, records: list[BaseModel] | list[dict[str, Any]]) -> None:
    """Append records with one write() on an O_APPEND descriptor, then fsync.

    One write per batch keeps concurrent appenders from interleaving within a line, and a
    kill leaves at worst a torn last line, which `iter_json_lines(repair_tail=True)` drops.
    """
    if not records:
        return
    payload = "".join(dumps(r) + "\n" for r in records).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(payload)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_records(path: str | Path, records: list[BaseModel] | list[dict[str, Any]]) -> None:
    """Write a whole JSONL file atomically (temp file + rename)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(dumps(r) + "\n" for r in records), encoding="utf-8")
    os.replace(tmp, path)
