"""SearXNG (self-hosted) through its JSON API."""

from __future__ import annotations

import datetime as dt
from typing import Any

from lifesearch_local.web.config import WebConfig
from lifesearch_local.web.dates import parse_date
from lifesearch_local.web.records import SearchResult
from lifesearch_local.web.search.base import ranked, request_json

MAX_PAGES = 3  # SearXNG pages hold about ten results; more than three is rarely worth it


def to_result(r: dict[str, Any], position: int) -> SearchResult:
    when = parse_date(r.get("publishedDate") or r.get("pubdate"))
    return SearchResult(
        title=r.get("title") or r.get("url", ""),
        link=r["url"],
        snippet=r.get("content") or "",
        date=when.isoformat() if when else None,
        position=position,
    )


class SearxngBackend:
    """Queries `{searxng_url}/search?format=json`; needs `json` among the instance's formats."""

    def __init__(self, config: WebConfig, cache: object = None):
        self.url = config.search.searxng_url.rstrip("/") + "/search"
        self.config = config.search

    async def search(self, query: str, *, num: int, as_of: dt.date | None) -> list[SearchResult]:
        found: list[SearchResult] = []
        seen: set[str] = set()
        for page in range(1, MAX_PAGES + 1):
            data = await request_json("GET", self.url, config=self.config, params={"q": query, "format": "json", "pageno": page})
            batch = [r for r in data.get("results", []) if r.get("url") and r["url"] not in seen]
            found += [to_result(r, len(found) + i) for i, r in enumerate(batch, 1)]
            seen.update(r["url"] for r in batch)
            if not batch or len(found) >= num:
                break
        return ranked(found, num)
