"""The replay backend: recorded results only, from the web cache; a miss is an error."""

from __future__ import annotations

import datetime as dt

from lifesearch_local.web.cache import ReplayMiss, WebCache
from lifesearch_local.web.config import WebConfig
from lifesearch_local.web.records import SearchResult
from lifesearch_local.web.search.base import SearchError, ranked


class ReplayBackend:
    """Serves what a `record` run stored (from any backend, or `search.replay_backend`)."""

    def __init__(self, config: WebConfig, cache: WebCache | None = None):
        if cache is None:
            raise SearchError("the replay backend needs a cache directory (cache_dir)")
        self.cache, self.source = cache, config.search.replay_backend

    async def search(self, query: str, *, num: int, as_of: dt.date | None) -> list[SearchResult]:
        hit = self.cache.find_search(query, {"num": num}, as_of, self.source)
        if hit is None:
            when = f" as of {as_of}" if as_of else ""
            raise ReplayMiss(f"replay: no recorded search for {query!r} (num={num}){when} in {self.cache.root}")
        return ranked(hit, num)
