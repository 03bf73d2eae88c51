"""Secrets never leave in any encoding: one redaction for logs, records, errors and tool observations."""

from __future__ import annotations

import base64
import json
import logging
from urllib.parse import quote, quote_plus

import httpx
import pytest

from lifesearch_local.records import Judgment
from serving._util import redact as R
from tests.helpers.inputs import J

KEY = "sk-Live_9f8e7d6c5b4a/3+21zyXW"  # '/' and '+' make the URL- and JSON-escaped forms differ


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """A clean registry holding KEY (the registry is per process)."""
    monkeypatch.setattr(R, "_secrets", set())
    monkeypatch.setattr(R, "_pattern", None)
    monkeypatch.setenv("LS_TEST_KEY", KEY)
    assert R.secret_from_env("LS_TEST_KEY") == KEY


def b64(text: str, urlsafe: bool = False, pad: bool = True) -> str:
    out = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(text.encode()).decode()
    return out if pad else out.rstrip("=")


FORMS = {
    "raw": KEY,
    "upper": KEY.upper(),
    "lower": KEY.lower(),
    "bearer header": f"Bearer {KEY}",
    "base64 of key": b64(KEY),
    "base64 of Bearer key": b64(f"Bearer {KEY}"),
    "basic auth user:key": b64(f"user:{KEY}"),
    "basic auth key:": b64(f"{KEY}:"),
    "basic auth longer user": b64(f"someone@example.org:{KEY}"),
    "base64 url-safe unpadded": b64(f"x-api-key={KEY}", urlsafe=True, pad=False),
    "url-encoded": quote(KEY, safe=""),
    "url-encoded plus": quote_plus(KEY),
    "url-encoded lower hex": quote(KEY, safe="").lower(),
    "json-escaped": json.dumps(KEY)[1:-1].replace("/", "\\/"),
    "json in json": json.dumps(json.dumps({"key": KEY})),
    "hex": KEY.encode().hex(),
}


@pytest.mark.parametrize("form", list(FORMS.values()), ids=list(FORMS))
def test_every_encoding_of_the_key_is_masked(form):
    text = f"the server said: <{form}> and nothing more"
    out = R.redact(text)
    assert form not in out and R.MASK in out
    assert out.startswith("the server said: <") and out.endswith("> and nothing more")
    assert KEY not in out and KEY.upper() not in out and b64(KEY) not in out


def test_ordinary_text_and_short_values_are_left_alone():
    text = "sk-Live is a prefix; Bearer tokens are fine; dXNlcjpwYXNz is someone else's base64"
    assert R.redact(text) == text
    R.register_secret("abc")  # too short to mask safely
    assert R.redact("abc abc") == "abc abc"


def test_records_written_through_jsonl_are_redacted(tmp_path):
    from lifesearch_local.rundir.jsonl import append_lines

    j = Judgment(task_id="t", agent="a", rubric_id="R1", judge="j", satisfied=True,
                 reason=f"the key is {KEY.upper()}", raw=json.dumps({"echo": f"Bearer {KEY}", "b": b64(f"u:{KEY}")}))
    append_lines(tmp_path / "judgments.jsonl", [j, {"step": 1, "data": {"headers": {"authorization": f"Bearer {KEY}"}}}])
    text = (tmp_path / "judgments.jsonl").read_text()
    for form in (KEY, KEY.upper(), b64(f"u:{KEY}")):
        assert form not in text
    assert text.count(R.MASK) >= 4
    assert all(json.loads(line) for line in text.splitlines())  # still valid JSON lines


def test_log_records_are_redacted(caplog):
    R.install_log_redaction()
    caplog.set_level(logging.INFO)
    logging.getLogger("lifesearch.test").info("calling with %s and %s", f"Bearer {KEY}", quote(KEY, safe=""))
    assert KEY not in caplog.text and quote(KEY, safe="") not in caplog.text and R.MASK in caplog.text


def test_a_successful_answer_echoing_the_key_is_redacted_before_it_is_returned():
    from serving.config import model_config
    from serving.engines.openai import OpenAIEngine
    from serving.protocol import ChatRequest

    echo = f"Sure! Your header was Authorization: Bearer {KEY} ({b64('Bearer ' + KEY)})"
    calls = [{"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": json.dumps({"query": KEY})}}]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"message": {"content": echo, "tool_calls": calls}, "finish_reason": "stop"}]})

    cfg = model_config(backend="openai", model="m", base_url="http://endpoint.test/v1", api_key_env="LS_TEST_KEY")
    gen = OpenAIEngine(cfg, transport=httpx.MockTransport(handler)).generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])[0]
    assert KEY not in gen.text and b64("Bearer " + KEY) not in gen.text and gen.text.startswith("Sure!")
    assert KEY not in json.dumps(gen.tool_calls)


