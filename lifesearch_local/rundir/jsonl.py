"""JSONL reading with located errors, and line-atomic appends."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from lifesearch_local.errors import InputError
from lifesearch_local.rundir.files import append_bytes, cut_to, open_plain, write_atomic
from serving import JSONError, loads, redact_obj

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def iter_json_lines(
    path: str | Path, *, repair_tail: bool = False, skip_tail: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line.

    A last line without its newline is a write torn by a kill (or one still being written):
    with `repair_tail` it is cut off the file (the stage that wrote it will redo that record),
    with `skip_tail` it is only left unread (what a reader that does not own the file does);
    otherwise it is an error like any malformed line.
    """
    path = Path(path)
    require_file(path)
    data = path.read_bytes()
    if (repair_tail or skip_tail) and data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        if repair_tail:
            cut_to(path, cut)
        data = data[:cut]
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        obj = parse_json(raw, str(path), lineno)
        if not isinstance(obj, dict):
            raise InputError(str(path), lineno, None, f"expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def parse_json(raw: bytes | str, path: str, lineno: int | None) -> Any:
    """One JSON text through the one strict reader (serving/_util/jsonread.py): malformed JSON, bytes
    that are not UTF-8, duplicate keys, NaN/Infinity, integers beyond Python's digit limit, deep
    nesting and lone surrogates are InputErrors naming path:line (and the field), never tracebacks
    (every reader of a user's or a run directory's file goes through here)."""
    try:
        return loads(raw)
    except JSONError as e:
        raise InputError(path, e.line if lineno is None else lineno, e.field, e.message) from None


MAX_JSON_FILE_BYTES = 64 << 20  # a manifest or summary is kilobytes; this only stops a runaway read


def read_json_file(path: str | Path, max_bytes: int = MAX_JSON_FILE_BYTES) -> Any:
    """A whole-file JSON text (manifest.json, a summary, import.json) through `parse_json`; a file
    longer than `max_bytes` is an InputError too, read no further."""
    with open(path, "rb") as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise InputError(str(path), None, None, f"larger than {max_bytes >> 20} MiB: not a file this tool wrote")
    return parse_json(raw, str(path), None)


def load_unique(path: str | Path, parse: Callable[[dict[str, Any], str, int], T], noun: str, plural: str) -> list[T]:
    """Every line of `path` through `parse(obj, path, line)`; ids (`.id`) must be unique and the file
    non-empty. Errors name file:line: field."""
    path = str(path)
    require_file(path)
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


_BACKEND_TAGS = ("hf", "vllm", "openai")


def validation_field(err: ValidationError, model: type[BaseModel] | None = None) -> tuple[str, str]:
    """The first failing field of a pydantic error as `a.b[2].c` and its message; with the `model`
    that was validated, an unknown key gets the closest known one (`did you mean 'max_iterations'?`)."""
    first = err.errors()[0]
    parts: list[str] = []
    msg, backend = first["msg"], None
    for p in first["loc"]:
        if isinstance(p, int):
            parts[-1:] = [f"{parts[-1]}[{p}]" if parts else f"[{p}]"]
        elif p in _BACKEND_TAGS and parts and parts[-1] == "model":
            backend = p  # the model block's union tag: say it in the message, not as a key
        else:
            parts.append(str(p))
    if backend and first["type"] == "extra_forbidden":
        msg += f" (not a setting of backend {backend})"
    if model is not None and first["type"] == "extra_forbidden" and first["loc"]:
        msg += close_key(str(first["loc"][-1]), known_keys(model, first["loc"][:-1]))
    return ".".join(parts) or "(record)", msg.removeprefix("Value error, ")


def close_key(key: str, known: list[str]) -> str:
    """`; did you mean 'x'?` naming the known key closest to a misspelt one, or ''."""
    import difflib

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.7)
    return f"; did you mean {close[0]!r}?" if close else ""


