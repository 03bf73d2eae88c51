"""HTML building blocks of the report page: escaping, ids, tables (all cells pre-escaped by the caller)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any


def e(x: Any) -> str:
    """Escape anything for HTML text or a quoted attribute."""
    return escape(str(x), quote=True)


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", s).strip("-") or "x"


def table(head: Sequence[str], rows: Iterable[Sequence[str]], *, tid: str = "", cls: str = "", num_from: int = 1) -> str:
    """An HTML table in a box that scrolls sideways rather than widen the page; cells are
    pre-escaped HTML; columns from `num_from` are right-aligned."""
    attrs = (f' id="{e(tid)}"' if tid else "") + (f' class="{e(cls)}"' if cls else "")
    th = "".join(f'<th class="{"num" if i >= num_from else ""}">{h}</th>' for i, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"num" if i >= num_from else ""}">{c}</td>' for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<div class="wide"><table{attrs}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'
