"""The openai backend against httpx.MockTransport and a loopback server: tools, choices, retries, secrets."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from serving.config import ModelConfig, model_config
from serving.engines.openai import EndpointError, OpenAIEngine, retry_after
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest
from tests.helpers.endpoint import CHOICE_ANSWER, Endpoint, Reply, json_reply
from tests.helpers.inputs import ROOT, rubric, task, write_jsonl

PREFILL = '{"satisfied": '


def cfg(**kw) -> ModelConfig:
    return model_config(backend="openai", model="judge-x", base_url="http://endpoint.test/v1",
                       retry_base_delay_s=0.01, **kw)


def chat_reply(content=None, tool_calls=None, finish="stop", logprobs=None) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": tool_calls},
              "finish_reason": finish}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": "x", "logprob": 0.0, "top_logprobs": logprobs}]}
    return {"choices": [choice], "usage": {"prompt_tokens": 11, "completion_tokens": 3}}


class Recorder:
    """A MockTransport handler that records bodies and answers from a script of responses."""

    def __init__(self, *responses):
        self.responses = list(responses)
        self.bodies: list[dict] = []
        self.headers: list[httpx.Headers] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(request.headers)
        r = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        return r(request) if callable(r) else r


def backend(handler, **kw) -> OpenAIEngine:
    return OpenAIEngine(cfg(**kw), transport=httpx.MockTransport(handler))


def test_generate_sends_tools_and_returns_native_tool_calls():
    call = {"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "x"}'}}
    rec = Recorder(httpx.Response(200, json=chat_reply(None, [call], finish="tool_calls")))
    tools = [{"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}]
    req = ChatRequest(messages=[{"role": "user", "content": "find x"}], tools=tools, max_tokens=64, seed=7, stop=["END"])
    g = backend(rec).generate([req])[0]
    assert g.tool_calls == [call] and g.text == "" and g.finish_reason == "stop"
    assert (g.prompt_tokens, g.output_tokens) == (11, 3)
    body = rec.bodies[0]
    assert body["model"] == "judge-x" and body["tools"] == tools and body["max_tokens"] == 64
    assert body["seed"] == 7 and body["stop"] == ["END"] and "continue_final_message" not in body


def test_generate_with_prefill_asks_the_server_to_continue_the_assistant_turn():
    rec = Recorder(httpx.Response(200, json=chat_reply("true, \"reason\": \"ok\"}", finish="length")))
    req = ChatRequest(messages=[{"role": "user", "content": "q"}], prefill=PREFILL)
    g = backend(rec).generate([req])[0]
    body = rec.bodies[0]
    assert body["messages"][-1] == {"role": "assistant", "content": PREFILL}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert g.finish_reason == "length" and g.text.startswith("true")


def test_choice_scoring_reads_top_logprobs_with_prefill_whitespace_moved_into_the_choices():
    top = [{"token": " true", "logprob": -0.5}, {"token": " false", "logprob": -1.5},
           {"token": " t", "logprob": -4.0},   # also only " true" can follow: counts for true
           {"token": " ", "logprob": -3.0},    # a prefix of both: ambiguous, ignored
           {"token": "maybe", "logprob": -2.0}]
    rec = Recorder(httpx.Response(200, json=chat_reply("", logprobs=top)))
    groups = [ChoiceGroup(key=f"g{k}", requests=[ChoiceRequest(messages=[{"role": "user", "content": f"r{k}{i}"}],
                                                               prefill=PREFILL) for i in range(n)])
              for k, n in ((0, 2), (1, 3))]
    res = backend(rec, max_concurrency=2, choice_top_k=5).score_choices(groups, ["true", "false"])
    assert [len(r) for r in res] == [2, 3]
    lp_true = math.log(math.exp(-0.5) + math.exp(-4.0))
    r = res[1][2]
    assert r.logprobs == pytest.approx([lp_true, -1.5])
    assert r.probs[0] == pytest.approx(math.exp(lp_true) / (math.exp(lp_true) + math.exp(-1.5)))
    body = rec.bodies[0]
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["messages"][-1] == {"role": "assistant", "content": '{"satisfied":'}
    assert body["continue_final_message"] is True and body["chat_template_kwargs"]["enable_thinking"] is False
    assert sorted(b["messages"][0]["content"] for b in rec.bodies) == ["r00", "r01", "r10", "r11", "r12"]


def test_a_choice_missing_from_the_top_k_has_probability_zero_and_none_at_all_is_an_error():
    rec = Recorder(httpx.Response(200, json=chat_reply("", logprobs=[{"token": " false", "logprob": -0.1}])))
    grp = [ChoiceGroup(key="g", requests=[ChoiceRequest(messages=[{"role": "user", "content": "q"}], prefill=PREFILL)])]
    r = backend(rec).score_choices(grp, ["true", "false"])[0][0]
    assert r.probs == [0.0, 1.0] and r.logprobs[0] == -math.inf
    rec = Recorder(httpx.Response(200, json=chat_reply("", logprobs=[{"token": "so", "logprob": -0.1}])))
    with pytest.raises(EndpointError, match="none of the choices"):
        backend(rec).score_choices(grp, ["true", "false"])


def test_retries_429_and_500_honouring_retry_after_then_succeeds():
    rec = Recorder(httpx.Response(429, headers={"Retry-After": "0"}, text="slow down"),
                   httpx.Response(500, text="boom"), httpx.Response(200, json=chat_reply("ok")))
    b = backend(rec)
    g = b.generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])[0]
    assert g.text == "ok" and len(rec.bodies) == 3 and b.stats()["http_retries"] == 2


def test_retries_are_bounded_and_the_error_says_what_happened():
    rec = Recorder(httpx.Response(503, text="overloaded"))
    with pytest.raises(EndpointError, match=r"failed after 3 attempts: HTTP 503 .*overloaded"):
        backend(rec, max_retries=3).generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
    assert len(rec.bodies) == 3


def test_a_client_error_is_not_retried():
    rec = Recorder(httpx.Response(400, text="bad request: max_tokens"))
    with pytest.raises(EndpointError, match="HTTP 400"):
        backend(rec).generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
    assert len(rec.bodies) == 1


@pytest.mark.parametrize("resp, match", [
    (httpx.Response(200, text="<html>gateway</html>"), "not JSON"),
    (httpx.Response(200, json={"object": "error"}), r"no choices\[0\]"),
    (httpx.Response(200, json={"choices": [{"finish_reason": "stop"}]}), "message missing"),
])
def test_a_malformed_response_gives_a_clear_error_without_retrying(resp, match):
    rec = Recorder(resp)
    with pytest.raises(EndpointError, match=f"malformed response.*{match}"):
        backend(rec).generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
    assert len(rec.bodies) == 1


def test_choice_scoring_without_logprobs_in_the_response_is_a_clear_error():
    rec = Recorder(httpx.Response(200, json=chat_reply("true")))
    grp = [ChoiceGroup(key="g", requests=[ChoiceRequest(messages=[{"role": "user", "content": "q"}], prefill=PREFILL)])]
    with pytest.raises(EndpointError, match="malformed response.*top_logprobs"):
        backend(rec).score_choices(grp, ["true", "false"])


def test_concurrency_is_bounded_by_max_concurrency():
    state = {"now": 0, "max": 0}

    async def slow(request):  # the engine's requests run on its event loop: an async handler overlaps them
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.03)
        state["now"] -= 1
        return httpx.Response(200, json=chat_reply("ok"))

    reqs = [ChatRequest(messages=[{"role": "user", "content": f"q{i}"}]) for i in range(12)]
    gens = OpenAIEngine(cfg(max_concurrency=3), transport=httpx.MockTransport(slow)).generate(reqs)
    assert len(gens) == 12 and 1 < state["max"] <= 3


def test_api_key_comes_from_the_env_and_never_shows_in_reprs_errors_or_logs(monkeypatch, caplog):
    secret = "sk-test-very-secret-0123456789"
    monkeypatch.setenv("LS_TEST_API_KEY", secret)
    rec = Recorder(httpx.Response(401, text=f"Incorrect API key provided: {secret}"))
    b = backend(rec, api_key_env="LS_TEST_API_KEY")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(EndpointError) as e:
        b.generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
    assert rec.headers[0]["authorization"] == f"Bearer {secret}"
    assert secret not in str(e.value) and "***" in str(e.value)
    assert secret not in repr(b) and secret not in b.cfg.model_dump_json() and secret not in caplog.text
    monkeypatch.delenv("LS_TEST_API_KEY")
    with pytest.raises(ValueError, match="LS_TEST_API_KEY"):
        backend(rec, api_key_env="LS_TEST_API_KEY")


def test_retry_after_parses_seconds_and_http_dates():
    assert retry_after("3") == 3.0 and retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: no wait


class _SlowOnce(BaseHTTPRequestHandler):
    """Loopback server: the first `stalls` requests stall past the client timeout, later ones answer at once."""

    calls = 0
    stalls = 1

    def do_POST(self):
        type(self).calls += 1
        self.rfile.read(int(self.headers["Content-Length"]))
        if type(self).calls <= type(self).stalls:
            time.sleep(1.0)
        body = json.dumps(chat_reply("late but fine")).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on the stalled request

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_server():
    _SlowOnce.calls, _SlowOnce.stalls = 0, 1
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _SlowOnce)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_a_request_past_the_timeout_is_retried_on_a_real_socket(slow_server):
    b = OpenAIEngine(model_config(backend="openai", model="m", base_url=slow_server, timeout_s=0.3,
                                  max_retries=2, retry_base_delay_s=0.01))
    g = b.generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])[0]
    assert g.text == "late but fine" and _SlowOnce.calls == 2 and b.stats()["http_retries"] == 1
    b.close()


def test_timeouts_that_never_end_fail_with_a_clear_error(slow_server):
    _SlowOnce.stalls = 100  # every request in this test stalls
    b = OpenAIEngine(model_config(backend="openai", model="m", base_url=slow_server, timeout_s=0.2,
                                  max_retries=2, retry_base_delay_s=0.01))
    with pytest.raises(EndpointError, match=r"failed after 2 attempts: timed out after 0.2 s"):
        b.generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
    b.close()


def test_an_endpoint_says_no_weights_so_another_url_is_the_same_judge():
    from serving.protocol import EngineInfo

    a, b = (OpenAIEngine(model_config(backend="openai", model="judge-x", base_url=url))
            for url in ("http://a:1/v1", "http://b:2/v1"))
    assert a.model_hash() != b.model_hash()  # the manifest's model hash names the endpoint
    assert a.identity() == b.identity() == EngineInfo(engine="openai")  # where it runs is no part of the judge


# -- a hostile endpoint (real servers on 127.0.0.1) ---------------------------------------------------------------
KEY = "sk-hostile-KEY-0123456789abcdefghijklmnop"
HI = [ChatRequest(messages=[{"role": "user", "content": "hi"}])]
GROUP = [ChoiceGroup(key="g", requests=[ChoiceRequest(messages=[{"role": "user", "content": "q"}], prefill=PREFILL)])]
def real(url: str, **kw) -> OpenAIEngine:
    return OpenAIEngine(model_config(backend="openai", model="m", base_url=url, max_retries=1, **kw))
def test_a_server_dripping_a_byte_a_second_is_abandoned_at_the_deadline():
    body = b" " * 400 + json.dumps(chat_reply("late")).encode()  # complete after ~100 s at 4 bytes/s
    with Endpoint(lambda n, b: Reply(body=body, drip_s=0.25)) as ep:
        b = real(ep.url, timeout_s=2)
        t0 = time.monotonic()
        with pytest.raises(EndpointError, match=r"timed out after 2 s") as e:
            b.generate(HI)
        waited = time.monotonic() - t0
        b.close()
    assert waited < 40, f"abandoned after {waited:.1f} s"  # per read, it would have waited for the whole drip
    assert 0 < ep.sent[0] < len(body) and "\n" not in str(e.value)
@pytest.mark.parametrize("declared", [True, False])
def test_an_answer_over_the_size_cap_fails_in_one_line_without_being_read(declared):
    mib = 1 << 20
    def huge() -> Iterable[bytes]:  # a valid answer of 64 MiB, produced as it is sent
        yield b'{"choices": [{"message": {"content": "'
        for _ in range(64):
            yield b"x" * mib
        yield b'"}}]}'
    whole = 64 * mib + 40
    reply = Reply(body=huge, headers={"Content-Length": str(whole)} if declared else {}, length=False)
    with Endpoint(lambda n, b: reply) as ep:
        b = real(ep.url, max_response_mib=1)
        with pytest.raises(EndpointError, match=r"larger than 1 MiB \(model.max_response_mib\)") as e:
            b.generate(HI)
        b.close()
    assert "\n" not in str(e.value) and ep.seen == 1  # not retried: the same answer would come again
    assert ep.sent[0] < 16 * mib, ep.sent  # the client stopped reading; socket buffers hold a few MiB at most
HOSTILE = {  # body text -> the field (or reason) the one-line error names
    "nan": ('{"choices": [{"message": {"content": ""}, "logprobs": {"content": [{"top_logprobs": '
            '[{"token": " true", "logprob": NaN}]}]}}]}', "NaN is not a JSON number"),
    "-inf": ('{"choices": [{"message": {"content": ""}, "logprobs": {"content": [{"top_logprobs": '
             '[{"token": " true", "logprob": -Infinity}]}]}}]}', "-Infinity is not a JSON number"),
    "1e999": ('{"choices": [{"message": {"content": ""}, "logprobs": {"content": [{"top_logprobs": '
              '[{"token": " true", "logprob": 1e999}]}]}}]}', "beyond the range of a float"),
    "1e308 for both tokens": ('{"choices": [{"message": {"content": ""}, "logprobs": {"content": [{"top_logprobs": '
                             '[{"token": " true", "logprob": 1e308}, {"token": " false", "logprob": 1e308}]}]}}]}',
                             r"top_logprobs\[0\]\.logprob: Input should be less than or equal to 0"),
    "a positive logprob": ('{"choices": [{"message": {"content": ""}, "logprobs": {"content": [{"top_logprobs": '
                           '[{"token": " true", "logprob": -0.1}, {"token": " false", "logprob": 0.5}]}]}}]}',
                           r"top_logprobs\[1\]\.logprob: Input should be less than or equal to 0"),
    "string logprob": ('{"choices": [{"logprobs": {"content": [{"top_logprobs": [{"token": " true", "logprob": "'
                       + KEY + '"}]}]}}]}', r"choices\[0\]\.logprobs\.content\[0\]\.top_logprobs\[0\]\.logprob"),
    "usage echoing the key": ('{"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": "' + KEY + '"}}',
                              r"usage\.prompt_tokens: Input should be a valid integer"),
    "content a list": ('{"choices": [{"message": {"content": ["' + KEY + '"]}}]}',
                       r"choices\[0\]\.message\.content: Input should be a valid string"),
    "content a number": ('{"choices": [{"message": {"content": 5}}]}', r"choices\[0\]\.message\.content"),
    "deep": ('{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64 levels"),
    "huge integer": ('{"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": ' + "9" * 5000 + "}}",
                     "not a usable JSON value"),
    "not UTF-8": (b'{"choices": [{"message": {"content": "\xff\xfe"}}]}', "not UTF-8"),
    "a duplicate key echoing the key": ('{"choices": [], "' + KEY + '": 1, "' + KEY + '": 2}', r"duplicate key '\*\*\*'"),
    "the key after 70 000 spaces": ("{" + " " * 70_000 + KEY, "not JSON we can read"),
}
@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_values_fail_in_one_line_naming_the_field_and_never_the_key(case, monkeypatch, caplog):
    text, match = HOSTILE[case]
    monkeypatch.setenv("LS_HOSTILE_KEY", KEY)
    body = text if isinstance(text, bytes) else text.encode()
    with Endpoint(lambda n, b: Reply(body=body, headers={"Content-Type": "application/json"})) as ep:
        b = real(ep.url, api_key_env="LS_HOSTILE_KEY")
        with pytest.raises(EndpointError, match=f"malformed response.*{match}") as e:
            if b"logprob" in body:
                b.score_choices(GROUP, ["true", "false"])
            else:
                b.generate(HI)
        b.close()
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 600 and ep.seen == 1
    assert KEY[-22:] not in msg and KEY[:12] not in msg and KEY[-22:] not in caplog.text
@pytest.mark.parametrize("status", [400, 500])
def test_an_error_body_is_redacted_whole_before_it_is_cut(status, monkeypatch):
    monkeypatch.setenv("LS_HOSTILE_KEY", KEY)
    body = (" " * 70_000 + KEY + " " + "x" * 1000).encode()  # collapsed to one space, the key would come first
    with Endpoint(lambda n, b: Reply(status=status, body=body)) as ep:
        b = real(ep.url, api_key_env="LS_HOSTILE_KEY")
        with pytest.raises(EndpointError, match=f"HTTP {status}") as e:
            b.generate(HI)
        b.close()
    assert "***" in str(e.value) and KEY[:6] not in str(e.value) and KEY[-6:] not in str(e.value)
def test_a_redirect_is_named_with_its_location_and_not_followed():
    elsewhere = "http://127.0.0.1:9/v1/chat/completions"
    with Endpoint(lambda n, b: Reply(status=307, headers={"Location": elsewhere})) as ep:
        b = real(ep.url)
        with pytest.raises(EndpointError, match=f"HTTP 307 redirect to {elsewhere}: redirects are not followed") as e:
            b.generate(HI)
        b.close()
    assert e.value.config_error and e.value.status == 307 and ep.seen == 1
def test_a_stop_request_abandons_a_call_in_flight():
    from serving._util.stop import Stopped, honoured
    with Endpoint(lambda n, b: json_reply(chat_reply("late"), stall_s=60)) as ep:
        b = real(ep.url, timeout_s=60)
        event = threading.Event()
        with honoured(event), ThreadPoolExecutor(1) as pool:
            call = pool.submit(b.generate, HI)
            assert ep.arrived.wait(10)
            t0 = time.monotonic()
            event.set()  # what graceful_stop's SIGTERM handler does
            with pytest.raises(Stopped):
                call.result(timeout=30)
            waited = time.monotonic() - t0
        b.close()
    assert waited < 30, f"took {waited:.2f} s: the call was waited out (its reply stalls 60 s), not abandoned"
SIGTERM_JUDGE = """judge:
  id: remote
  mode: choice
  groups_per_call: 1
  model: {{backend: openai, model: judge-x, base_url: "{url}", max_retries: 1, timeout_s: 120}}
