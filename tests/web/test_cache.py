"""The cache: record then replay with the network off, replay misses, replay-or-live, concurrent writers."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
import sys
import threading

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import LifesearchError
from lifesearch_local.web.cache import ReplayMiss, WebCache, normalize_url, page_key
from lifesearch_local.web.fetcher import Fetcher
from lifesearch_local.web.records import Document, Failure, SearchResult
from lifesearch_local.web.search import Searcher
from tests.helpers.cli import run_cli
from tests.helpers.inputs import ROOT
from tests.helpers.web import RecordingConnector, cache_with_page, fetch_all, forge_index, make_config
from tests.helpers.web_server import Reply

PAGE = b"<html><head><title>Page %d</title></head><body><article><p>" + b"Recorded content number %d. " * 20 + b"</p></article></body></html>"


def page(i: int) -> bytes:
    return PAGE.replace(b"%d", str(i).encode())


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connect or DNS lookup fails the test."""

    def refuse(*a, **k):
        raise AssertionError("network used in replay mode")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_record_then_replay_with_network_off(server, tmp_path, monkeypatch):
    for i in range(3):
        server.routes[f"/p{i}"] = Reply(body=page(i))
    urls = [server.url(f"/p{i}") for i in range(3)] + [server.url("/missing")]
    recorded, rec = fetch_all(make_config(tmp_path, mode="record", respect_robots=False), urls)
    assert [r.ok for r in recorded] == [True, True, True, False]
    assert rec.stats.live == 3 and rec.stats.failures == {"not_found": 1}
    hits = dict(server.hits)

    def refuse(*a, **k):
        raise AssertionError("network used in replay mode")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    connector = RecordingConnector(refuse=True)
    # Spelled differently (case, default port, fragment): the normalized key still matches.
    urls[0] = urls[0].replace("http://127.0.0.1", "HTTP://127.0.0.1") + "#section"
    replayed, rep = fetch_all(make_config(tmp_path, mode="replay"), urls, connector=connector)
    assert [r.model_dump(exclude={"from_cache"}) for r in replayed] == [r.model_dump(exclude={"from_cache"}) for r in recorded]
    assert all(r.from_cache for r in replayed)
    assert rep.http._client is None and connector.hosts == []  # no client, no socket
    assert dict(server.hits) == hits
    assert rep.stats.cached == 4 and rep.stats.live == 0 and rep.stats.bytes_network == 0
    assert rep.stats.bytes_cached == sum(r.bytes for r in recorded if r.ok)


def test_replay_miss_is_an_error(tmp_path, no_network):
    async def go():
        async with Fetcher(make_config(tmp_path, mode="replay"), connector=RecordingConnector(refuse=True)) as f:
            await f.fetch("https://example.org/never-recorded")

    with pytest.raises(ReplayMiss, match="never-recorded.*not in the cache"):
        asyncio.run(go())


def test_replay_or_live_fetches_misses_once(server, tmp_path):
    server.routes["/p"] = Reply(body=page(1))
    config = make_config(tmp_path, mode="replay-or-live", respect_robots=False)
    (first,), f1 = fetch_all(config, [server.url("/p")])
    (second,), f2 = fetch_all(config, [server.url("/p")])
    assert first.ok and not first.from_cache and second.from_cache and server.hits["/p"] == 1
    assert f1.stats.live == 1 and f2.stats.cached == 1
    assert WebCache(tmp_path / "cache").get_blob(second.body_sha256) == page(1)


def test_live_mode_writes_nothing(server, tmp_path):
    server.routes["/p"] = Reply(body=page(1))
    fetch_all(make_config(tmp_path, mode="live", respect_robots=False), [server.url("/p")])
    assert not (tmp_path / "cache").exists()


def test_cache_modes_need_a_directory():
    with pytest.raises(LifesearchError, match="cache"):
        Fetcher(make_config(mode="replay"))


def test_as_of_is_part_of_the_key():
    import datetime as dt

    assert page_key("https://a.org/x", None) != page_key("https://a.org/x", dt.date(2023, 1, 1))


@pytest.mark.parametrize(
    "url,expected",
    [
        ("HTTPS://Example.ORG:443/a?b=2&a=1#frag", "https://example.org/a?a=1&b=2"),
        ("http://example.org", "http://example.org/"),
        ("http://example.org:8080/x", "http://example.org:8080/x"),
        ("http://[::1]:80/", "http://[::1]/"),
    ],
)
def test_normalize_url(url, expected):
    assert normalize_url(url) == expected


