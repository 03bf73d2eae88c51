"""HTTP details: Retry-After in seconds and as a date."""

from __future__ import annotations

import pytest

from lifesearch_local.web.http import parse_retry_after


@pytest.mark.parametrize("value,expected", [("5", 5.0), ("0.25", 0.25), ("-3", 0.0), ("soon", None), (None, None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)])
def test_parse_retry_after(value, expected):
    assert parse_retry_after(value) == expected
