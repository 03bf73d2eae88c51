"""The batching adapter: concurrent coroutines' requests reach the engine as batches."""

from __future__ import annotations

import asyncio
import threading

import pytest

from serving.batching import BatchingBackend
from serving.protocol import ChatRequest
from tests.helpers.doubles import ScriptedBackend


def req(i: int) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": f"q{i}"}], max_tokens=4)


def echo(r: ChatRequest) -> str:
    return "answer to " + r.messages[0]["content"]


def test_concurrent_requests_are_batched_and_answered_in_order():
    backend = ScriptedBackend(echo, delay_s=0.05)

    async def go():
        b = BatchingBackend(backend, max_batch=8, max_wait_s=0.01)
        out = await asyncio.gather(*(b.generate(req(i)) for i in range(20)))
        return out, b.stats

    out, stats = asyncio.run(go())
    assert [g.text for g in out] == [f"answer to q{i}" for i in range(20)]
    sizes = [len(c) for c in backend.generate_calls]
    assert sum(sizes) == 20 and max(sizes) == 8 and len(sizes) <= 4
    assert stats["requests"] == 20 and stats["batches"] == len(sizes)


def test_requests_arriving_during_a_batch_form_the_next_one():
    backend = ScriptedBackend(echo, delay_s=0.2)
    threads = set()
    orig = backend.generate

    def spy(requests):
        threads.add(threading.get_ident())
        return orig(requests)

    backend.generate = spy

    async def go():
        b = BatchingBackend(backend, max_batch=32, max_wait_s=0.001, max_inflight=1)
        first = asyncio.ensure_future(b.generate(req(0)))
        await asyncio.sleep(0.05)  # the first batch (one request) is running now
        rest = await asyncio.gather(*(b.generate(req(i)) for i in range(1, 11)))
        return [await first, *rest]

    out = asyncio.run(go())
    assert len(out) == 11 and [len(c) for c in backend.generate_calls] == [1, 10]
    assert threading.get_ident() not in threads  # the engine never runs on the event loop's thread


def test_an_engine_error_reaches_every_waiter_of_the_batch():
    def boom(r):
        raise RuntimeError("engine died")

    async def go():
        b = BatchingBackend(ScriptedBackend(boom), max_wait_s=0.01)
        return await asyncio.gather(*(b.generate(req(i)) for i in range(3)), return_exceptions=True)

    out = asyncio.run(go())
    assert all(isinstance(e, RuntimeError) and "engine died" in str(e) for e in out)


def test_a_cancelled_waiter_does_not_disturb_the_others():
    backend = ScriptedBackend(echo, delay_s=0.05)

    async def go():
        b = BatchingBackend(backend, max_wait_s=0.02)
        gone = asyncio.ensure_future(b.generate(req(0)))
        kept = asyncio.ensure_future(b.generate(req(1)))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        return await kept

    assert asyncio.run(go()).text == "answer to q1"
