"""The one concurrency helper: asyncio + a semaphore + a progress bar."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from lifesearch_local.runtime.progress import progress_bar

T = TypeVar("T")
R = TypeVar("R")


async def map_bounded(
    fn: Callable[[T], Awaitable[R]],
    items: Iterable[T],
    *,
    limit: int,
    desc: str = "",
    show: bool = True,
    unit: str = "item",
) -> list[R]:
    """Run `fn` over items with at most `limit` in flight; results keep the input order.

    The first exception cancels the rest and propagates; callers that want per-item
    failures return them as values instead.
    """
    items = list(items)
    sem = asyncio.Semaphore(max(1, limit))
    with progress_bar(len(items), desc=desc, unit=unit, show=show) as bar:

        async def one(x: T) -> R:
            async with sem:
                r = await fn(x)
            bar.advance(1)
            return r

        tasks = [asyncio.ensure_future(one(x)) for x in items]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise


def run_sync(coro_factory: Callable[[], Awaitable[R]]) -> R:
    """Run a coroutine from synchronous code (the CLI)."""
    return asyncio.run(coro_factory())  # type: ignore[arg-type]


__all__: Sequence[str] = ["map_bounded", "run_sync"]
