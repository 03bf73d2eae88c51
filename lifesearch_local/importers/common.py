"""What every importer shares: located reading of a benchmark's JSONL and the atomic output directory."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.rundir.jsonl import numbered_records, read_json_file, require_file, write_records

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
    if out.exists() and not out.is_dir():
        raise LifesearchError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise LifesearchError(f"{out}: directory is not empty; pass --force to replace it")
        if not ((out / "import.json").is_file() and (out / source_file).is_file()):
            raise LifesearchError(f"{out}: not an earlier `{command}` output (no import.json and {source_file}); "
                                  "--force replaces only those, choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tmp.chmod(0o755)
        for name, content in files.items():
            if isinstance(content, str):
                (tmp / name).write_text(content, "utf-8")
            else:
                write_records(tmp / name, content)
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _swap_in(tmp: Path, out: Path) -> None:
    if out.exists():  # a rename cannot replace a non-empty directory: move the old one aside first
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)


def unique_by(rows: list[tuple[int, M]], key: Callable[[M], Any], path: str | Path, field: str) -> dict[Any, tuple[int, M]]:
    """rows keyed by `key(record)`; a repeated key is an InputError naming both lines."""
    seen: dict[Any, tuple[int, M]] = {}
    for lineno, rec in rows:
        k = key(rec)
        if k in seen:
            raise InputError(str(path), lineno, field, f"duplicate {field} {k!r} (first on line {seen[k][0]})")
        seen[k] = (lineno, rec)
    return seen
