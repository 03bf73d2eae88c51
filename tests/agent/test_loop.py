"""The agent loop's model calls: only what can pass on another attempt is retried; a bug surfaces at once."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from lifesearch_local.agent.loop import run_task
from lifesearch_local.agent.trajectory import TrajectoryLog
from serving.chat import ContextOverflowError
from serving.config import model_config
from serving.engines.openai import OpenAIEngine
from serving.errors import EndpointError
from serving.protocol import ChatRequest, Generation
from serving.retry import RetryPolicy

from .conftest import agent_config

ANSWER = Generation(text="The permit costs $45 a year.", prompt_tokens=10, output_tokens=7)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt, hint=None: 0.0)


class Engine:
    """An async generate that raises each of `errors` in turn, then answers; counts its calls."""

    def __init__(self, *errors: BaseException):
        self.errors, self.calls = list(errors), 0

    async def __call__(self, request: ChatRequest) -> Generation:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return ANSWER


def run(tmp_path, sample_tasks, generate, retries: int = 2):
    task = sample_tasks["sample-en-01"]
    log = TrajectoryLog(tmp_path, task.id, "scripted", 0)
    report = asyncio.run(run_task(task, 0, agent_config().model_copy(update={"model_retries": retries}), generate, {}, log))
    return report, [json.loads(x) for x in log.path.read_text().splitlines()]


@pytest.mark.parametrize("bug", [TypeError("generate() got an unexpected keyword argument 'seed'"),
                                 KeyError("input_ids"), AttributeError("'NoneType' object has no attribute 'logits'")])
def test_a_bug_in_the_engine_is_not_retried_and_surfaces(tmp_path, sample_tasks, bug):
    engine = Engine(*[bug] * 3)
    with pytest.raises(type(bug)) as e:  # not an error report: every task would fail alike
        run(tmp_path, sample_tasks, engine)
    assert engine.calls == 1 and e.value is bug


@pytest.mark.parametrize("overflow", [ContextOverflowError("the prompt needs 9000 positions but the model has 8192"),
                                      EndpointError("HTTP 400: maximum context length is 8192 tokens", status=400)])
def test_a_context_length_error_ends_the_run_at_once_with_its_message(tmp_path, sample_tasks, overflow):
    engine = Engine(*[overflow] * 3)
    report, traj = run(tmp_path, sample_tasks, engine)
    assert engine.calls == 1
    assert report.status == "error" and str(overflow) in report.error and str(overflow) in traj[-2]["error"]


@pytest.mark.parametrize("flaky", [TimeoutError("no answer within 60 s"),
                                   EndpointError("failed after 3 attempts: HTTP 429 Too Many Requests", status=429,
                                                 transient=True),
                                   EndpointError("failed after 3 attempts: HTTP 503", status=503, transient=True)])
def test_a_transient_error_is_retried_up_to_the_bound_then_ends_the_run(tmp_path, sample_tasks, flaky):
    engine = Engine(*[flaky] * 2)
    report, _ = run(tmp_path, sample_tasks, engine, retries=2)  # the third attempt answers
    assert engine.calls == 3 and report.status == "completed" and report.text == ANSWER.text
    engine = Engine(*[flaky] * 5)
    report, _ = run(tmp_path / "b", sample_tasks, engine, retries=2)
    assert engine.calls == 3 and report.status == "error" and str(flaky) in report.error


def openai_generate(responses: list[httpx.Response], seen: list[dict]):
    """The agent's generate over the real openai engine, its endpoint answering from `responses` (last repeats)."""
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return responses[min(len(seen), len(responses)) - 1]

    engine = OpenAIEngine(model_config(backend="openai", model="m", base_url="http://endpoint.test/v1", max_retries=2,
                                       retry_base_delay_s=0.0), transport=httpx.MockTransport(answer))

    async def generate(request: ChatRequest) -> Generation:
        return await asyncio.to_thread(lambda: engine.generate([request])[0])
    return generate


def test_through_the_openai_engine_a_503_is_retried_and_a_400_is_not(tmp_path, sample_tasks):
    seen: list[dict] = []
    report, _ = run(tmp_path, sample_tasks, openai_generate([httpx.Response(503, text="overloaded")], seen), retries=1)
    assert len(seen) == 4  # the engine's 2 attempts, twice: the agent's call and its one retry
    assert report.status == "error" and "HTTP 503" in report.error
    seen.clear()
    too_long = httpx.Response(400, json={"error": {"message": "This model's maximum context length is 8192 tokens"}})
    report, _ = run(tmp_path / "b", sample_tasks, openai_generate([too_long], seen), retries=1)
    assert len(seen) == 1 and report.status == "error" and "maximum context length" in report.error
