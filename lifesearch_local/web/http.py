"""One guarded GET: manual redirects re-checked per hop, robots.txt, caps, limits, bounded retries."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import email.utils
import hashlib
import time
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpcore
import httpx

from lifesearch_local.web.config import WebConfig
from lifesearch_local.web.decode import (
    BoundedDecoder,
    TooLarge,
    UnsupportedEncoding,
    charset_param,
    decode_text,
)
from lifesearch_local.web.extract import is_challenge, media_type
from lifesearch_local.web.records import FailureKind, FetchError
from lifesearch_local.web.robots import RobotsCache
from lifesearch_local.web.ssrf import (
    AddressPolicy,
    GuardedBackend,
    GuardedTransport,
    ResolveError,
    Resolver,
    SystemResolver,
    UnsafeAddressError,
    check_scheme,
)
from serving import RetryableError, RetryPolicy, aretry, retryable_status

REDIRECTS = (301, 302, 303, 307, 308)
STATUS_KINDS: dict[int, FailureKind] = {401: "blocked", 403: "blocked", 451: "blocked", 402: "paywall", 404: "not_found", 410: "not_found"}
ERROR_BODY_LIMIT = 256_000  # enough of an error page to recognise a challenge
ACCEPT = "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8,*/*;q=0.5"

# Exceptions that end a fetch, by class (looked up along the MRO), and the failure they become.
EXCEPTION_KINDS: dict[type[BaseException], FailureKind] = {
    UnsafeAddressError: "unsafe_address",
    ResolveError: "network_error",
    TooLarge: "too_large",
    UnsupportedEncoding: "unsupported_type",
    zlib.error: "http_error",  # a corrupt gzip/deflate body
    httpx.InvalidURL: "unsafe_address",
    httpx.UnsupportedProtocol: "unsafe_address",
    httpx.TimeoutException: "timeout",
    TimeoutError: "timeout",
    asyncio.TimeoutError: "timeout",  # a separate class before Python 3.11
    httpx.TransportError: "network_error",
    httpcore.NetworkError: "network_error",
    OSError: "network_error",
}


class _Retry(RetryableError):
    """One failed attempt worth another; carries the failure to report if none is left."""

    def __init__(self, failure: FetchError, delay: float | None = None):
        super().__init__(failure.message, delay)
        self.failure = failure


def kind_of(exc: BaseException) -> FailureKind | None:
    return next((EXCEPTION_KINDS[c] for c in type(exc).__mro__ if c in EXCEPTION_KINDS), None)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    when = when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
    return max((when - dt.datetime.now(dt.timezone.utc)).total_seconds(), 0.0)


@dataclass
class RawResponse:
    """The final response of a GET: body already content-decoded and within the cap."""

    url: str
    status: int
    headers: httpx.Headers
    body: bytes
    raw_sha1_b32: str
    elapsed_ms: float

    @property
    def media_type(self) -> str:
        return media_type(self.headers.get("content-type"), self.body)

    @property
    def charset(self) -> str | None:
        return charset_param(self.headers.get("content-type"))

    def text(self) -> str:
        return decode_text(self.body, self.charset, html=False)[0]


@dataclass
class _Clock:
    """The total-time cap of one GET, started when its first request holds a connection slot
    (time queued behind the concurrency limits does not count)."""

    total: float
    start: float | None = None

    def remaining(self) -> float:
        now = time.monotonic()
        if self.start is None:
            self.start = now
        return self.total - (now - self.start)


@dataclass
class _Hop:
    location: str | None = None
    response: RawResponse | None = None


class HttpClient:
    """Guarded GETs with the config's limits; the httpx client is made only when first needed."""

    def __init__(self, config: WebConfig, *, resolver: Resolver | None = None, connector: httpcore.AsyncNetworkBackend | None = None):
        self.config, self.limits = config, config.limits
        policy = AddressPolicy.from_config(config.allow_private, config.allow_networks)
        self._backend = GuardedBackend(policy, resolver or SystemResolver(), connector)
        self._client: httpx.AsyncClient | None = None
        self._global = asyncio.Semaphore(config.concurrency)
        self._per_host: dict[str, asyncio.Semaphore] = {}
        self.robots = RobotsCache(config.user_agent, self._get_robots) if config.respect_robots else None
        self.retries = 0
        self.policy = RetryPolicy(attempts=self.limits.retries + 1, base_delay=self.limits.backoff_s, max_delay=self.limits.max_backoff_s)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            transport = GuardedTransport(self._backend, http2=self.config.http2, max_connections=2 * self.config.concurrency)
            headers = {"User-Agent": self.config.user_agent, "Accept": ACCEPT, "Accept-Encoding": "gzip, deflate"}
            timeout = httpx.Timeout(self.limits.timeout_s, connect=self.limits.connect_timeout_s)
            self._client = httpx.AsyncClient(transport=transport, headers=headers, timeout=timeout, follow_redirects=False, trust_env=False)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def get(self, url: str, *, robots: bool = True, limit: int | None = None, accept: Callable[[str], bool] | None = None) -> RawResponse:
        """GET `url` following redirects by hand; every outcome but a response is a FetchError."""
        try:
            return await self._chain(url, robots, limit or self.limits.max_bytes, accept)
        except FetchError:
            raise
        except Exception as e:
            kind = kind_of(e)
            if kind is None:
                raise
            msg = f"no complete response within {self.limits.timeout_s:g}s" if kind == "timeout" else str(e) or type(e).__name__
            raise FetchError(kind, msg) from e

    async def _chain(self, url: str, robots: bool, limit: int, accept: Callable[[str], bool] | None) -> RawResponse:
        current, seen, clock = httpx.URL(url), set(), _Clock(self.limits.timeout_s)
        for _ in range(self.limits.max_redirects + 1):
            check_scheme(current)
            if str(current) in seen:
                raise FetchError("too_many_redirects", f"redirect loop back to {current}", final_url=str(current))
            seen.add(str(current))
            if robots and self.robots is not None and not await self.robots.allowed(current):
                raise FetchError("robots_disallowed", f"robots.txt disallows {current.path}", final_url=str(current))
            hop = await self._hop(current, limit, accept, clock)
            if hop.response is not None:
                return hop.response
            current = current.join(hop.location)
        raise FetchError("too_many_redirects", f"more than {self.limits.max_redirects} redirects", final_url=str(current))

    async def _hop(self, url: httpx.URL, limit: int, accept: Callable[[str], bool] | None, clock: _Clock) -> _Hop:
        attempts = 0

        async def attempt() -> _Hop:
            nonlocal attempts
            attempts += 1
            self.retries += attempts > 1
            async with self._slot(url.host):
                left = clock.remaining()
                if left <= 0:
                    raise TimeoutError
                return await asyncio.wait_for(self._exchange(url, limit, accept), left)

        try:  # not a timeout: the fetch's one clock covers every attempt, so a timeout means it has run out
            return await aretry(attempt, self.policy, retry_on=lambda e: isinstance(e, _Retry))
        except _Retry as r:
            raise r.failure from None

    @contextlib.asynccontextmanager
    async def _slot(self, host: str) -> AsyncIterator[None]:
        # Per-host first, so a slow host never holds global slots while it waits.
        per = self._per_host.setdefault(host, asyncio.Semaphore(self.config.per_host))
        async with per, self._global:
            yield

    async def _exchange(self, url: httpx.URL, limit: int, accept: Callable[[str], bool] | None) -> _Hop:
        t0 = time.perf_counter()
        client = self._http()
        try:
            resp = await client.send(client.build_request("GET", url), stream=True)
            try:
                return await self._handle(url, resp, limit, accept, t0)
            finally:
                await resp.aclose()
        except httpx.TimeoutException:
            raise
        except httpx.TransportError as e:
            raise _Retry(FetchError("network_error", str(e) or type(e).__name__, final_url=str(url))) from e

    async def _handle(self, url: httpx.URL, resp: httpx.Response, limit: int, accept: Callable[[str], bool] | None, t0: float) -> _Hop:
        status = resp.status_code
        if status in REDIRECTS and resp.headers.get("location"):
            return _Hop(location=resp.headers["location"])
        if status >= 400:
            body, _ = await _read(resp, min(limit, ERROR_BODY_LIMIT), truncate=True)
            self._raise_for_status(url, status, resp.headers, body)
        declared = media_type(resp.headers.get("content-type"))
        if accept is not None and declared != "application/octet-stream" and not accept(declared):
            raise FetchError("unsupported_type", f"content type {declared}", status=status, final_url=str(url))
        length = resp.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise FetchError("too_large", f"Content-Length {length} over {limit} bytes", status=status, final_url=str(url))
        body, sha1 = await _read(resp, limit)
        ms = (time.perf_counter() - t0) * 1000
        return _Hop(response=RawResponse(str(url), status, resp.headers, body, sha1, ms))

    def _raise_for_status(self, url: httpx.URL, status: int, headers: httpx.Headers, body: bytes) -> None:
        page = body.decode("utf-8", "replace")
        flagged = headers.get("cf-mitigated", "").lower() == "challenge"
        if is_challenge(page, status, "", flagged):
            raise FetchError("challenge", f"HTTP {status}: a bot-check page, not content", status, str(url))
        if retryable_status(status):
            delay = parse_retry_after(headers.get("retry-after"))
            failure = FetchError("http_error", f"HTTP {status}", status, str(url))
            if delay is not None and delay > self.limits.max_backoff_s:
                failure.message += f" (Retry-After {delay:g}s is over the {self.limits.max_backoff_s:g}s cap)"
                raise failure
            raise _Retry(failure, delay)
        raise FetchError(STATUS_KINDS.get(status, "http_error"), f"HTTP {status}", status, str(url))

    async def _get_robots(self, url: str) -> tuple[int, str]:
        r = await self.get(url, robots=False, limit=512_000)
        return r.status, r.text()


async def _read(resp: httpx.Response, limit: int, *, truncate: bool = False) -> tuple[bytes, str]:
    """(content-decoded body, base32 SHA-1 of the raw bytes); TooLarge past `limit` unless truncating."""
    decoder = BoundedDecoder(resp.headers.get("content-encoding", ""), limit)
    parts: list[bytes] = []
    raw = 0
    sha1 = hashlib.sha1()
    try:
        async for chunk in resp.aiter_raw():
            raw += len(chunk)
            if raw > limit:
                raise TooLarge(f"body over {limit} bytes")
            sha1.update(chunk)
            parts.append(decoder.feed(chunk))
        parts.append(decoder.flush())
    except TooLarge:
        if not truncate:
            raise
    return b"".join(parts), base64.b32encode(sha1.digest()).decode()