def known_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names allowed at `loc` (a pydantic error's location, less its last key) inside `model`,
    following nested models, lists, dicts, optionals and tagged unions (the model block's `hf`)."""
    cands = _flatten(model)
    for part in loc:
        cands = [c for tp, tag in cands for c in _step(tp, tag, part)]
    return sorted({name for tp, _ in cands if _is_model(tp) for name in tp.model_fields})


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _flatten(tp: Any, tag: str | None = None) -> list[tuple[Any, str | None]]:
    """(type, union tag) of every alternative of an annotation (Annotated and unions unwrapped)."""
    from typing import Annotated, Union, get_args, get_origin

    from pydantic import Tag

    origin = get_origin(tp)
    if origin is Annotated:
        base, *meta = get_args(tp)
        return _flatten(base, next((m.tag for m in meta if isinstance(m, Tag)), tag))
    if origin is Union or type(tp).__name__ == "UnionType":
        return [x for arg in get_args(tp) for x in _flatten(arg, tag)]
    return [(tp, tag)]


def _step(tp: Any, tag: str | None, part: int | str) -> list[tuple[Any, str | None]]:
    from collections.abc import Mapping, Sequence
    from typing import get_args, get_origin

    if tag is not None and part == tag:  # the location names the union member it was validated as
        return [(tp, None)]
    origin, args = get_origin(tp), get_args(tp)
    if _is_model(tp) and isinstance(part, str) and part in tp.model_fields:
        return _flatten(tp.model_fields[part].annotation)
    if isinstance(part, int) and origin in (list, tuple, set, frozenset, Sequence) and args:
        return _flatten(args[0])
    if isinstance(part, str) and origin in (dict, Mapping) and len(args) == 2:
        return _flatten(args[1])
    return []


def require_file(path: str | Path, kind: str = "JSONL") -> None:
    """An InputError unless `path` is a file: a directory is named as such (a common slip)."""
    p = Path(path)
    if p.is_dir():
        hint = ", ".join(sorted(f.name for f in p.glob(f"*.{kind.lower()}"))[:5])
        raise InputError(str(p), None, None, f"is a directory; pass a {kind} file"
                         + (f" (it holds {hint})" if hint else ""))
    if not p.is_file():
        raise InputError(str(p), None, None, "no such file")


def numbered_records(
    path: str | Path, model: type[M], *, repair_tail: bool = False, skip_tail: bool = False
) -> Iterator[tuple[int, M]]:
    """(line number, record) for every line of a JSONL file parsed into `model`; the first bad
    line is an InputError naming file:line: field."""
    for lineno, obj in iter_json_lines(path, repair_tail=repair_tail, skip_tail=skip_tail):
        try:
            yield lineno, model.model_validate(obj)
        except ValidationError as e:
            field, msg = validation_field(e, model)
            raise InputError(str(path), lineno, field, msg) from None


def read_records(path: str | Path, model: type[M], *, repair_tail: bool = False, skip_tail: bool = False) -> list[M]:
    """Parse every line of a JSONL file into `model`, failing on the first bad line."""
    return [rec for _, rec in numbered_records(path, model, repair_tail=repair_tail, skip_tail=skip_tail)]


def dumps(record: BaseModel | dict[str, Any]) -> str:
    """One JSON line; configured secrets in any string of it are redacted (every record and log
    line written goes through here)."""
    obj = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
    return json.dumps(redact_obj(obj), ensure_ascii=False, separators=(",", ":"))


def append_lines(path: str | Path, records: list[BaseModel] | list[dict[str, Any]]) -> None:
    """Append records with one write() on an O_APPEND descriptor, then fsync (`files.append_bytes`:
    never through a symlink; a full disk cuts the write back and raises DiskFull).

    One write per batch keeps concurrent appenders from interleaving within a line, and a
    kill leaves at worst a torn last line, which `iter_json_lines(repair_tail=True)` drops.
    """
    if not records:
        return
    append_bytes(path, "".join(dumps(r) + "\n" for r in records).encode("utf-8"))


def write_records(path: str | Path, records: list[BaseModel] | list[dict[str, Any]]) -> None:
    """Write a whole JSONL file atomically (temp file + rename)."""
    write_atomic(path, "".join(dumps(r) + "\n" for r in records).encode("utf-8"))


def cut_torn_tail(path: str | Path) -> int:
    """Cut a last line that lacks its newline (a write torn by a kill); returns the bytes cut."""
    try:
        fd = open_plain(path, os.O_RDWR)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        if not size or os.pread(fd, 1, size - 1) == b"\n":
            return 0
        cut, end, block = 0, size, 1 << 16
        while end > 0:  # back to the last newline, a block at a time (a line can be long)
            start = max(0, end - block)
            at = os.pread(fd, end - start, start).rfind(b"\n")
            if at != -1:
                cut = start + at + 1
                break
            end = start
        os.ftruncate(fd, cut)
        return size - cut
    finally:
        os.close(fd)
