"""Search backends: local BM25 over the bundled corpus (built, saved, reloaded), SearXNG and Serper over loopback."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest

from lifesearch_local.web.cache import WebCache
from lifesearch_local.web.search import SEARCH_BACKENDS, Searcher, SearchError, make_backend
from lifesearch_local.web.search.local import LocalIndex, build_index, tokenize

from .conftest import FIXTURES, fetch_all, make_config
from .server import Reply, Request

SOLAR = "https://energy.example.org/news/solar-2023"
GDP = "https://stats.example.org/gdp/provinces"
PUDONG = "https://history.example.cn/pudong"
WIND = "https://reports.example.org/wind-2022.pdf"
EV = "https://auto.example.cn/ev-2024"
QUERIES = [
    ("solar generation rooftop", SOLAR),
    ("Guangdong Jiangsu GDP", GDP),
    ("浦东开发 陆家嘴", PUDONG),
    ("朱镕基", PUDONG),
    ("offshore wind turbines gigawatts", WIND),
    ("新能源汽车销量", EV),
]


@pytest.fixture(scope="module")
def index():
    return build_index(corpus_dirs=[FIXTURES])


@pytest.mark.parametrize("query,expected", QUERIES)
def test_local_bm25_puts_the_expected_page_first(index, query, expected):
    results = index.search(query, num=3, as_of=None)
    assert results[0].link == expected
    assert results[0].position == 1 and results[0].snippet


def test_index_saved_and_reloaded_ranks_the_same(index, tmp_path):
    loaded = LocalIndex.load(index.save(tmp_path / "idx"))
    for query, _ in QUERIES:
        assert loaded.search(query, num=5, as_of=None) == index.search(query, num=5, as_of=None)


def test_local_search_respects_the_cutoff(index):
    assert index.search("新能源汽车销量", num=5, as_of=None)[0].link == EV
    assert EV not in [r.link for r in index.search("新能源汽车销量", num=5, as_of=dt.date(2023, 12, 31))]
    assert index.search("solar", num=5, as_of=dt.date(2023, 1, 1)) == []  # the solar page is from May 2023


def test_local_search_no_match_and_snippet(index):
    assert index.search("zzzz qqqq", num=5, as_of=None) == []
    top = index.search("curtailment battery storage", num=1, as_of=None)[0]
    assert "curtailment" in top.snippet and len(top.snippet) <= 300


def test_local_backend_through_the_registry(tmp_path):
    config = make_config(corpus_dirs=[FIXTURES], search={"backend": "local"})
    results = asyncio.run(Searcher(config).search("GDP Zhejiang", num=2))
    assert results[0].link == GDP and results[0].date == "2023-02-20"
    build_index(corpus_dirs=[FIXTURES]).save(tmp_path / "idx")
    saved = make_config(search={"backend": "local", "index_dir": str(tmp_path / "idx")})
    assert asyncio.run(Searcher(saved).search("GDP Zhejiang", num=2))[0].link == GDP


def test_index_from_cached_pages(server, tmp_path):
    server.routes["/tides"] = Reply(body=b"<html><head><title>Tidal power</title></head><body><article><p>"
                                    + b"Tidal barrages convert the rise and fall of the sea into electricity. " * 10 + b"</p></article></body></html>")
    fetch_all(make_config(tmp_path, mode="record", respect_robots=False), [server.url("/tides")])
    idx = build_index(cache=WebCache(tmp_path / "cache"))
    assert idx.search("tidal barrages", num=1, as_of=None)[0].link == server.url("/tides")


def test_tokenize_mixes_words_and_chinese_bigrams():
    assert tokenize("The GDP of 浦东 rose") == ["gdp", "浦", "东", "浦东", "rose"]


def test_registry_names_and_unknown_backend():
    assert set(SEARCH_BACKENDS) == {"searxng", "serper", "local", "replay"}
    with pytest.raises(SearchError, match="unknown search backend"):
        make_backend("bing", make_config())


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


def test_serper_only_with_a_key(server, monkeypatch):
    monkeypatch.delenv("TEST_SERPER_KEY", raising=False)
    config = make_config(search={"backend": "serper", "serper_key_env": "TEST_SERPER_KEY", "serper_url": server.url("/serp")})
    with pytest.raises(SearchError, match="TEST_SERPER_KEY"):
        asyncio.run(Searcher(config).search("x", num=3))
    assert server.hits["/search"] == 0
    monkeypatch.setenv("TEST_SERPER_KEY", "k123")
    organic = [{"title": "A", "link": "https://a.org/", "snippet": "sa", "date": "Jan 2, 2023", "position": 1}, {"title": "B", "link": "https://b.org/", "snippet": "sb", "position": 2}]
    server.routes["/serp"] = Reply(body=json.dumps({"organic": organic}).encode(), content_type="application/json")
    results = asyncio.run(Searcher(config, as_of=dt.date(2023, 6, 30)).search("solar", num=2))
    assert [(r.title, r.link, r.date) for r in results] == [("A", "https://a.org/", "Jan 2, 2023"), ("B", "https://b.org/", None)]
    req = server.requests[-1]
    assert req.headers["x-api-key"] == "k123"
    assert json.loads(req.body) == {"q": "solar", "num": 2, "tbs": "cdr:1,cd_max:06/30/2023"}
