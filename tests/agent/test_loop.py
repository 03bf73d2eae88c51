"""The ReAct loop with a scripted model against the bundled corpus: tools, budgets, failures, cutoff."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from lifesearch_local.agent.loop import run_task
from lifesearch_local.agent.observation import Observation
from lifesearch_local.agent.tools import WebHandles, build_tools
from lifesearch_local.agent.trajectory import TrajectoryLog, trajectory_name
from lifesearch_local.output.report.data import fetch_stats
from serving._util.retry import RetryPolicy
from serving.batching import BatchingBackend
from serving.chat import ContextOverflowError
from serving.config import model_config
from serving.engines.openai import OpenAIEngine
from serving.errors import EndpointError
from serving.protocol import ChatRequest, Generation
from tests.helpers.agent import Script, agent_config, call, turn, web_config
from tests.helpers.doubles import ScriptedBackend

PERMITS = "https://wexmoor.example/services/parking/residential-permits"
LATER_NEWS = "https://wexmoor.example/news/2026-08-12-council-approves-parking-fees"


def run_one(tmp_path, task, cfg, script, index, *, extra_tools=None, web=None, tasks=None, stop=None):
    """Run task(s) through the batching adapter and the real tools; (reports, trajectories, backend)."""
    backend = ScriptedBackend(script)

    async def go():
        handles = WebHandles(web or web_config(index))
        tools = {**build_tools(cfg, handles), **(extra_tools or {})}
        batcher = BatchingBackend(backend, max_wait_s=0.002)
        try:
            logs = [TrajectoryLog(tmp_path, t.id, cfg.id, 0) for t in (tasks or [task])]
            reports = await asyncio.gather(*(run_task(t, 0, cfg, batcher.generate, tools, log, stop=stop)
                                             for t, log in zip(tasks or [task], logs)))
            return reports, [[json.loads(x) for x in log.path.read_text().splitlines()] for log in logs]
        finally:
            await handles.aclose()

    reports, trajs = asyncio.run(go())
    return reports, trajs, backend


def steps(traj):
    return [r for r in traj if r["type"] == "step"]


def tool_messages(request):
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def test_search_fetch_python_answer(tmp_path, sample_tasks, corpus_index):
    task = sample_tasks["sample-en-01"]
    answer = "The Wexmoor residential parking permit costs $45 a year; two years cost $90."
    script = Script({task.question: [
        "Let me search first.\n" + call("web_search", query="Wexmoor residential parking permit fee"),
        call("web_fetch", url=PERMITS),
        call("python", code="print(45 * 2)"),
        answer,
    ]})
    (report,), (traj,), _ = run_one(tmp_path, task, agent_config(), script, corpus_index)

    assert report.status == "completed" and report.text == answer
    assert report.iterations == 4 and report.output_tokens == sum(len(t.split()) for t in script.by_question[task.question])
    assert report.trajectory == trajectory_name("sample-en-01", "scripted", 0)
    assert report.trajectory.startswith("trajectories/sample-en-01__scripted__r0-")
    assert [r["type"] for r in traj] == ["start", "step", "step", "step", "step", "end"]
    assert traj[0]["today_date"] == "2026-07-20" and traj[-1]["status"] == "completed"
    # what the score table and the no-research caveat read: calls that ran, pages that came back
    assert (report.tool_calls, report.pages_read) == (3, 1) and (traj[-1]["tool_calls"], traj[-1]["pages_read"]) == (3, 1)
    s = steps(traj)
    search, fetch, py = s[0]["calls"][0], s[1]["calls"][0], s[2]["calls"][0]
    assert search["tool"] == "web_search" and search["ok"] and PERMITS in search["data"]["links"]
    assert fetch["tool"] == "web_fetch" and fetch["ok"] and fetch["data"]["source"] == "corpus"
    assert py["tool"] == "python" and py["ok"] and py["data"]["returncode"] == 0
    assert all(x["input"]["prompt_tokens"] == 10 and x["model_s"] >= 0 for x in s)
    # The model saw each observation: the results list, the page text, the program's output.
    last = script.for_task(task)[-1]
    assert "The current date is 2026-07-20." in last.messages[0]["content"]
    results = tool_messages(last)
    assert PERMITS in results[0] and "$45" in results[1] and "90" in results[2]
    assert last.tools and {t["function"]["name"] for t in last.tools} == {"web_search", "web_fetch", "python"}


class SleepTool:
    """A tool that waits; records when each call ran."""

    name = "sleep"
    schema = {"type": "function", "function": {"name": "sleep", "parameters": {
        "type": "object", "properties": {"s": {"type": "number"}}, "required": ["s"]}}}

    async def run(self, arguments, task):
        await asyncio.sleep(float(arguments["s"]))
        return Observation(text=f"slept {arguments['s']}", summary="slept")


def test_parallel_calls_of_one_decision_run_concurrently(tmp_path, sample_tasks, corpus_index):
    task = sample_tasks["sample-en-03"]
    many = "".join(call("sleep", s=1.0) for _ in range(3)) + call("web_fetch", url="https://tallyflow.example/docs/changelog")
    script = Script({task.question: [many, "done"]})
    (report,), (traj,), _ = run_one(tmp_path, task, agent_config(), script, corpus_index, extra_tools={"sleep": SleepTool()})
    calls = steps(traj)[0]["calls"]
    assert len(calls) == 4 and all(c["ok"] for c in calls)
    sleeps = [c for c in calls if c["tool"] == "sleep"]
    overlap = min(c["end_s"] for c in sleeps) - max(c["start_s"] for c in sleeps)
    # all three asleep at one moment: one after another, the last would start after the first ended (overlap -2 s)
    assert overlap > 0 and report.status == "completed"


def test_malformed_call_timeout_and_fetch_failure_are_observations(tmp_path, sample_tasks, corpus_index):
    from tests.helpers.web_server import LoopbackServer

    task = sample_tasks["sample-en-03"]
    with LoopbackServer() as server:
        missing = server.url("/gone")
        script = Script({task.question: [
            "<tool_call>{not json at all</tool_call>",
            call("python", code="import time\ntime.sleep(60)") + call("sleep", s=30) + call("nosuchtool", x=1),
            call("web_fetch", url=missing) + call("web_fetch"),
            "Final answer despite the failures.",
        ]})
        # the python tool's own wall clock (1 s) must fire well before the call timeout (4 s), even on a
        # loaded 2-core machine where starting the sandbox alone can take a second
        cfg = agent_config(tools={"timeout_s": 4.0, "python": {"wall_s": 1.0}})
        (report,), (traj,), _ = run_one(tmp_path, task, cfg, script, corpus_index, extra_tools={"sleep": SleepTool()})
    assert report.status == "completed" and report.iterations == 4
    reqs = script.for_task(task)
    assert "[error: malformed tool call]" in reqs[1].messages[-1]["content"]
    second = reqs[2]
    assert any(t.startswith("[python: timeout") for t in tool_messages(second))
    assert any(t.startswith("[error: timeout] sleep did not finish") for t in tool_messages(second))
    assert "unknown tool 'nosuchtool'" in second.messages[-1]["content"]
    third = reqs[3]
    assert any(t.startswith("[fetch failed: not_found]") for t in tool_messages(third))
    assert "web_fetch: missing required argument(s): url" in third.messages[-1]["content"]
    s = steps(traj)
    assert s[0]["call_errors"][0]["called"] is None and s[0]["calls"] == []
    assert {c["failure"] for c in s[1]["calls"]} == {"timeout"}
    assert s[2]["calls"][0] == s[2]["calls"][0] | {"tool": "web_fetch", "ok": False, "failure": "not_found"}
    # The HTML report counts the failed fetch (and not the call that never ran).
    stats = fetch_stats(tmp_path, [report])
    assert stats["scripted"].calls == 1 and dict(stats["scripted"].failures) == {"not_found": 1}
    # python, sleep and the failed fetch ran (no page read); the malformed and unknown calls never did
    assert (report.tool_calls, report.pages_read) == (3, 0)


def test_native_openai_tool_calls(tmp_path, sample_tasks, corpus_index):
    task = sample_tasks["sample-en-03"]
    native = Generation(text="", tool_calls=[
        {"id": "abc", "type": "function", "function": {"name": "python", "arguments": '{"code": "print(6*7)"}'}},
        {"id": "bad", "type": "function", "function": {"name": "python", "arguments": "{oops"}},
    ], output_tokens=7)
    script = Script({task.question: [native, "42"]})
    (report,), (traj,), _ = run_one(tmp_path, task, agent_config(), script, corpus_index)
    last = script.for_task(task)[-1]
    assistant = [m for m in last.messages if m["role"] == "assistant"][0]
    assert assistant["tool_calls"][0]["id"] == "abc"
    assert [m for m in last.messages if m["role"] == "tool"][0] == {"role": "tool", "tool_call_id": "abc",
                                                                   "content": "[python: exit code 0]\nstdout:\n42"}
    assert "python: arguments must be a JSON object" in last.messages[-1]["content"]
    assert report.text == "42" and report.output_tokens == 8


def test_context_budget_truncates_old_results_then_forces_the_answer(tmp_path, sample_tasks, corpus_index):
    task = sample_tasks["sample-en-03"]
    pages = ["https://tallyflow.example/docs/changelog", "https://tallyflow.example/docs/upgrading/3.4",
             PERMITS, "https://library.wexmoor.example/borrow/library-cards"] * 10

    def decide(req):  # reports prompt tokens as an engine would (about 3.5 characters a token)
        n = int(sum(len(m.get("content") or "") for m in req.messages) / 3.5)
        if "budget of this task is used up" in req.messages[-1]["content"]:
            return Generation(text="Final answer from what I have.", prompt_tokens=n, output_tokens=6)
        return Generation(text=call("web_fetch", url=pages[turn(req)]), prompt_tokens=n, output_tokens=20)

    cfg = agent_config(context_tokens=1600, max_tokens=200, max_iterations=30, tools={"truncated_observation_chars": 200})
    script = Script({task.question: [decide]})
    (report,), (traj,), _ = run_one(tmp_path, task, cfg, script, corpus_index)
    assert report.status == "budget" and "context budget" in report.error and report.text == "Final answer from what I have."
    s = steps(traj)
    assert s[-1]["forced_final"] == "context" and 3 < len(s) < 20
    cut_first = next(i for i, x in enumerate(s) if x["truncated_results"])
    req = script.for_task(task)[cut_first]
    results = tool_messages(req)
    assert "removed to fit the context budget" in results[0] and "removed to fit" not in results[-1]
    assert all(x["input"]["tokens_est"] <= 1600 - 200 for x in s[:-1])


def test_iteration_budget_forces_the_answer(tmp_path, sample_tasks, corpus_index):
    task = sample_tasks["sample-en-03"]
    script = Script({task.question: [call("python", code="print(1)"), call("python", code="print(2)"), "forced answer"]})
    (report,), (traj,), _ = run_one(tmp_path, task, agent_config(max_iterations=3), script, corpus_index)
    assert report.status == "budget" and report.iterations == 3 and report.text == "forced answer"
    assert "budget of this task is used up" in script.for_task(task)[-1].messages[-1]["content"]


@pytest.mark.parametrize("text", [
    "Before I start, could you confirm which Tallyflow edition you use? Do you want the Windows steps too?",
    "为了准确回答，想先跟您确认：您使用的是哪个版本？请确认后我再继续。",
])
def test_clarification_question_is_detected(tmp_path, sample_tasks, corpus_index, text):
    task = sample_tasks["sample-en-03"]
    (report,), (traj,), _ = run_one(tmp_path, task, agent_config(), Script({task.question: [text]}), corpus_index)
    assert report.status == "clarification" and report.iterations == 1 and report.text == text


def test_cutoff_hides_later_pages_from_search_and_fetch(tmp_path, sample_tasks, corpus_index):
    task = sample_tasks["sample-en-01"]  # as_of 2026-07-20; the council news page is dated 2026-08-12
    open_task = task.model_copy(update={"id": "no-cutoff", "as_of": None, "question": task.question + " (no cutoff)"})
    turns = [call("web_search", query="Wexmoor council approves parking fee changes") + call("web_fetch", url=LATER_NEWS), "ok"]
    script = Script({task.question: turns, open_task.question: turns})
    (cut, free), (traj_cut, traj_free), _ = run_one(tmp_path, task, agent_config(), script, corpus_index, tasks=[task, open_task])
    search, fetch = steps(traj_cut)[0]["calls"]
    assert LATER_NEWS not in search["data"]["links"] and PERMITS in search["data"]["links"]
    assert fetch["failure"] == "after_cutoff" and not fetch["ok"]
    assert "[fetch failed: after_cutoff]" in tool_messages(script.for_task(task)[-1])[1]
    search, fetch = steps(traj_free)[0]["calls"]  # the same calls without a cutoff do see the page
    assert LATER_NEWS in search["data"]["links"] and fetch["ok"] and fetch["data"]["date"] == "2026-08-12"


def test_engine_error_ends_the_run_in_error(tmp_path, sample_tasks, corpus_index):
    task = sample_tasks["sample-en-03"]

    def boom(req):
        raise RuntimeError("engine down")

    (report,), (traj,), _ = run_one(tmp_path, task, agent_config(), boom, corpus_index)
    assert report.status == "error" and "engine down" in report.error and traj[-1]["status"] == "error"


def test_an_engine_lost_while_stopping_leaves_no_report(tmp_path, sample_tasks, corpus_index):
    # `scontrol requeue` signals every step at once: the driver's stop flag is set and the Ray
    # nodes under the agent's engine go down with it. Not the task's failure: the rerun redoes it.
    from lifesearch_local.runtime.signals import StopFlag

    task, stop = sample_tasks["sample-en-03"], StopFlag()

    def lost(req):
        stop.event.set()
        raise RuntimeError("PoolError: no live replica left")

    (report,), (traj,), _ = run_one(tmp_path, task, agent_config(), lost, corpus_index, stop=stop)
    assert report is None and traj[-1]["type"] == "stopped" and "no live replica" in traj[-1]["error"]


def test_a_configuration_error_of_the_endpoint_stops_the_stage_instead_of_writing_an_error_report(tmp_path, sample_tasks, corpus_index):
    from serving.errors import EndpointError

    task = sample_tasks["sample-en-03"]

    def denied(req):
        raise EndpointError("endpoint http://judge.test/v1/chat/completions: HTTP 401 Unauthorized", status=401)

    with pytest.raises(EndpointError) as e:  # every task would fail alike: the rerun after the fix must redo them
        run_one(tmp_path, task, agent_config(), denied, corpus_index)
    assert e.value.config_error


def test_an_answer_cut_by_the_token_limit_is_budget_not_completed(tmp_path, sample_tasks, corpus_index):
    task = sample_tasks["sample-en-01"]
    cut = Generation(text="The Wexmoor residential parking permit costs", output_tokens=64, finish_reason="length")
    (report,), (traj,), _ = run_one(tmp_path, task, agent_config(max_tokens=64), Script({task.question: [cut]}),
                                    corpus_index)
    assert report.status == "budget" and report.iterations == 1
    assert report.error == "answer cut at max_tokens (64) at iteration 1"
    assert (report.tool_calls, report.pages_read) == (0, 0)  # the demo's tiny agents: no research done
    assert traj[-1]["status"] == "budget" and steps(traj)[0]["output"]["finish"] == "length"


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
