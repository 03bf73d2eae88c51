"""The one strict, bounded JSON reader for everything read from outside: files, lines, response bodies.

`lifesearch_local` reads its files through here (rundir/jsonl.py names file and line); the openai
engine reads response bodies through here. Whatever the input, the result is a value or one
`JSONError` line, never a RecursionError, a conversion traceback or text that cannot be encoded.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64  # no record or response nests beyond a handful of levels; deeper input would recurse later


class JSONError(ValueError):
    """Input that is not usable JSON, said in one line."""

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        """Why, without the input itself (it may be huge, or hold a secret)."""
        self.line = line
        """The line within the text, when known."""
        self.field = field
        """The key concerned (`a.b[2].c`, or `(key)` for a key itself), when known."""


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:  # json.loads keeps the last silently: a second "language" would change a task
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999 parses as infinity: as unusable as a literal Infinity
        raise ValueError(f"{text[:40]} is beyond the range of a float")
    return value


def loads(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """One JSON text, strictly: malformed JSON, bytes that are not UTF-8, duplicate keys, NaN and
    Infinity (literal, or a number beyond float range), integers beyond Python's digit limit, nesting
    deeper than `max_depth` (100 000 levels included) and lone surrogates are each a `JSONError`."""
    try:
        value = json.loads(raw, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as e:
        raise JSONError(f"malformed JSON ({e})", line=e.lineno) from None
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1 if isinstance(raw, bytes) else None
        raise JSONError(f"not UTF-8 text ({e.reason} at byte {e.start})", line=line) from None
    except _DuplicateKey as e:
        key = repr(e.key) if len(e.key) <= 100 else f"of {len(e.key)} characters"  # whole or not at all: a
        # key cut short could show part of a secret that redaction would have masked whole
        raise JSONError(f"duplicate key {key} in one object (which one is meant?)",
                        field=e.key if len(e.key) <= 100 else None) from None
    except RecursionError:
        raise JSONError(f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as e:  # "Exceeds the limit (4300 digits) for integer string conversion", NaN, 1e999
        raise JSONError(f"not a usable JSON value: {str(e).split(';')[0]}") from None
    check_value(value, max_depth)
    return value


def check_value(value: Any, max_depth: int = MAX_DEPTH) -> None:
    """A `JSONError` naming the field when `value` nests deeper than `max_depth` or holds text that
    is not valid Unicode (a lone surrogate such as \\ud800: it passes json.loads, then fails every encode)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:  # iterative, so a deep value cannot exhaust the interpreter's recursion
        item, where, depth = stack.pop()
        if depth > max_depth:
            top = re.split(r"[.\[]", where, maxsplit=1)[0]
            raise JSONError(f"JSON nested deeper than {max_depth} levels", field=top or None)
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as e:
                bad = item[e.start].encode("unicode_escape").decode()
                raise JSONError(f"lone surrogate {bad} at character {e.start}: not valid Unicode text; "
                                "fix the file's encoding", field=where or "(key)") from None
        elif isinstance(item, dict):
            for k, v in item.items():
                stack += [(k, f"{where}(key)", depth + 1), (v, f"{where}.{k}" if where else str(k), depth + 1)]
        elif isinstance(item, list):
            stack += [(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(item)]