def _doc(i: int) -> Document:
    return Document(url=f"https://s.org/{i}", final_url=f"https://s.org/{i}", text=f"text {i}", content_type="text/html",
                    status=200, bytes=6, fetched_at="2024-01-01T00:00:00+00:00", cache_key=page_key(f"https://s.org/{i}", None))


def test_concurrent_writers_do_not_corrupt_the_cache(tmp_path):
    root = tmp_path / "cache"
    caches = [WebCache(root), WebCache(root)]  # two handles, as two components of one run would have
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        cache = caches[t % 2]
        try:
            for i in range(40):
                n = (t * 7 + i) % 60  # overlapping keys and identical blobs across threads
                doc = _doc(n)
                cache.put_page(doc.cache_key, doc.url, None, doc, body=b"body %d" % n)
                fail = Failure(kind="not_found", url=f"https://s.org/x{n}", message="HTTP 404", cache_key=page_key(f"https://s.org/x{n}", None))
                cache.put_page(fail.cache_key, fail.url, None, fail)
                cache.put_search("local", f"q{n}", {"num": 3}, None, [SearchResult(title="t", link=doc.url, position=1)])
                assert cache.get_page(doc.cache_key).text == f"text {n}"
        except BaseException as e:  # noqa: BLE001 - surfaced by the main thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    con = sqlite3.connect(root / "index.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT COUNT(*) FROM pages").fetchone()[0] == 120
    assert con.execute("SELECT COUNT(*) FROM searches").fetchone()[0] == 60
    fresh = WebCache(root)
    for n in range(60):
        doc = fresh.get_page(page_key(f"https://s.org/{n}", None))
        assert doc.text == f"text {n}" and fresh.get_blob(doc.body_sha256) == b"body %d" % n
    assert not list((root / "blobs").rglob(".tmp-*"))


class CountingBackend:
    def __init__(self):
        self.calls = 0

    async def search(self, query, *, num, as_of):
        self.calls += 1
        return [SearchResult(title=f"{query} {i}", link=f"https://r.org/{i}", position=i) for i in range(1, num + 1)]


def test_search_record_then_replay(tmp_path, no_network):
    backend = CountingBackend()
    rec = Searcher(make_config(tmp_path, mode="record", search={"backend": "searxng"}), backend=backend)
    recorded = asyncio.run(rec.search("solar output", num=3))
    assert backend.calls == 1 and len(recorded) == 3
    replay = Searcher(make_config(tmp_path, mode="replay", search={"backend": "searxng"}))
    assert asyncio.run(replay.search("solar output", num=3)) == recorded
    assert replay._backend is None  # the real backend was never built
    with pytest.raises(ReplayMiss, match="wind"):
        asyncio.run(replay.search("wind", num=3))
    # The replay backend serves the same recording whatever backend recorded it.
    via_backend = Searcher(make_config(tmp_path, mode="live", search={"backend": "replay"}))
    assert asyncio.run(via_backend.search("solar output", num=3)) == recorded
    with pytest.raises(ReplayMiss):
        asyncio.run(via_backend.search("solar output", num=5))


# -- tampering: every change to a recorded entry is a typed cache_corrupt failure, never content -------
def _record_one(server, tmp_path) -> tuple[Document, str]:
    server.routes["/p"] = Reply(body=page(7))
    (doc,), _ = fetch_all(make_config(tmp_path, mode="record", respect_robots=False), [server.url("/p")])
    assert doc.ok and doc.body_sha256
    return doc, server.url("/p")


def _replay(tmp_path, url):
    (result,), _ = fetch_all(make_config(tmp_path, mode="replay"), [url], connector=RecordingConnector(refuse=True))
    return result


def _verify_cli(tmp_path, capsys) -> tuple[int, str]:
    code = main(["cache", "verify", str(tmp_path / "cache")])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_untouched_cache_replays_and_verifies(server, tmp_path, capsys):
    doc, url = _record_one(server, tmp_path)
    assert _replay(tmp_path, url).text == doc.text
    code, text = _verify_cli(tmp_path, capsys)
    assert code == 0 and "1 pages" in text and ": ok" in text, text


def test_overwritten_blob_is_cache_corrupt(server, tmp_path, capsys):
    doc, url = _record_one(server, tmp_path)
    WebCache(tmp_path / "cache").blob_path(doc.body_sha256).write_bytes(page(8))
    result = _replay(tmp_path, url)
    assert not result.ok and result.kind == "cache_corrupt" and "altered" in result.message, result
    code, text = _verify_cli(tmp_path, capsys)
    assert code == 1 and "altered" in text and "CORRUPT" in text, text


