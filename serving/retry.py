"""The one bounded retry helper (sync and async): never an unbounded loop around a call."""

from __future__ import annotations

import asyncio
import random
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


def retry(fn: Callable[[], T], policy: RetryPolicy = RetryPolicy(), retry_on: tuple[type[BaseException], ...] = (RetryableError,)) -> T:
    """Call `fn` until it returns or raises a non-retryable error; re-raise the last error."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except retry_on as e:
            if attempt == policy.attempts:
                raise
            time.sleep(policy.delay(attempt, getattr(e, "delay", None)))
    raise AssertionError("unreachable")


async def aretry(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy = RetryPolicy(),
    retry_on: tuple[type[BaseException], ...] = (RetryableError,),
) -> T:
    """Async twin of `retry`."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return await fn()
        except retry_on as e:
            if attempt == policy.attempts:
                raise
            await asyncio.sleep(policy.delay(attempt, getattr(e, "delay", None)))
    raise AssertionError("unreachable")