"""
def test_sigterm_during_a_remote_call_stops_the_judge_within_seconds(tmp_path):
    # the first report is answered at once, the second never (a server computing for minutes)
    with Endpoint(lambda n, b: json_reply(CHOICE_ANSWER, stall_s=0 if n <= 2 else 120)) as ep:
        (tmp_path / "judge.yaml").write_text(SIGTERM_JUDGE.format(url=ep.url))
        tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric("R1", 0.5), rubric("R2", 0.5)])
                                                       for i in range(2)])
        reports = write_jsonl(tmp_path / "reports.jsonl", [{"task_id": f"t{i}", "agent": "a", "run": 0,
                                                            "text": f"Report {i}."} for i in range(2)])
        proc = subprocess.Popen([sys.executable, "-m", "lifesearch_local", "judge", "--tasks", str(tasks), "--reports",
                                 str(reports), "--config", str(tmp_path / "judge.yaml"), "--out", str(tmp_path / "out"),
                                 "--quiet"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while ep.seen < 3 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert ep.seen >= 3, proc.communicate(timeout=30)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
            waited = time.monotonic() - t0
        finally:
            proc.kill()
    assert waited < 60, f"took {waited:.1f} s to stop: the stalled call (120 s) was waited out"
    assert proc.returncode == 0 and "stopped by signal" in out and "Traceback" not in err, err
    assert "never awaited" not in err and "destroyed but it is pending" not in err, err  # the loop closed cleanly
    assert len((tmp_path / "out" / "judgments.jsonl").read_text().splitlines()) == 2  # the first report's, whole