def test_tool_observations_are_redacted_before_the_model_or_the_log_sees_them():
    import asyncio

    from lifesearch_local.agent.loop import _call
    from lifesearch_local.agent.observation import Observation
    from lifesearch_local.agent.toolcalls import ToolCall

    class Echo:
        async def run(self, arguments, task):
            return Observation(text=f"page text {KEY}", summary=f"echo {quote(KEY, safe='')}", data={"h": b64(KEY)})

    obs, _, _ = asyncio.run(_call(Echo(), ToolCall(id="1", name="web_fetch", arguments={}), None, 5.0))
    assert KEY not in obs.text and "%2F" not in obs.summary and b64(KEY) not in json.dumps(obs.data)
    assert obs.text == f"page text {R.MASK}"


@pytest.mark.parametrize("form", list(FORMS.values()), ids=list(FORMS))
def test_an_endpoint_error_echoing_any_form_of_the_key_shows_none(form):
    from serving.config import model_config
    from serving.engines.openai import EndpointError, OpenAIEngine
    from serving.protocol import ChatRequest

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, text=f"invalid key {form}; you sent {request.headers['authorization']}")

    cfg = model_config(backend="openai", model="m", base_url="http://endpoint.test/v1", api_key_env="LS_TEST_KEY")
    with pytest.raises(EndpointError) as e:
        OpenAIEngine(cfg, transport=httpx.MockTransport(handler)).generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
    assert form not in str(e.value) and KEY not in str(e.value)
    assert e.value.status == 401 and e.value.config_error and "http://endpoint.test/v1/chat/completions" in str(e.value)


# -- every encoding of a key from the environment, in judgments and HTTP errors -------------------------------

SECRET = "sk-Live_9f8e7d6c5b4a/3+21zyXW"


def _encoded_forms() -> dict[str, str]:
    return {
        "quote, safe '/'": quote(SECRET),
        "quote, safe ''": quote(SECRET, safe=""),
        "every byte": "".join(f"%{b:02X}" for b in SECRET.encode()),
        "every byte, lower": "".join(f"%{b:02x}" for b in SECRET.encode()),
        "double": quote(quote(SECRET, safe=""), safe=""),
        "double, every byte": "".join(f"%25{b:02X}" for b in SECRET.encode()),
        "json \\u": "".join(f"\\u{ord(c):04x}" for c in SECRET),
        "json \\u in json": "".join(f"\\\\u{ord(c):04x}" for c in SECRET),
        "mixed": "".join(f"%{ord(c):02X}" if i % 2 else c for i, c in enumerate(SECRET)),
    }


@pytest.fixture
def secret(monkeypatch):
    from serving._util import redact

    monkeypatch.setattr(redact, "_secrets", set())
    monkeypatch.setattr(redact, "_pattern", None)
    monkeypatch.setenv("LS_H3_KEY", SECRET)
    assert redact.secret_from_env("LS_H3_KEY") == SECRET
    return SECRET


@pytest.mark.parametrize("name", list(_encoded_forms()))
def test_every_encoding_of_a_key_is_redacted_in_judgments_and_http_errors(tmp_path, secret, name):
    from lifesearch_local.rundir.jsonl import append_lines
    from serving.config import model_config
    from serving.engines.openai import EndpointError, OpenAIEngine
    from serving.protocol import ChatRequest

    form = _encoded_forms()[name]
    path = tmp_path / "judgments.jsonl"
    append_lines(path, [Judgment.model_validate({**J, "reason": f"called with {form}.", "raw": f"<{form}>"})])
    assert form not in path.read_text() and "***" in path.read_text()
    for status in (401, 500):
        def handler(request: httpx.Request, status: int = status) -> httpx.Response:
            return httpx.Response(status, text=f"bad key {form}")

        cfg = model_config(backend="openai", model="m", base_url="http://endpoint.test/v1", api_key_env="LS_H3_KEY",
                           max_retries=1, retry_base_delay_s=0.0)
        with pytest.raises(EndpointError) as e:
            OpenAIEngine(cfg, transport=httpx.MockTransport(handler)).generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
        assert form not in str(e.value) and "***" in str(e.value), (status, str(e.value))


def test_ordinary_percent_and_unicode_escapes_are_left_alone(secret):
    from serving._util.redact import redact

    text = "50%2F100 of sk-Live users; \\u0073k- is not a key; %73%6B only starts one"
    assert redact(text) == text
