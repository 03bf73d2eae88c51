"""serving._util.retry: the one rule of what is worth another attempt, and the bounded helper that applies it."""

from __future__ import annotations

import asyncio
import pickle

import httpx
import pytest

from serving._util.retry import RetryableError, RetryPolicy, aretry, retry, retryable_status, transient
from serving.chat import ContextOverflowError
from serving.errors import EndpointError

NO_WAIT = RetryPolicy(attempts=3, base_delay=0.0)


@pytest.mark.parametrize("status, again", [(429, True), (500, True), (503, True), (599, True), (400, False),
                                           (401, False), (404, False), (413, False), (200, False), (None, False)])
def test_only_429_and_5xx_statuses_are_worth_another_attempt(status, again):
    assert retryable_status(status) is again


TRANSIENT = [RetryableError("x"), TimeoutError(), asyncio.TimeoutError(), ConnectionResetError(), ConnectionRefusedError(),
             httpx.ConnectTimeout("x"), httpx.ReadTimeout("x"), httpx.ConnectError("x"), httpx.ReadError("x"),
             EndpointError("failed after 3 attempts: HTTP 503", status=503, transient=True),
             EndpointError("failed after 3 attempts: timed out", transient=True)]
FINAL = [TypeError("x"), KeyError("x"), AttributeError("x"), ValueError("x"), RuntimeError("engine down"),
         ContextOverflowError("needs 9000 positions but the model has 8192"), FileNotFoundError("x"),
         httpx.UnsupportedProtocol("x"), EndpointError("HTTP 400: maximum context length is 8192 tokens", status=400),
         EndpointError("HTTP 401 Unauthorized", status=401), EndpointError("malformed response: not JSON", status=200)]


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__)
def test_timeouts_lost_connections_and_exhausted_transient_endpoints_are_transient(exc):
    assert transient(exc)


@pytest.mark.parametrize("exc", FINAL, ids=lambda e: type(e).__name__)
def test_bugs_context_overflows_and_client_errors_are_not(exc):
    assert not transient(exc)


def test_an_endpoint_error_keeps_its_transience_across_processes():
    # Ray actors pickle the exceptions they raise
    back = pickle.loads(pickle.dumps(EndpointError("HTTP 503", endpoint="http://e/v1", status=503, transient=True)))
    assert back.transient and back.status == 503 and transient(back)
    assert not pickle.loads(pickle.dumps(EndpointError("HTTP 400", status=400))).transient


class Calls:
    """A call that raises each of `errors` in turn, then returns 'ok'."""

    def __init__(self, *errors: BaseException):
        self.errors, self.n = list(errors), 0

    def __call__(self) -> str:
        self.n += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


@pytest.mark.parametrize("exc", [TypeError("bad arg"), ContextOverflowError("too long")])
def test_a_final_error_is_raised_at_the_first_attempt(exc):
    call = Calls(exc, exc, exc)
    with pytest.raises(type(exc), match=str(exc)):
        retry(call, NO_WAIT)
    assert call.n == 1


def test_a_transient_error_is_retried_up_to_the_bound_then_raised():
    assert retry(Calls(TimeoutError(), ConnectionResetError()), NO_WAIT) == "ok"
    call = Calls(*[TimeoutError("slow")] * 5)
    with pytest.raises(TimeoutError, match="slow"):
        retry(call, NO_WAIT)
    assert call.n == 3


def test_the_async_twin_applies_the_same_rule():
    async def go(call: Calls) -> str:
        async def once() -> str:
            return call()
        return await aretry(once, NO_WAIT)

    assert asyncio.run(go(Calls(httpx.ReadTimeout("x")))) == "ok"
    bug = Calls(KeyError("k"), KeyError("k"))
    with pytest.raises(KeyError):
        asyncio.run(go(bug))
    assert bug.n == 1


def test_a_caller_may_narrow_the_rule():
    call = Calls(TimeoutError(), TimeoutError())
    with pytest.raises(TimeoutError):
        retry(call, NO_WAIT, retry_on=lambda e: isinstance(e, RetryableError))
    assert call.n == 1