def test_deleted_blob_is_cache_corrupt(server, tmp_path, capsys):
    doc, url = _record_one(server, tmp_path)
    WebCache(tmp_path / "cache").blob_path(doc.body_sha256).unlink()
    result = _replay(tmp_path, url)
    assert result.kind == "cache_corrupt" and "missing" in result.message, result
    code, text = _verify_cli(tmp_path, capsys)
    assert code == 1 and "missing" in text, text


def test_text_edited_in_the_index_is_cache_corrupt(server, tmp_path, capsys):
    doc, url = _record_one(server, tmp_path)
    con = sqlite3.connect(tmp_path / "cache" / "index.sqlite")
    with con:
        n = con.execute("UPDATE pages SET result = replace(result, 'Recorded content', 'Forged content')").rowcount
    con.close()
    assert n == 1
    result = _replay(tmp_path, url)
    assert result.kind == "cache_corrupt" and "edited" in result.message, result
    assert "Forged" not in result.render()
    code, text = _verify_cli(tmp_path, capsys)
    assert code == 1 and "edited" in text, text


def test_body_sha_swapped_in_the_index_is_cache_corrupt(server, tmp_path):
    doc, url = _record_one(server, tmp_path)
    cache = WebCache(tmp_path / "cache")
    other = cache.put_blob(page(9))
    con = sqlite3.connect(tmp_path / "cache" / "index.sqlite")
    with con:
        con.execute("UPDATE pages SET body_sha256 = ?", (other,))
    con.close()
    assert _replay(tmp_path, url).kind == "cache_corrupt"


def test_edited_search_row_is_cache_corrupt(tmp_path, capsys):
    from lifesearch_local.web.cache import CacheCorrupt

    cache = WebCache(tmp_path / "cache")
    cache.put_search("searxng", "solar", {"num": 1}, None, [SearchResult(title="t", link="https://a.org/", position=1)])
    assert cache.find_search("solar", {"num": 1}, None, "searxng")[0].link == "https://a.org/"
    con = sqlite3.connect(tmp_path / "cache" / "index.sqlite")
    with con:
        con.execute("UPDATE searches SET results = replace(results, 'a.org', 'evil.org')")
    con.close()
    with pytest.raises(CacheCorrupt, match="edited"):
        WebCache(tmp_path / "cache").find_search("solar", {"num": 1}, None, "searxng")
    code, text = _verify_cli(tmp_path, capsys)
    assert code == 1 and "search" in text, text


def test_verify_refuses_a_directory_that_is_not_a_cache(tmp_path, capsys):
    assert main(["cache", "verify", str(tmp_path)]) == 2
    assert "not a web cache" in capsys.readouterr().err
    assert not (tmp_path / "blobs").exists()  # verifying creates nothing


