"""Web settings that allow only loopback, fetch helpers over a static resolver, and cache doctoring."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import httpcore

from lifesearch_local.web.cache import WebCache
from lifesearch_local.web.config import FetchLimits, WebConfig
from lifesearch_local.web.fetcher import Fetcher
from lifesearch_local.web.records import Document
from lifesearch_local.web.ssrf import StaticResolver
from tests.helpers.inputs import FIXTURES

WEB_FIXTURES = FIXTURES / "web"


def make_config(tmp_path: Path | None = None, **kw) -> WebConfig:
    """Loopback allowed (127.0.0.0/8 only), short caps, tiny backoff, a cache under tmp_path."""
    limits = {"timeout_s": 3.0, "connect_timeout_s": 2.0, "retries": 2, "backoff_s": 0.01, "max_backoff_s": 2.0, **kw.pop("limits", {})}
    base = {"allow_networks": ["127.0.0.0/8"], "limits": FetchLimits(**limits)}
    if tmp_path is not None:
        base["cache_dir"] = tmp_path / "cache"
    return WebConfig(**{**base, **kw})


class RecordingConnector(httpcore.AsyncNetworkBackend):
    """The real socket layer, recording every address it is asked to connect to."""

    def __init__(self, refuse: bool = False):
        self.inner, self.hosts, self.refuse = httpcore.AnyIOBackend(), [], refuse

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.hosts.append(host)
        if self.refuse:
            raise AssertionError(f"a connection to {host}:{port} was attempted")
        return await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise AssertionError("unix socket")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


# Names the tests resolve without DNS: two to loopback, the rest to addresses never connected to.
NAMES = {
    "pages.test": ["127.0.0.1"],
    "other.test": ["127.0.0.1"],
    "intranet.test": ["10.0.0.7"],
    "router.test": ["192.168.1.1"],
    "metadata.test": ["169.254.169.254"],
    "v6loop.test": ["::1"],
    "mapped.test": ["::ffff:10.0.0.7"],
    "mixed.test": ["93.184.216.34", "10.0.0.7"],
}


def fetch_all(config: WebConfig, urls: list[str], *, connector=None, as_of=None, names=None) -> tuple[list, Fetcher]:
    """Fetch URLs with a fresh fetcher (static resolver); returns (results, fetcher)."""

    async def go():
        f = Fetcher(config, as_of=as_of, resolver=StaticResolver(names or NAMES), connector=connector)
        async with f:
            return [await f.fetch(u) for u in urls], f

    return asyncio.run(go())


def fetch_one(config: WebConfig, url: str, **kw):
    return fetch_all(config, [url], **kw)[0][0]


def cache_with_page(root: Path) -> tuple[WebCache, Document]:
    """A cache at `root` holding one page under the key k1."""
    cache = WebCache(root)
    doc = Document(url="http://example.org/", final_url="http://example.org/", text="This is a page.", content_type="text/html",
                   status=200, bytes=6, fetched_at="2026-01-01T00:00:00+00:00", cache_key="k1", source="live")
    cache.put_page("k1", doc.url, None, doc, b"<html>")
    return cache, doc


def forge_index(root: Path, sql: str) -> None:
    """One SQL statement on the cache's index, as someone with write access to the files would run it."""
    con = sqlite3.connect(root / "index.sqlite")
    with con:
        con.execute(sql)
    con.close()
