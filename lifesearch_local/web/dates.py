"""Dates as search backends and pages give them, and the as-of cutoff test."""

from __future__ import annotations

import datetime as dt
import re

_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
_WAYBACK = re.compile(r"^(\d{4})(\d{2})(\d{2})(\d{6})?$")


def parse_date(value: str | None) -> dt.date | None:
    """A calendar date from ISO, Wayback (YYYYMMDD[hhmmss]) or prose ("Mar 3, 2024"); None if unknown.

    Relative dates ("3 days ago") are None: they depend on when the search ran.
    """
    if not value or not value.strip():
        return None
    s = value.strip()
    for pattern in (_ISO, _WAYBACK):
        m = pattern.match(s)
        if m:
            try:
                return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            except ValueError:
                return None
    if re.search(r"\bago\b|yesterday|today", s, re.I):
        return None
    from dateutil import parser

    try:
        return parser.parse(s, default=dt.datetime(1900, 1, 1)).date()
    except (ValueError, OverflowError, parser.ParserError):
        return None


def after_cutoff(value: str | None, cutoff: dt.date | None, *, drop_undated: bool = False) -> bool:
    """True when a dated item must be hidden from a task whose cutoff is `cutoff`."""
    if cutoff is None:
        return False
    when = parse_date(value)
    return drop_undated if when is None else when > cutoff
