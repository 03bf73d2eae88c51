"""Concurrency limits (global and per host), and the time cap counted from a request's start."""

from __future__ import annotations

import asyncio
import threading

from lifesearch_local.web.fetcher import Fetcher
from lifesearch_local.web.ssrf import StaticResolver
from tests.helpers.web import NAMES, make_config
from tests.helpers.web_server import Reply, Request

PAGE = b"<html><body><article><p>" + b"Content for the limits test. " * 20 + b"</p></article></body></html>"


class InFlight:
    """A route that holds each request for `hold` seconds and records the most held at once."""

    def __init__(self, server, hold: float):
        self.server, self.hold, self.now, self.peak = server, hold, 0, 0
        self.lock = threading.Lock()

    def __call__(self, req: Request) -> Reply:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        self.server.sleep(self.hold)
        with self.lock:
            self.now -= 1
        return Reply(body=PAGE)


def run_many(config, urls):
    async def go():
        async with Fetcher(config, resolver=StaticResolver(NAMES)) as f:
            return await f.fetch_many(urls)

    return asyncio.run(go())


def test_per_host_limit(server):
    route = server.routes["/slow"] = InFlight(server, 0.1)
    config = make_config(respect_robots=False, concurrency=8, per_host=2)
    results = run_many(config, [server.url("/slow") + f"?i={i}" for i in range(6)])
    assert all(r.ok for r in results) and route.peak == 2


def test_global_limit_across_hosts(server):
    route = server.routes["/slow"] = InFlight(server, 0.1)
    config = make_config(respect_robots=False, concurrency=3, per_host=4)
    hosts = ["127.0.0.1", "pages.test", "other.test"]
    results = run_many(config, [server.url("/slow", host=h) + f"?i={i}" for h in hosts for i in range(3)])
    assert all(r.ok for r in results) and route.peak == 3


def test_time_queued_behind_the_limits_does_not_count(server):
    server.routes["/slow"] = InFlight(server, 0.3)
    # Three 0.3 s requests one at a time take 0.9 s, over the 0.5 s cap, yet none starts late enough to fail.
    config = make_config(respect_robots=False, per_host=1, limits={"timeout_s": 0.5})
    results = run_many(config, [server.url("/slow") + f"?i={i}" for i in range(3)])
    assert [r.ok for r in results] == [True, True, True]
