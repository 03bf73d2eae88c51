"""The searcher and its registry of backends: results dated after the cutoff dropped, unknown names refused."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from lifesearch_local.web.records import SearchResult
from lifesearch_local.web.search import SEARCH_BACKENDS, Searcher, SearchError, make_backend
from tests.helpers.web import make_config


class DatedBackend:
    async def search(self, query, *, num, as_of):
        dates = ["2023-01-05", "Jun 3, 2024", None, "2023-12-31", "2 days ago", "20240101"]
        return [SearchResult(title=f"r{i}", link=f"https://r.org/{i}", date=d, position=i) for i, d in enumerate(dates, 1)]


def test_search_results_after_cutoff_are_dropped():
    searcher = Searcher(make_config(), backend=DatedBackend(), as_of=dt.date(2023, 12, 31))
    results = asyncio.run(searcher.search("q", num=10))
    assert [r.title for r in results] == ["r1", "r3", "r4", "r5"]
    assert [r.position for r in results] == [1, 2, 3, 4]
    strict = Searcher(make_config(drop_undated=True), backend=DatedBackend(), as_of=dt.date(2023, 12, 31))
    assert [r.title for r in asyncio.run(strict.search("q", num=10))] == ["r1", "r4"]
    assert len(asyncio.run(Searcher(make_config(), backend=DatedBackend()).search("q", num=10))) == 6


def test_registry_names_and_unknown_backend():
    assert set(SEARCH_BACKENDS) == {"searxng", "serper", "local", "replay"}
    with pytest.raises(SearchError, match="unknown search backend"):
        make_backend("bing", make_config())
