"""The one bounded retry helper (sync and async) and the one rule of what is worth another attempt."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """At most `attempts` calls; exponential backoff with jitter, capped at `max_delay`."""

    attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    jitter: float = 0.1

    def delay(self, attempt: int, hint: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based); `hint` is e.g. Retry-After."""
        if hint is not None:
            return min(max(hint, 0.0), self.max_delay)
        d = min(self.base_delay * (2 ** (attempt - 1)), self.max_delay)
        return d * (1 + random.uniform(-self.jitter, self.jitter))


class RetryableError(Exception):
    """Raise (or wrap) this to ask for another attempt; `delay` overrides the backoff."""

    def __init__(self, message: str, delay: float | None = None):
        super().__init__(message)
        self.delay = delay


def retryable_status(status: int | None) -> bool:
    """HTTP 429 (slow down) or 5xx (the server's own trouble): the same request can pass later.
    Any other 4xx (a bad key, URL, model, a prompt over the context) fails the same way again."""
    return status is not None and (status == 429 or 500 <= status < 600)


def transient(exc: BaseException) -> bool:
    """Whether the same call can pass on another attempt: a RetryableError, a timeout, a lost
    connection (built-in or httpx), or an error that says it is transient (`EndpointError` after
    its own attempts at a timeout or a 429/5xx). A programming error (TypeError, KeyError, …), a
    context-length refusal or any other 4xx would fail again, so it is not."""
    if isinstance(exc, (RetryableError, TimeoutError, ConnectionError)):  # asyncio.TimeoutError is TimeoutError
        return True
    if getattr(exc, "transient", False) is True:
        return True
    httpx = sys.modules.get("httpx")  # an httpx error can only come from a process that imported it
    return httpx is not None and isinstance(exc, (httpx.TimeoutException, httpx.NetworkError))


def retry(fn: Callable[[], T], policy: RetryPolicy = RetryPolicy(),
          retry_on: Callable[[BaseException], bool] = transient) -> T:
    """Call `fn` until it returns, raises what `retry_on` does not accept, or the attempts run out;
    re-raise the last error."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except Exception as e:
            if attempt == policy.attempts or not retry_on(e):
                raise
            time.sleep(policy.delay(attempt, getattr(e, "delay", None)))
    raise AssertionError("unreachable")


async def aretry(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy = RetryPolicy(),
    retry_on: Callable[[BaseException], bool] = transient,
) -> T:
    """Async twin of `retry`."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return await fn()
        except Exception as e:
            if attempt == policy.attempts or not retry_on(e):
                raise
            await asyncio.sleep(policy.delay(attempt, getattr(e, "delay", None)))
    raise AssertionError("unreachable")
