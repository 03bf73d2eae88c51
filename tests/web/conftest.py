"""Fixtures for the web tests: a loopback server, a config that allows only loopback, helpers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpcore
import pytest

from lifesearch_local.web.config import FetchLimits, WebConfig
from lifesearch_local.web.fetcher import Fetcher
from lifesearch_local.web.ssrf import StaticResolver

from .server import LoopbackServer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "web"


@pytest.fixture
def server():
    with LoopbackServer() as s:
        yield s


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
