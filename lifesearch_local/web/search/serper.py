"""Serper (Google results), used only when its API key is configured."""

from __future__ import annotations

import datetime as dt

from lifesearch_local.web.config import WebConfig
from lifesearch_local.web.records import SearchResult
from lifesearch_local.web.search.base import SearchError, ranked, request_json
from serving import secret_from_env


class SerperBackend:
    """POSTs to Serper; with a cutoff, asks Google for results up to that date (tbs=cdr)."""

    def __init__(self, config: WebConfig, cache: object = None):
        self.key = secret_from_env(config.search.serper_key_env) or ""
        if not self.key:
            raise SearchError(f"the serper backend needs an API key in ${config.search.serper_key_env}")
        self.url, self.config = config.search.serper_url, config.search

    async def search(self, query: str, *, num: int, as_of: dt.date | None) -> list[SearchResult]:
        body: dict[str, object] = {"q": query, "num": num}
        if as_of is not None:
            body["tbs"] = f"cdr:1,cd_max:{as_of:%m/%d/%Y}"
        data = await request_json("POST", self.url, config=self.config, json=body, headers={"X-API-KEY": self.key})
        organic = [o for o in data.get("organic", []) if o.get("link")]
        results = [
            SearchResult(title=o.get("title", ""), link=o["link"], snippet=o.get("snippet", ""), date=o.get("date"), position=i)
            for i, o in enumerate(organic, 1)
        ]
        return ranked(results, num)
