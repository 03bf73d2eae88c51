"""robots.txt by RFC 9309: fetched once per origin, parsed by Protego, its answer cached for a bounded time.

What a fetch of `origin/robots.txt` means (RFC 9309 section 2.3.1):

- 2xx: its rules, parsed by Protego (the `*` and `$` wildcards, the longest match wins, an
  Allow wins a tie). At least the first 500 KiB are parsed (the RFC's floor): a longer file is
  cut there and its first rules still hold, never read as "no rules".
- Redirects are followed by the guarded GET (each hop re-checked), five hops by default; past
  them the RFC lets a crawler take the file as unavailable, as a 4xx.
- 4xx (unavailable): no rules, everything allowed.
- 5xx, a timeout, a network error, anything else (unreachable): everything disallowed.

An answer is kept `ttl_s` (24 h by default, the RFC's ceiling for using a cached copy), an
unreachable one `error_ttl_s` (a server that was down is asked again soon), and at most
`max_origins` origins are kept (the oldest answer goes first).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import httpx

from lifesearch_local.web.records import FetchError

# (status, text) of GET origin/robots.txt, at least ROBOTS_PARSE_BYTES of it when longer;
# raises FetchError (kind unsafe_address for a refused host).
RobotsGetter = Callable[[str], Awaitable[tuple[int, str]]]
ROBOTS_PARSE_BYTES = 500 * 1024  # RFC 9309 2.5: parse at least the first 500 KiB
TTL_S = 24 * 3600.0  # RFC 9309 2.4: a cached robots.txt should not be used for more than 24 hours
ERROR_TTL_S = 300.0
MAX_ORIGINS = 4096


class Rules:
    """One origin's answer: its parsed rules, or allow-all / disallow-all."""

    def __init__(self, parser: object | None = None, *, allow_all: bool = False, why: str = ""):
        self.parser, self.allow_all, self.why = parser, allow_all, why

    def allows(self, url: str, user_agent: str) -> bool:
        if self.parser is None:
            return self.allow_all
        return bool(self.parser.can_fetch(url, user_agent))  # type: ignore[attr-defined]


def origin(url: httpx.URL) -> str:
    """scheme://host[:port], an IPv6 literal in brackets (without them the port is unparseable)."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{host}{port}"


def rules_for(status: int | None, text: str | None, error: FetchError | None = None) -> Rules:
    """The RFC's reading of one robots.txt fetch: its rules (2xx), allow-all (4xx, or more
    redirects than followed), disallow-all (5xx, unreachable, anything else)."""
    from protego import Protego

    if error is not None:
        status = error.status
        if error.kind == "too_many_redirects":
            return Rules(allow_all=True, why="robots.txt past the redirects followed: unavailable")
    if status is not None and 200 <= status < 300 and text is not None:
        return Rules(Protego.parse(text[:ROBOTS_PARSE_BYTES] if len(text) > ROBOTS_PARSE_BYTES else text))
    if status is not None and 400 <= status < 500:
        return Rules(allow_all=True, why=f"robots.txt HTTP {status}: unavailable")
    reason = f"HTTP {status}" if status is not None else (error.kind if error is not None else "no answer")
    return Rules(allow_all=False, why=f"robots.txt unreachable ({reason}): everything disallowed")


class RobotsCache:
    """Answers "may our user agent fetch this URL?" per origin, fetching each robots.txt once per lifetime."""

    def __init__(self, user_agent: str, get: RobotsGetter, *, ttl_s: float = TTL_S, error_ttl_s: float = ERROR_TTL_S,
                 max_origins: int = MAX_ORIGINS, clock: Callable[[], float] = time.monotonic):
        self.user_agent = user_agent
        self._get = get
        self._ttl, self._error_ttl, self._max, self._clock = ttl_s, error_ttl_s, max_origins, clock
        self._rules: OrderedDict[str, tuple[float, Rules]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    async def allowed(self, url: httpx.URL) -> bool:
        return (await self.rules(url)).allows(str(url), self.user_agent)

    async def rules(self, url: httpx.URL) -> Rules:
        """The answer for `url`'s origin, fetched when absent or expired."""
        key = origin(url)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # concurrent fetches to one origin wait for one robots.txt
            held = self._rules.get(key)
            if held is None or held[0] <= self._clock():
                rules = await self._load(key)
                ttl = self._error_ttl if rules.parser is None and not rules.allow_all else self._ttl
                self._rules[key] = (self._clock() + ttl, rules)
                self._rules.move_to_end(key)
                while len(self._rules) > self._max:
                    old, _ = self._rules.popitem(last=False)
                    self._locks.pop(old, None)
            return self._rules[key][1]

    async def _load(self, key: str) -> Rules:
        try:
            status, text = await self._get(f"{key}/robots.txt")
        except FetchError as e:
            if e.kind == "unsafe_address":
                raise
            return rules_for(None, None, e)
        return rules_for(status, text)
