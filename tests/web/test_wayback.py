"""As-of enforcement through the Wayback Machine's CDX: the last capture before the cutoff, digests, replay."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json

import pytest

from lifesearch_local.web.cache import ReplayMiss
from tests.helpers.web import RecordingConnector, fetch_all, fetch_one, make_config
from tests.helpers.web_server import Reply, Request

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


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b'[["urlkey"], "row"]', b'[["timestamp"], [5]]',
                                  b'[["timestamp"], [' + b"9" * 5000 + b"]]"])
def test_a_hostile_cdx_answer_is_an_http_error_not_a_crash(server, body):
    config = archive(server)
    server.routes["/cdx/search/cdx"] = Reply(body=body, content_type="application/json")
    doc = fetch_one(config, ORIGINAL, as_of=dt.date(2023, 3, 1))
    assert doc.kind == "http_error" and "CDX answer" in doc.message, doc
