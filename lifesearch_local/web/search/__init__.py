"""Search: a registry of backends behind one Serper-shaped result, with caching and the as-of filter."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from lifesearch_local.web.cache import ReplayMiss, WebCache
from lifesearch_local.web.config import WebConfig
from lifesearch_local.web.dates import after_cutoff
from lifesearch_local.web.records import SearchResult
from lifesearch_local.web.search.base import SearchBackend, SearchError, ranked


def _searxng(config: WebConfig, cache: WebCache | None) -> SearchBackend:
    from lifesearch_local.web.search.searxng import SearxngBackend

    return SearxngBackend(config, cache)


def _serper(config: WebConfig, cache: WebCache | None) -> SearchBackend:
    from lifesearch_local.web.search.serper import SerperBackend

    return SerperBackend(config, cache)


def _local(config: WebConfig, cache: WebCache | None) -> SearchBackend:
    from lifesearch_local.web.search.local import LocalBackend  # bm25s and the corpus index: only when chosen

    return LocalBackend(config, cache)


def _replay(config: WebConfig, cache: WebCache | None) -> SearchBackend:
    from lifesearch_local.web.search.replay import ReplayBackend

    return ReplayBackend(config, cache)


# name -> factory taking (config, cache); each imports its backend on use.
SEARCH_BACKENDS: dict[str, Callable[[WebConfig, WebCache | None], SearchBackend]] = {
    "searxng": _searxng, "serper": _serper, "local": _local, "replay": _replay,
}


def make_backend(name: str, config: WebConfig, cache: WebCache | None = None) -> SearchBackend:
    if name not in SEARCH_BACKENDS:
        raise SearchError(f"unknown search backend {name!r}; known: {', '.join(SEARCH_BACKENDS)}")
    return SEARCH_BACKENDS[name](config, cache)


class Searcher:
    """The harness's search tool: cache modes as for fetching, and the cutoff enforced on results.

    The `replay` backend is the cache itself, so with it the searcher adds no caching of its own.
    """

    def __init__(
        self,
        config: WebConfig | None = None,
        *,
        as_of: dt.date | None = None,
        cache: WebCache | None = None,
        backend: SearchBackend | None = None,
    ):
        from lifesearch_local.web.fetcher import MODES

        self.config = config or WebConfig()
        self.name, self.as_of = self.config.search.backend, as_of
        mode = "live" if self.name == "replay" else self.config.mode
        self.read_cache, self.write_cache, self.network = MODES[mode]
        if cache is None and self.config.cache_dir is not None and (self.name == "replay" or mode != "live"):
            cache = WebCache(self.config.cache_dir)
        if cache is None and (self.read_cache or self.write_cache):
            raise SearchError(f"web mode {mode!r} needs a cache directory (cache_dir)")
        self.cache = cache
        # In replay mode the real backend is never asked, so it is never built (no key, no index).
        self._backend = backend
        self.searches = 0

    @property
    def backend(self) -> SearchBackend:
        if self._backend is None:
            self._backend = make_backend(self.name, self.config, self.cache)
        return self._backend

    async def search(self, query: str, *, num: int | None = None, as_of: dt.date | None = None) -> list[SearchResult]:
        """Results for `query`, none dated after the cutoff; a replay miss raises ReplayMiss."""
        n, cutoff = num or self.config.search.num, as_of or self.as_of
        params = {"num": n}
        results = self.cache.find_search(query, params, cutoff, self.name) if self.read_cache else None  # type: ignore[union-attr]
        if results is None:
            if not self.network:
                raise ReplayMiss(f"replay: no recorded {self.name} search for {query!r} (num={n}) in {self.cache.root}")  # type: ignore[union-attr]
            results = await self.backend.search(query, num=n, as_of=cutoff)
            self.searches += 1
            if self.write_cache:
                self.cache.put_search(self.name, query, params, cutoff, results)  # type: ignore[union-attr]
        kept = [r for r in results if not after_cutoff(r.date, cutoff, drop_undated=self.config.drop_undated)]
        return ranked(kept, n)


__all__ = ["SEARCH_BACKENDS", "SearchBackend", "SearchError", "Searcher", "make_backend"]
