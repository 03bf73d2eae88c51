"""The `openai` backend: any OpenAI-compatible endpoint (e.g. `vllm serve`) over httpx.

Generation uses `/chat/completions` with native tools; tool calls come back in
`Generation.tool_calls`. Choice scoring also uses `/chat/completions`: the prefill is sent as
a final assistant message that the server continues (`continue_final_message: true`,
`add_generation_prompt: false`, vLLM's extensions to the API), with `max_tokens=1`,
`logprobs: true` and `top_logprobs: choice_top_k`. The prefill's trailing whitespace is moved
into the choices, so the server tokenizes the decision as a model would write it (` true`).
A top-k token counts for a choice when it is a prefix of that choice's continuation (or the
continuation a prefix of it) and of no other; a choice with no such token in the top-k gets
probability 0, and a prompt with none for any choice is an error. Endpoints only return a
top-k, so unlike the hf and vllm backends these are not exact token-id log-probs.

Requests are retried (bounded, `max_retries` attempts) on 429, 5xx, timeouts and connection
errors, honouring Retry-After. A failure is an EndpointError naming the endpoint URL and the HTTP
status (401/403/404 and redirects, which are not followed, are configuration errors). The API key
is read from the environment variable named by `api_key_env`; it is never kept in the config or
shown in reprs, and every encoding of it is redacted (serving._util.redact) from errors and from what
the endpoint answers.

The endpoint is not trusted. Requests run on the engine's own event loop (loop_thread.py), so
`timeout_s` is a deadline for a whole attempt (a body dripping a byte a second is abandoned at
it) and a stop request (SIGTERM) abandons the calls in flight within a tenth of a second. A body
is read a chunk at a time up to `max_response_mib`, then parsed by the one bounded JSON reader
(serving/_util/jsonread.py) and validated (openai_response.py) before any of it is used.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import weakref
from collections.abc import Sequence
from email.utils import parsedate_to_datetime
from typing import Any

from .._util.jsonread import JSONError, loads
from .._util.redact import redact, redact_obj, secret_from_env
from ..chat import softmax
from ..config import OpenAIConfig
from ..decoding import json_stopped
from ..errors import CONFIG_STATUSES, EndpointError
from ..grammar import thinks
from ..protocol import ChatRequest, ChoiceGroup, ChoiceRequest, ChoiceResult, Engine, EngineInfo, Generation
from .loop_thread import LoopThread
from .openai_response import Usage, chat_response

__all__ = ["EndpointError", "OpenAIEngine", "retry_after"]


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from datetime import datetime, timezone

        return max(0.0, (parsedate_to_datetime(value) - datetime.now(timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return None


# -- request bodies (pure) ----------------------------------------------------------
def prefill_messages(messages: list[dict[str, Any]], prefill: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Messages and extra body fields that make the server continue an assistant turn starting with `prefill`."""
    if not prefill:
        return list(messages), {}
    return ([*messages, {"role": "assistant", "content": prefill}],
            {"continue_final_message": True, "add_generation_prompt": False})


