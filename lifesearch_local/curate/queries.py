"""Load query seeds (JSONL) with located errors, and tell Chinese from English by CJK characters."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lifesearch_local.curate.records import Query
from lifesearch_local.errors import InputError
from lifesearch_local.records import Language
from lifesearch_local.rundir.jsonl import load_unique
from lifesearch_local.tasks import parse_language

ID_FIELDS = ("id", "qid")
TEXT_FIELDS = ("query", "prompt", "question", "text")

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def detect_language(text: str) -> Language:
    """`zh` when CJK characters are at least a fifth as many as Latin letters, else `en`.

    One CJK character carries about as much as a five-letter English word, so a Chinese query
    quoting product names and URLs stays `zh`, and an English one naming a Chinese place stays `en`.
    """
    cjk = len(_CJK.findall(text))
    return "zh" if cjk and 5 * cjk >= len(_LATIN.findall(text)) else "en"


def _first(obj: dict[str, Any], names: tuple[str, ...]) -> tuple[str | None, Any]:
    for n in names:
        if n in obj:
            return n, obj[n]
    return None, None


def parse_query(obj: dict[str, Any], path: str, lineno: int) -> Query:
    """Validate one query object from line `lineno` of `path`."""
    id_name, qid = _first(obj, ID_FIELDS)
    if id_name is None:
        raise InputError(path, lineno, "id", f"missing (expected one of: {', '.join(ID_FIELDS)})")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    if not isinstance(qid, str) or not qid.strip():
        raise InputError(path, lineno, id_name, f"expected a non-empty string, got {qid!r}")
    text_name, text = _first(obj, TEXT_FIELDS)
    if text_name is None:
        raise InputError(path, lineno, "query", f"missing (expected one of: {', '.join(TEXT_FIELDS)})")
    if not isinstance(text, str) or not text.strip():
        raise InputError(path, lineno, text_name, f"expected a non-empty string, got {text!r}")
    lang_name, lang = _first(obj, ("language", "lang"))
    if lang in (None, ""):
        language = detect_language(text)
    else:
        try:
            language = parse_language(lang)
        except ValueError as e:
            raise InputError(path, lineno, lang_name or "language", str(e)) from None
    return Query(id=qid.strip(), text=text, language=language)


def load_queries(path: str | Path) -> list[Query]:
    """Load and validate a queries JSONL file; raises InputError on the first problem."""
    return load_unique(path, parse_query, "query", "queries")
