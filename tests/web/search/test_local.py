"""The local BM25 index over the bundled corpus: built, saved, reloaded, ranked, cut off."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from lifesearch_local.web.cache import WebCache
from lifesearch_local.web.search import Searcher
from lifesearch_local.web.search.local import LocalIndex, build_index, tokenize
from tests.helpers.web import WEB_FIXTURES, fetch_all, make_config
from tests.helpers.web_server import Reply

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
    return build_index(corpus_dirs=[WEB_FIXTURES])


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
    config = make_config(corpus_dirs=[WEB_FIXTURES], search={"backend": "local"})
    results = asyncio.run(Searcher(config).search("GDP Zhejiang", num=2))
    assert results[0].link == GDP and results[0].date == "2023-02-20"
    build_index(corpus_dirs=[WEB_FIXTURES]).save(tmp_path / "idx")
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


def test_a_damaged_saved_index_is_a_located_error(index, tmp_path):
    from lifesearch_local.errors import InputError

    saved = index.save(tmp_path / "idx")
    docs = saved / "docs.jsonl"
    docs.write_bytes(docs.read_bytes() + b'{"url": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    with pytest.raises(InputError, match=r"docs.jsonl:\d+: JSON nested deeper than 64 levels"):
        LocalIndex.load(saved)
