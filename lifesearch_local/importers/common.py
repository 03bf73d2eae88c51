"""What every importer shares: located reading of a benchmark's JSONL and the atomic output directory."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from lifesearch_local.errors import DiskFull, InputError, LifesearchError
from lifesearch_local.records import id_problem, is_blank
from lifesearch_local.rundir.files import disk_full, full_disk_as_error, write_atomic
from lifesearch_local.rundir.jsonl import (
    numbered_records,
    read_json_file,
    require_file,
    validation_field,
    write_records,
)

M = TypeVar("M", bound=BaseModel)


def read_rows(path: str | Path, model: type[M]) -> list[tuple[int, M]]:
    """(line, record) for each line of a benchmark's JSONL file; InputError names file:line: field."""
    if not Path(path).is_file():
        raise InputError(str(path), None, None, "no such file")
    out = list(numbered_records(path, model))
    if not out:
        raise InputError(str(path), None, None, "no records in file")
    return out


def import_inputs(out: Path, *required: str) -> dict[str, Any]:
    """The `inputs` of an import directory's import.json, with the `required` keys; a damaged or
    foreign file is one InputError naming it."""
    path = Path(out) / "import.json"
    require_file(path, "JSON")
    data = read_json_file(path)
    inputs = data.get("inputs") if isinstance(data, dict) else None
    if not isinstance(inputs, dict):
        raise InputError(str(path), None, "inputs", "missing: not the import.json of `lifesearch import`")
    missing = [k for k in required if k not in inputs]
    if missing:
        raise InputError(str(path), None, f"inputs.{missing[0]}", "missing: not the import.json of this importer")
    return inputs


def json_text(obj: Any) -> str:
    """import.json's text: indented, non-ASCII kept, one trailing newline (same input, same bytes)."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def write_import_dir(out: str | Path, files: dict[str, list[BaseModel] | list[dict[str, Any]] | str], *,
                     source_file: str, command: str, force: bool = False) -> Path:
    """Write `files` (name → JSONL records, or text) into a temp sibling of `out`, then rename it to `out`.

    A non-empty `out` is refused unless `force`, and even then only when it is an earlier output of
    the same importer (it holds `import.json` and `source_file`): `--force` never deletes a directory
    the importer did not write. Records are written in the order given, so the same input gives the
    same bytes.
    """
    out = Path(out)
    if out.parent.is_dir():
        sweep_stale(out)
    if out.exists() and not out.is_dir():
        raise LifesearchError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise LifesearchError(f"{out}: directory is not empty; pass --force to replace it")
        if not ((out / "import.json").is_file() and (out / source_file).is_file()):
            raise LifesearchError(f"{out}: not an earlier `{command}` output (no import.json and {source_file}); "
                                  "--force replaces only those, choose another --out")
    with full_disk_as_error(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    try:
        tmp.chmod(0o755)
        for name, content in files.items():
            if isinstance(content, str):
                write_atomic(tmp / name, content)
            else:
                write_records(tmp / name, content)
        _swap_in(tmp, out)
    except DiskFull:  # named by the directory asked for, not by our temporary (removed here)
        shutil.rmtree(tmp, ignore_errors=True)
        raise disk_full(out) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def sweep_stale(out: Path) -> list[Path]:
    """Remove the temporaries beside `out` left by an import killed mid-write (`kill -9`): the
    `.<out>.tmp-<pid>-…` directories of processes that no longer exist. A `.<out>.old-<pid>`
    (the previous output, moved aside just before the new one took its place) is put back when
    `out` is missing, else removed. A live process's temporaries are left alone. Returns what was removed."""
    pattern = re.compile(rf"^\.{re.escape(out.name)}\.(tmp|old)-(\d+)(-.*)?$")
    removed: list[Path] = []
    for p in sorted(out.parent.iterdir()):
        m = pattern.match(p.name)
        if not m or not p.is_dir() or p.is_symlink() or _pid_alive(int(m.group(2))):
            continue
        if m.group(1) == "old" and not out.exists():
            os.replace(p, out)
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def _swap_in(tmp: Path, out: Path) -> None:
    if out.exists():  # a rename cannot replace a non-empty directory: move the old one aside first
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)


def check_id(value: str, where: str | Path, line: int | None, field: str) -> str:
    """`value` if it can be an id (agent, task, judge name): an InputError naming where it came from if it
    is empty, only invisible characters, or holds a control character (as `validate` refuses it)."""
    problem = id_problem(value)
    if problem:
        raise InputError(str(where), line, field, f"not an id: {problem}")  # the value itself never echoed
    return value


def check_text(value: str, where: str | Path, line: int | None, field: str, what: str) -> str:
    """`value` if it has something to read: an InputError naming where it came from if it is empty or
    only whitespace and invisible characters (a `what`, question or rubric, a judge would see as nothing)."""
    if is_blank(value):
        raise InputError(str(where), line, field, f"empty {what} (or only whitespace and invisible characters)")
    return value


@contextlib.contextmanager
def located(path: str | Path, line: int | None) -> Iterator[None]:
    """Within the block, a record our own schema refuses (what `validate` would refuse) is an
    InputError naming the source file and line, not a traceback."""
    try:
        yield
    except ValidationError as e:
        field, msg = validation_field(e)
        raise InputError(str(path), line, field, msg) from None


def unique_by(rows: list[tuple[int, M]], key: Callable[[M], Any], path: str | Path, field: str) -> dict[Any, tuple[int, M]]:
    """rows keyed by `key(record)`; a repeated key is an InputError naming both lines."""
    seen: dict[Any, tuple[int, M]] = {}
    for lineno, rec in rows:
        k = key(rec)
        if k in seen:
            raise InputError(str(path), lineno, field, f"duplicate {field} {k!r} (first on line {seen[k][0]})")
        seen[k] = (lineno, rec)
    return seen