def test_a_cache_of_an_earlier_version_is_refused_in_one_line(tmp_path, capsys):
    from lifesearch_local.cli import main

    root = tmp_path / "cache"
    cache = WebCache(root)
    doc = _doc(1).model_copy(update={"body_sha256": cache.put_blob(b"body 1")})
    cache.close()
    con = sqlite3.connect(root / "index.sqlite")
    with con:  # the schema of the first release: no row_sha256 column, no key, no meta table
        con.execute("DROP TABLE meta")
        con.execute("DROP TABLE pages")
        con.execute("CREATE TABLE pages (key TEXT PRIMARY KEY, url TEXT NOT NULL, as_of TEXT NOT NULL, result TEXT NOT NULL, "
                    "body_sha256 TEXT, created TEXT NOT NULL)")
        con.execute("INSERT INTO pages VALUES (?, ?, '', ?, ?, '')", (doc.cache_key, doc.url, doc.model_dump_json(), doc.body_sha256))
    con.close()
    (root / "cache.key").unlink()
    with pytest.raises(LifesearchError, match="earlier version.*fresh cache directory"):
        WebCache(root)
    assert not (root / "cache.key").exists()  # refused before anything is made
    assert main(["cache", "verify", str(root)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fresh cache directory" in err and "Traceback" not in err, err


def test_a_garbage_index_is_one_error_and_verify_says_corrupt(tmp_path, capsys):
    from lifesearch_local.web.cache import CacheCorrupt

    root = tmp_path / "cache"
    WebCache(root).close()
    (root / "index.sqlite").write_bytes(b"this is not a database" * 100)
    for extra in ("-wal", "-shm"):
        (root / f"index.sqlite{extra}").unlink(missing_ok=True)
    with pytest.raises(CacheCorrupt, match="cannot be read"):
        WebCache(root)
    code, text = _verify_cli(tmp_path, capsys)
    assert code == 1 and "CORRUPT" in text


def test_a_blob_replaced_by_a_directory_is_cache_corrupt(server, tmp_path):
    doc, url = _record_one(server, tmp_path)
    path = WebCache(tmp_path / "cache").blob_path(doc.body_sha256)
    path.unlink()
    path.mkdir()
    assert _replay(tmp_path, url).kind == "cache_corrupt"


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_a_blob_that_is_a_fifo_or_a_symlink_to_dev_zero_is_cache_corrupt(tmp_path, kind):
    script = f"""
import os, sys
sys.path.insert(0, {str(ROOT)!r})
from lifesearch_local.web.cache import WebCache
cache = WebCache({str(tmp_path / 'cache')!r})
sha = cache._db().execute("SELECT body_sha256 FROM pages").fetchone()[0]
path = cache.blob_path(sha)
path.unlink()
if {kind!r} == "fifo":
    os.mkfifo(path)
else:
    os.symlink("/dev/zero", path)
res = cache.get_page("k1")
print(res.kind, "|", res.message)
rep = cache.verify()
print(rep.ok, "|", rep.problems)
"""
    cache_with_page(tmp_path / "cache")[0].close()
    # in a child with a memory cap and a timeout: the break is a hang (FIFO) or memory exhaustion (/dev/zero)
    res = subprocess.run([sys.executable, "-c", "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
                          + script], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    first, second = res.stdout.splitlines()[:2]
    assert first.startswith("cache_corrupt |"), res.stdout
    assert "not a plain file" in first or "symbolic link" in first
    assert second.startswith("False |")


@pytest.mark.parametrize("how", ["null_checksum", "recomputed_checksum", "null_mac"])
def test_a_forged_cache_row_is_detected(tmp_path, capsys, how):
    from lifesearch_local.web.cache import row_sha256

    root = tmp_path / "cache"
    cache, doc = cache_with_page(root)
    cache.close()
    forged = doc.model_copy(update={"text": "FORGED text", "body_sha256": cache._db().execute(
        "SELECT body_sha256 FROM pages").fetchone()[0]}).model_dump_json()
    con = sqlite3.connect(root / "index.sqlite")
    key, url, as_of, body = con.execute("SELECT key, url, as_of, body_sha256 FROM pages").fetchone()
    con.close()
    checksum = "NULL" if how == "null_checksum" else f"'{row_sha256(key, url, as_of, forged, body)}'"
    con = sqlite3.connect(root / "index.sqlite")
    keyed = "row_mac" in {r[1] for r in con.execute("PRAGMA table_info(pages)")}
    con.close()
    mac = ", row_mac = NULL" if keyed and how != "recomputed_checksum" else ""  # the forger blanks it too
    forge_index(root, f"UPDATE pages SET result = '{forged.replace(chr(39), chr(39) * 2)}', row_sha256 = {checksum}{mac}")
    got = WebCache(root).get_page("k1")
    assert got.kind == "cache_corrupt", got
    code, out, err = run_cli(["cache", "verify", str(root)], capsys)
    assert code == 1 and "CORRUPT" in err and "row MAC" in out, out + err


@pytest.mark.parametrize("where", ["blobs", "blobs/ab"])
@pytest.mark.parametrize("how", ["mode 0777", "another user's", "a link"])
def test_a_blob_directory_others_could_plant_in_is_refused(tmp_path, where, how):
    """The index's ownership rule holds for the directories blobs are written into: a blob planted by
    another user there would be served as a page (a blob's name is only a hash anyone can compute)."""
    import hashlib
    import os

    from lifesearch_local.web.cache_key import CacheNotPrivate

    root = tmp_path / "cache"
    WebCache(root).close()
    d = root / where
    d.mkdir(exist_ok=True)
    if how == "mode 0777":
        d.chmod(0o777)
    elif how == "another user's":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        os.chown(d, 4242, -1)
    else:
        d.rmdir()
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        d.symlink_to(tmp_path / "elsewhere")
    data = next(b for i in range(100_000) if hashlib.sha256(b := str(i).encode()).hexdigest().startswith("ab"))
    with pytest.raises(CacheNotPrivate) as e:
        c = WebCache(root)
        c.put_blob(data)
    assert "\n" not in str(e.value) and str(d) in str(e.value)
    assert not (tmp_path / "elsewhere").exists() or list((tmp_path / "elsewhere").iterdir()) == []
