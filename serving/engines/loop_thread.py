"""An event loop in a daemon thread, so that a synchronous caller can abandon a remote call at any point.

A blocking socket read cannot be interrupted from another thread; a coroutine can be cancelled.
The openai engine runs its requests here: a deadline cancels a request whatever it is waiting for
(a connection, headers, a body dripping a byte a second), and a stop request (SIGTERM, see
serving/_util/stop.py) cancels the calls in flight within `POLL_S`, as in-process engines stop between
chunks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from .._util import stop

T = TypeVar("T")
POLL_S = 0.1  # how often a waiting caller looks for a stop request


class LoopThread:
    """One asyncio loop, run by a daemon thread (it never keeps the process alive)."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """`coro`'s result, run on the loop; a stop requested meanwhile cancels it and raises
        `Stopped` (so does one requested before it starts). An exception in the caller's own thread
        (KeyboardInterrupt) cancels it too."""
        if stop.requested():
            coro.close()
            stop.check()
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            while not concurrent.futures.wait([fut], timeout=POLL_S).done:
                stop.check()
            return fut.result()
        except BaseException:
            fut.cancel()
            raise

    def close(self, *finals: Callable[[], Awaitable[Any]], timeout_s: float = 5.0) -> None:
        """Run `finals` (e.g. a client's aclose) on the loop, then stop it and its thread (idempotent)."""
        if self.loop.is_closed():
            return
        if self._thread.is_alive():
            for final in (*finals, _drain):
                with contextlib.suppress(Exception):  # closing must not fail on a connection already gone
                    asyncio.run_coroutine_threadsafe(_call(final), self.loop).result(timeout_s)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self.loop.close()


async def _call(final: Callable[[], Awaitable[Any]]) -> Any:
    return await final()


async def _drain() -> None:
    """Let the calls abandoned by a stop finish their cancellation, and close open async generators
    (a body left part-read), so that closing the loop destroys no pending task."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in others:
        t.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()
