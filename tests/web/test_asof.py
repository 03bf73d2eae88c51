"""As-of enforcement: Wayback CDX captures, digests, the local corpus's dates, search result dates."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import json

import pytest

from lifesearch_local.web.cache import ReplayMiss
from lifesearch_local.web.dates import after_cutoff, parse_date
from lifesearch_local.web.records import SearchResult
from lifesearch_local.web.search import Searcher

from .conftest import FIXTURES, RecordingConnector, fetch_all, fetch_one, make_config
from .server import Reply, Request

ORIGINAL = "https://news.example.com/story"
OLD = b"<html><head><title>Story (January)</title></head><body><article><p>" + b"The January version of the story. " * 15 + b"</p></article></body></html>"
NEW = b"<html><head><title>Story (June)</title></head><body><article><p>" + b"The June version of the story. " * 15 + b"</p></article></body></html>"
HEADER = ["urlkey", "timestamp", "original", "mimetype", "statuscode", "digest", "length"]


def b32(data: bytes) -> str:
    return base64.b32encode(hashlib.sha1(data).digest()).decode()


def archive(server, *, rows=None, honour_to=True, digest=None):
    """A fake Wayback: CDX rows for ORIGINAL and two captures (January and June 2023)."""
    captures = {"20230115120000": OLD, "20230610080000": NEW}
    server.routes["/web/20230115120000id_/" + ORIGINAL] = Reply(body=OLD)
    server.routes["/web/20230610080000id_/" + ORIGINAL] = Reply(body=NEW)

    def cdx(req: Request) -> Reply:
        to = req.query["to"][0] if honour_to else "99999999"
        stamps = [ts for ts in sorted(captures) if ts[:8] <= to]
        body = [HEADER] + [["com,example,news)/story", ts, ORIGINAL, "text/html", "200", digest or b32(captures[ts]), "100"] for ts in stamps]
        if rows is not None:
            body = rows
        # limit=-1 asks for the last capture only
        body = body[:1] + body[-1:] if req.query.get("limit") == ["-1"] and len(body) > 1 else body
        return Reply(body=json.dumps(body).encode(), content_type="application/json")

    server.routes["/cdx/search/cdx"] = cdx
    return make_config(wayback_url=server.url("").rstrip("/"))


def test_last_capture_before_cutoff(server):
    config = archive(server)
    doc = fetch_one(config, ORIGINAL, as_of=dt.date(2023, 3, 1))
    assert doc.ok, doc
    assert doc.source == "archive" and doc.archived_at == "20230115120000"
    assert doc.final_url == ORIGINAL and "January version" in doc.text
    q = next(r for r in server.requests if r.path == "/cdx/search/cdx").query
    assert q == {"url": [ORIGINAL], "to": ["20230301"], "output": ["json"], "limit": ["-1"], "filter": ["statuscode:200"]}
    later = fetch_one(config, ORIGINAL, as_of=dt.date(2023, 12, 31))
    assert later.archived_at == "20230610080000" and "June version" in later.text


def test_no_capture_before_cutoff_is_not_archived(server):
    config = archive(server)
    assert fetch_one(config, ORIGINAL, as_of=dt.date(2022, 12, 31)).kind == "not_archived"


def test_capture_after_cutoff_never_served_even_if_the_server_ignores_to(server):
    config = archive(server, honour_to=False)
    assert fetch_one(config, ORIGINAL, as_of=dt.date(2022, 12, 31)).kind == "not_archived"
    assert server.hits["/web/20230610080000id_/" + ORIGINAL] == 0


def test_digest_mismatch(server):
    config = archive(server, digest="AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    assert fetch_one(config, ORIGINAL, as_of=dt.date(2023, 3, 1)).kind == "digest_mismatch"


def test_as_of_recorded_then_replayed(server, tmp_path):
    config = archive(server)
    cutoff = dt.date(2023, 3, 1)
    rec = config.model_copy(update={"mode": "record", "cache_dir": tmp_path / "c"})
    (recorded,), _ = fetch_all(rec, [ORIGINAL], as_of=cutoff)
    rep = config.model_copy(update={"mode": "replay", "cache_dir": tmp_path / "c"})
    (replayed,), _ = fetch_all(rep, [ORIGINAL], as_of=cutoff, connector=RecordingConnector(refuse=True))
    assert replayed.from_cache and replayed.text == recorded.text
    with pytest.raises(ReplayMiss):  # the same URL without a cutoff was never recorded
        fetch_all(rep, [ORIGINAL], connector=RecordingConnector(refuse=True))


def test_corpus_pages_served_locally_and_refused_after_cutoff():
    config = make_config(corpus_dirs=[FIXTURES])
    urls = ["https://energy.example.org/news/solar-2023", "https://auto.example.cn/ev-2024"]
    connector = RecordingConnector(refuse=True)
    (solar, ev), fetcher = fetch_all(config, urls, as_of=dt.date(2023, 12, 31), connector=connector)
    assert solar.ok and solar.source == "corpus" and "12 percent" in solar.text
    assert ev.kind == "after_cutoff" and "2024-07-10" in ev.message
    assert connector.hosts == [] and fetcher.stats.corpus == 1
    (ev_now,), _ = fetch_all(config, urls[1:], connector=connector)
    assert ev_now.ok and "新能源汽车" in ev_now.text


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


@pytest.mark.parametrize(
    "value,expected",
    [("2023-05-04", dt.date(2023, 5, 4)), ("2023-05-04T09:00:00Z", dt.date(2023, 5, 4)), ("20230115120000", dt.date(2023, 1, 15)),
     ("Mar 3, 2024", dt.date(2024, 3, 3)), ("3 days ago", None), ("", None), (None, None), ("not a date", None)],
)
def test_parse_date(value, expected):
    assert parse_date(value) == expected


def test_after_cutoff():
    cutoff = dt.date(2023, 6, 30)
    assert after_cutoff("2023-07-01", cutoff) and not after_cutoff("2023-06-30", cutoff)
    assert not after_cutoff(None, cutoff) and after_cutoff(None, cutoff, drop_undated=True)
    assert not after_cutoff("2030-01-01", None)