def chat_body(model: str, req: ChatRequest, template_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The /chat/completions body of a generation request."""
    messages, extra = prefill_messages(req.messages, req.prefill)
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": req.max_tokens,
                            "temperature": req.temperature, "top_p": req.top_p, **extra}
    if req.seed is not None:
        body["seed"] = req.seed
    if req.stop:
        body["stop"] = list(req.stop)
    if req.tools:
        body["tools"] = req.tools
    kwargs = {**template_kwargs, **req.chat_template_kwargs}
    if kwargs:
        body["chat_template_kwargs"] = kwargs
    if req.json_schema and not thinks(kwargs):  # a thinking model's reasoning is the server's reasoning parser's
        # no `strict`: vLLM's server enforces the schema regardless, and hosted APIs whose strict mode lacks a
        # keyword (maxLength) would refuse the request rather than decode less strictly
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": req.json_schema}}
    return body


def choice_body(model: str, req: ChoiceRequest, top_k: int) -> tuple[dict[str, Any], str]:
    """The /chat/completions body scoring one choice prompt, and the whitespace moved out of the prefill."""
    stripped = req.prefill.rstrip()
    messages, extra = prefill_messages(req.messages, stripped)
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0.0, "logprobs": True,
            "top_logprobs": top_k, "chat_template_kwargs": {**req.chat_template_kwargs, "enable_thinking": False},
            **extra}
    return body, req.prefill[len(stripped):]


# -- responses (pure) -------------------------------------------------------------
def parse_chat(data: Any) -> Generation:
    """A Generation from a /chat/completions response (tool calls kept as returned)."""
    resp = chat_response(data)
    choice, usage = resp.choices[0], resp.usage or Usage()
    msg = choice.message
    if msg is None:
        raise EndpointError("malformed response: choices[0].message missing")
    return Generation(
        text=msg.content or "",
        prompt_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        finish_reason="length" if choice.finish_reason == "length" else "stop",
        tool_calls=msg.tool_calls or None,
    )


def choice_logprobs(data: Any, continuations: Sequence[str]) -> list[float]:
    """Each continuation's log-prob from the first position's top logprobs (see the module docstring)."""
    logprobs = chat_response(data).choices[0].logprobs
    if logprobs is None:
        raise EndpointError("malformed response: no choices[0].logprobs.content[0].top_logprobs")
    entries = [(t.token, t.logprob) for t in logprobs.content[0].top_logprobs]
    out = []
    for i, cont in enumerate(continuations):
        others = [c for j, c in enumerate(continuations) if j != i]
        mass = [lp for tok, lp in entries if tok and _agrees(tok, cont) and not any(_agrees(tok, o) for o in others)]
        out.append(_logsumexp(mass))
    if all(v == -math.inf for v in out):
        raise EndpointError(f"none of the choices {list(continuations)} is among the top {len(entries)} logprobs")
    return out


def _agrees(token: str, continuation: str) -> bool:
    return continuation.startswith(token) or token.startswith(continuation)


def _logsumexp(xs: Sequence[float]) -> float:
    if not xs:
        return -math.inf
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


# -- the client -------------------------------------------------------------------
class OpenAIEngine(Engine):
    """A model behind an OpenAI-compatible HTTP API; `transport` replaces the network (tests: an
    httpx.MockTransport, whose handler runs on the engine's event loop)."""

    def __init__(self, cfg: OpenAIConfig, *, transport: Any = None):
        import httpx

        if not cfg.base_url:
            raise ValueError("the openai backend needs model.base_url (e.g. http://localhost:8000/v1)")
        headers = {}
        if cfg.api_key_env:
            key = secret_from_env(cfg.api_key_env)
            if not key:
                raise ValueError(f"environment variable {cfg.api_key_env} (model.api_key_env) is not set")
            headers["Authorization"] = f"Bearer {key}"
        self.cfg = cfg
        # Redirects are not followed: the key and the prompt would go wherever a Location points.
        self.client = httpx.AsyncClient(base_url=cfg.base_url.rstrip("/") + "/", headers=headers, transport=transport,
                                        timeout=httpx.Timeout(cfg.timeout_s, connect=min(cfg.timeout_s, 30.0)),
                                        follow_redirects=False)
        self.counters = {"generate_prompt_tokens": 0, "generate_output_tokens": 0, "http_retries": 0}
        self._loop = LoopThread(f"openai-engine {cfg.model}")
        # An engine nobody closed still ends its loop thread and connections when collected.
        self._finalizer = weakref.finalize(self, self._loop.close, self.client.aclose)

    def __repr__(self) -> str:
        return f"OpenAIEngine(base_url={self.cfg.base_url!r}, model={self.cfg.model!r})"

    def close(self) -> None:
        self._finalizer()

    def stats(self) -> dict[str, Any]:
        return dict(self.counters)

    def identity(self) -> EngineInfo:
        """An endpoint does not say its weights, library, version or dtype: only that it is one."""
        return EngineInfo(engine="openai")

    def model_hash(self) -> str:
        """Identifies the endpoint and served model name (the weights are the server's)."""
        return hashlib.sha256(f"{self.cfg.base_url}|{self.cfg.model}".encode()).hexdigest()[:16]

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        bodies = [chat_body(self.cfg.model, r, self.cfg.chat_template_kwargs) for r in requests]
        # An endpoint may echo the key back in a successful answer: it must not reach any record.
        gens = [json_stopped(self._clean(self._parse(parse_chat, d)), r.stop_after_json)
                for d, r in zip(self._post_all("chat/completions", bodies), requests)]
        self.counters["generate_prompt_tokens"] += sum(g.prompt_tokens for g in gens)
        self.counters["generate_output_tokens"] += sum(g.output_tokens for g in gens)
        return gens

    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        if len(set(choices)) != len(choices) or len(choices) < 2:
            raise ValueError(f"need at least two distinct choices, got {list(choices)}")
        flat = [r for g in groups for r in g.requests]
        built = [choice_body(self.cfg.model, r, self.cfg.choice_top_k) for r in flat]
        datas = self._post_all("chat/completions", [b for b, _ in built])
        lps = [self._parse(choice_logprobs, d, [ws + c for c in choices]) for d, (_, ws) in zip(datas, built)]
        out, k = [], 0
        for g in groups:
            out.append([ChoiceResult(probs=softmax(lp), logprobs=lp) for lp in lps[k : k + len(g.requests)]])
            k += len(g.requests)
        return out

    def _parse(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except EndpointError as e:  # a server may echo the request (and its key) back
            raise EndpointError(self._where("chat/completions", redact(str(e))), endpoint=self._url("chat/completions")) from None

    @staticmethod
    def _clean(gen: Generation) -> Generation:
        return gen.model_copy(update={"text": redact(gen.text), "tool_calls": redact_obj(gen.tool_calls)})

    def _url(self, path: str) -> str:
        return f"{self.cfg.base_url.rstrip('/')}/{path}"  # type: ignore[union-attr]

    def _where(self, path: str, message: str) -> str:
        return f"endpoint {self._url(path)}: {message}"

    # http (on the engine's loop) ------------------------------------------------------
    def _post_all(self, path: str, bodies: list[dict[str, Any]]) -> list[Any]:
        """The parsed answers, in order; at most max_concurrency requests in flight. The first
        failure cancels the rest; a stop request (SIGTERM) cancels them all and raises Stopped."""
        return self._loop.run(self._gather(path, bodies)) if bodies else []

    async def _gather(self, path: str, bodies: list[dict[str, Any]]) -> list[Any]:
        sem = asyncio.Semaphore(self.cfg.max_concurrency)

        async def one(body: dict[str, Any]) -> Any:
            async with sem:  # the request is made here, so a task cancelled while it waits leaves none unawaited
                return await self._post(path, body)

        tasks = [asyncio.ensure_future(one(b)) for b in bodies]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception()), None)
            if failed is not None:
                raise failed.exception()  # type: ignore[misc]
            return [t.result() for t in tasks]
        finally:
            for t in tasks:
                t.cancel()

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        from serving._util.retry import RetryableError, RetryPolicy, aretry

        policy = RetryPolicy(attempts=self.cfg.max_retries, base_delay=self.cfg.retry_base_delay_s, max_delay=60.0)
        try:
            return await aretry(lambda: self._post_once(path, body), policy)
        except RetryableError as e:
            raise EndpointError(self._where(path, redact(f"failed after {self.cfg.max_retries} attempts: {e}")),
                                endpoint=self._url(path), status=getattr(e, "status", None), transient=True) from None

    async def _post_once(self, path: str, body: dict[str, Any]) -> Any:
        """One attempt, within a total deadline of timeout_s: connecting, waiting and reading all count."""
        import httpx

        from serving._util.retry import RetryableError

        try:
            async with asyncio.timeout(self.cfg.timeout_s):
                return await self._exchange(path, body)
        except (TimeoutError, httpx.TimeoutException):
            self.counters["http_retries"] += 1
            raise RetryableError(f"timed out after {self.cfg.timeout_s:g} s (model.timeout_s: the most one answer "
                                 "may take, whole)") from None
        except httpx.TransportError as e:
            self.counters["http_retries"] += 1
            raise RetryableError(redact(f"connection error: {type(e).__name__}: {e}")) from None

    async def _exchange(self, path: str, body: dict[str, Any]) -> Any:
        from serving._util.retry import RetryableError, retryable_status

        cap = self.cfg.max_response_mib << 20
        async with self.client.stream("POST", path, json=body) as resp:
            if retryable_status(resp.status_code):
                self.counters["http_retries"] += 1
                err = RetryableError(self._status(resp, await _read_capped(resp, cap)),
                                     delay=retry_after(resp.headers.get("retry-after")))
                err.status = resp.status_code  # type: ignore[attr-defined]
                raise err
            if 300 <= resp.status_code < 400:
                raise EndpointError(self._where(path, self._redirect(resp)), endpoint=self._url(path),
                                    status=resp.status_code)
            if resp.status_code >= 400:
                hint = CONFIG_STATUSES.get(resp.status_code)
                text = self._status(resp, await _read_capped(resp, cap))
                raise EndpointError(self._where(path, text + (f" ({hint})" if hint else "")),
                                    endpoint=self._url(path), status=resp.status_code)
            raw = await _read_capped(resp, cap)
            if raw is None:
                raise EndpointError(self._where(path, f"the answer is larger than {self.cfg.max_response_mib} MiB "
                                                "(model.max_response_mib): refused, read no further"),
                                    endpoint=self._url(path), status=resp.status_code)
        try:
            return loads(raw)
        except JSONError as e:
            # the whole body redacted, then cut: a cut made first could leave part of the key behind
            preview = " ".join(redact(raw.decode("utf-8", "replace")).split())[:200]
            raise EndpointError(self._where(path, redact(f"malformed response: the answer is not JSON we can read ({e}); ")
                                            + f"it began {preview!r}"),
                                endpoint=self._url(path), status=resp.status_code) from None

    def _status(self, resp: Any, raw: bytes | None) -> str:
        # Redact the whole body before cutting it: a cut could leave part of the key behind.
        body = (" ".join(redact(raw.decode("utf-8", "replace")).split())[:300] if raw is not None
                else f"(a body over {self.cfg.max_response_mib} MiB, not read)")
        return f"HTTP {resp.status_code} {resp.reason_phrase}".rstrip() + (f": {body}" if body else "")

    @staticmethod
    def _redirect(resp: Any) -> str:
        where = " ".join(redact(resp.headers.get("location", "")).split())[:300]
        return (f"HTTP {resp.status_code} redirect to {where or '(no Location header)'}: redirects are not "
                "followed (the API key would go along); set model.base_url to the address it names")


async def _read_capped(resp: Any, cap: int) -> bytes | None:
    """The body, read a chunk at a time, or None once it passes `cap` bytes (counted decoded, so a
    compressed body counts at its real size); a Content-Length above the cap is refused unread."""
    declared = resp.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > cap:
        return None
    chunks, size = [], 0
    body = resp.aiter_bytes()
    try:
        async for chunk in body:
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                return None
    finally:
        await body.aclose()  # left early: close it here, not in a finalizer task the loop may never run
    return b"".join(chunks)
