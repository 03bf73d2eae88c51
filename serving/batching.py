"""Gather concurrent coroutines' chat requests into batches for one synchronous Engine.

Many agents run as coroutines in one event loop; each awaits `BatchingBackend.generate(request)`.
A request waits at most `max_wait_s` for company (or until `max_batch` are queued), then one
worker thread calls `backend.generate(batch)`. With `max_inflight=1` (one in-process engine,
which is not thread-safe) the requests that arrive while a batch runs form the next one, so the
engine sees batches as large as the number of agents waiting on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from .protocol import ChatRequest, Engine, Generation


class BatchingBackend:
    """Async `generate(one request)` in front of a batched, synchronous `generate(requests)`."""

    def __init__(self, backend: Engine, *, max_batch: int = 32, max_wait_s: float = 0.005, max_inflight: int = 1):
        self.backend = backend
        self.max_batch, self.max_wait_s = max(1, max_batch), max(0.0, max_wait_s)
        self._sem = asyncio.Semaphore(max(1, max_inflight))
        self._pending: list[tuple[ChatRequest, asyncio.Future[Generation]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.stats: dict[str, Any] = {"requests": 0, "batches": 0, "max_batch": 0, "prompt_tokens": 0,
                                      "output_tokens": 0, "engine_s": 0.0}

    async def generate(self, request: ChatRequest) -> Generation:
        """Queue one request; resolves when its batch has been generated (or raises the batch's error)."""
        fut: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._pending.append((request, fut))
        self._schedule()
        return await fut

    def _schedule(self) -> None:
        if len(self._pending) >= self.max_batch:
            self._spawn_drain()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.max_wait_s, self._spawn_drain)

    def _spawn_drain(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = asyncio.get_running_loop().create_task(self._drain())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        """Take whatever is queued when an engine slot frees up (up to max_batch) and run it."""
        async with self._sem:
            batch = [(r, f) for r, f in self._pending[: self.max_batch] if not f.cancelled()]
            del self._pending[: self.max_batch]
            if self._pending:
                self._schedule()
            if batch:
                await self._run(batch)

    async def _run(self, batch: Sequence[tuple[ChatRequest, asyncio.Future[Generation]]]) -> None:
        t = time.perf_counter()
        try:
            gens = await asyncio.to_thread(self.backend.generate, [r for r, _ in batch])
            if len(gens) != len(batch):
                raise RuntimeError(f"backend returned {len(gens)} generations for {len(batch)} requests")
        except Exception as e:  # every waiter of the batch gets the engine's error
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
            return
        self._count(gens, time.perf_counter() - t)
        for (_, fut), gen in zip(batch, gens):
            if not fut.done():
                fut.set_result(gen)

    def _count(self, gens: Sequence[Generation], seconds: float) -> None:
        s = self.stats
        s["requests"] += len(gens)
        s["batches"] += 1
        s["max_batch"] = max(s["max_batch"], len(gens))
        s["prompt_tokens"] += sum(g.prompt_tokens for g in gens)
        s["output_tokens"] += sum(g.output_tokens for g in gens)
        s["engine_s"] += seconds

    async def aclose(self) -> None:
        """Wait for batches in flight (their waiters may be gone)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
