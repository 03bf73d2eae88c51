"""robots.txt, fetched once per origin and cached for the fetcher's lifetime."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.robotparser import RobotFileParser

import httpx

from lifesearch_local.web.records import FetchError

# (status, text) of GET origin/robots.txt; raises FetchError (kind unsafe_address) for a refused host.
RobotsGetter = Callable[[str], Awaitable[tuple[int, str]]]


def origin(url: httpx.URL) -> str:
    """scheme://host[:port], an IPv6 literal in brackets (without them the port is unparseable)."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{host}{port}"


class RobotsCache:
    """Answers "may our user agent fetch this URL?" per origin, fetching each robots.txt once."""

    def __init__(self, user_agent: str, get: RobotsGetter):
        self.user_agent = user_agent
        self._get = get
        self._rules: dict[str, RobotFileParser | None] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def allowed(self, url: httpx.URL) -> bool:
        key = origin(url)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # concurrent fetches to one origin wait for one robots.txt
            if key not in self._rules:
                self._rules[key] = await self._load(key)
        rules = self._rules[key]
        return rules is None or rules.can_fetch(self.user_agent, str(url))

    async def _load(self, key: str) -> RobotFileParser | None:
        """Parsed rules, or None for "no rules" (absent, any 4xx or 5xx, unreachable)."""
        try:
            status, text = await self._get(f"{key}/robots.txt")
        except FetchError as e:
            if e.kind == "unsafe_address":
                raise
            return None
        if not 200 <= status < 300:
            # As the major crawlers do: a missing or erroring robots.txt means no rules.
            return None
        rp = RobotFileParser()
        rp.parse(text.splitlines())
        return rp
