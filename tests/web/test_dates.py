"""Dates of pages and search results, and whether one falls after a cutoff."""

from __future__ import annotations

import datetime as dt

import pytest

from lifesearch_local.web.dates import after_cutoff, parse_date


@pytest.mark.parametrize(
    "value,expected",
    [("2023-05-04", dt.date(2023, 5, 4)), ("2023-05-04T09:00:00Z", dt.date(2023, 5, 4)), ("20230115120000", dt.date(2023, 1, 15)),
     ("Mar 3, 2024", dt.date(2024, 3, 3)), ("3 days ago", None), ("", None), (None, None), ("not a date", None)],
)
def test_parse_date(value, expected):
    assert parse_date(value) == expected


def test_after_cutoff():
    cutoff = dt.date(2023, 6, 30)
    assert after_cutoff("2023-07-01", cutoff) and not after_cutoff("2023-06-30", cutoff)
    assert not after_cutoff(None, cutoff) and after_cutoff(None, cutoff, drop_undated=True)
    assert not after_cutoff("2030-01-01", None)
