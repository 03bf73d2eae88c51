"""The search backends' shared HTTP helper: an answer that is not usable JSON is one SearchError."""

from __future__ import annotations

import asyncio

import pytest

from lifesearch_local.web.search import Searcher, SearchError
from tests.helpers.web import make_config
from tests.helpers.web_server import Reply


@pytest.mark.parametrize("body, message", [
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested deeper than 64 levels"),
    (b'{"results": [], "n": ' + b"9" * 5000 + b"}", "not a usable JSON value"),
    (b'{"results": [], "results": []}', "duplicate key 'results'"),
])
def test_an_answer_that_is_not_usable_json_is_one_search_error(server, body, message):
    server.routes["/search"] = Reply(body=body, content_type="application/json")
    config = make_config(search={"backend": "searxng", "searxng_url": server.url(""), "retries": 0})
    with pytest.raises(SearchError, match=f"the answer is not usable JSON.*{message}") as e:
        asyncio.run(Searcher(config).search("solar", num=3))
    assert "\n" not in str(e.value)
