"""SearXNG over loopback: its JSON API, and a server that is down."""

from __future__ import annotations

import asyncio
import json

import pytest

from lifesearch_local.web.search import Searcher, SearchError
from tests.helpers.web import make_config
from tests.helpers.web_server import Reply, Request


def test_searxng_json_api(server):
    def route(req: Request) -> Reply:
        page = int(req.query["pageno"][0])
        items = [{"url": f"https://s.org/{page}-{i}", "title": f"T{page}-{i}", "content": "snip", "publishedDate": "2023-04-01T00:00:00"} for i in range(2)]
        return Reply(body=json.dumps({"results": items if page <= 2 else []}).encode(), content_type="application/json")

    server.routes["/search"] = route
    config = make_config(search={"backend": "searxng", "searxng_url": server.url("")})
    results = asyncio.run(Searcher(config).search("solar power", num=3))
    assert [r.link for r in results] == ["https://s.org/1-0", "https://s.org/1-1", "https://s.org/2-0"]
    assert [r.position for r in results] == [1, 2, 3] and results[0].date == "2023-04-01" and results[0].snippet == "snip"
    first = server.requests[0].query
    assert first["q"] == ["solar power"] and first["format"] == ["json"]


def test_searxng_down_is_a_search_error(server):
    server.routes["/search"] = Reply(500, b"oops")
    config = make_config(search={"backend": "searxng", "searxng_url": server.url(""), "backoff_s": 0.01})
    with pytest.raises(SearchError, match="500"):
        asyncio.run(Searcher(config).search("x", num=3))
    assert server.hits["/search"] == 3  # bounded: one try and two retries
