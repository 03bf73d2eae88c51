"""What every search backend is: one verb returning Serper-shaped results; shared HTTP helper."""

from __future__ import annotations

import datetime as dt
from typing import Any, Protocol

from lifesearch_local.errors import LifesearchError
from lifesearch_local.web.config import SearchConfig
from lifesearch_local.web.records import SearchResult
from serving import (
    CONFIG_STATUSES,
    JSONError,
    RetryableError,
    RetryPolicy,
    aretry,
    loads,
    redact,
    retryable_status,
)


class SearchError(LifesearchError):
    """A search backend that cannot answer (down, bad key, bad answer)."""


class SearchBackend(Protocol):
    """A search engine: results for a query, at most `num`, none dated after `as_of`."""

    async def search(self, query: str, *, num: int, as_of: dt.date | None) -> list[SearchResult]: ...


def ranked(results: list[SearchResult], num: int) -> list[SearchResult]:
    """The first `num` results with positions renumbered 1..n."""
    return [r.model_copy(update={"position": i}) for i, r in enumerate(results[:num], 1)]


def policy(config: SearchConfig) -> RetryPolicy:
    return RetryPolicy(attempts=config.retries + 1, base_delay=config.backoff_s, max_delay=10.0)


async def request_json(method: str, url: str, *, config: SearchConfig, **kw: Any) -> Any:
    """One JSON request to a configured endpoint, retried (bounded) on 429, 5xx and connection errors.

    Search endpoints come from the operator's configuration, not from a model, so they do not go
    through the SSRF guard (a self-hosted SearXNG usually listens on loopback).
    """
    import httpx

    async def once() -> Any:
        async with httpx.AsyncClient(timeout=config.timeout_s) as client:
            try:
                resp = await client.request(method, url, **kw)
            except httpx.TransportError as e:
                raise RetryableError(redact(f"search endpoint {url}: {type(e).__name__}: {e}")) from None
        if retryable_status(resp.status_code):
            raise RetryableError(f"search endpoint {url}: HTTP {resp.status_code}")
        if resp.status_code >= 400:
            # The body may echo the key (Serper's 403 does): redact it whole before cutting it.
            body = " ".join(redact(resp.text).split())[:200]
            hint = CONFIG_STATUSES.get(resp.status_code)
            raise SearchError(f"search endpoint {url}: HTTP {resp.status_code}: {body}" + (f" ({hint})" if hint else ""))
        try:
            return loads(resp.content)
        except JSONError as e:
            raise SearchError(f"search endpoint {url}: the answer is not usable JSON ({e})") from None

    try:
        return await aretry(once, policy(config))
    except RetryableError as e:
        raise SearchError(redact(str(e))) from None
