"""The shape an OpenAI-compatible /chat/completions answer must have, checked before any of it is used.

The endpoint is outside this process: its body is read by the one bounded JSON reader
(serving/_util/jsonread.py), then validated here. Content must be text, log-probs finite numbers, token
counts non-negative integers; anything else is one `EndpointError` line naming the field and what
was wrong, never the value (it may be huge, or echo the API key).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import EndpointError


class _Part(BaseModel):
    # Servers add fields of their own (vLLM: stop_reason, prompt_logprobs, …): ignored, not refused.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class TopLogprob(_Part):
    """One candidate token at a position."""

    token: str
    """The token's text."""
    logprob: float
    """Its log-probability: a finite number."""


class PositionLogprobs(_Part):
    """The log-probs at one generated position."""

    top_logprobs: list[TopLogprob]
    """The top-k candidates (choice scoring reads the first position's)."""


class Logprobs(_Part):
    """A choice's log-probs."""

    content: list[PositionLogprobs] = Field(min_length=1)
    """One entry per generated token."""


class Message(_Part):
    """The assistant message of a choice."""

    content: str | None = None
    """The text (None or absent when the answer is only tool calls)."""
    tool_calls: list[dict[str, Any]] | None = None
    """Native tool calls, kept as returned (the agent checks them)."""


class Choice(_Part):
    """One choice of the answer (only the first is read)."""

    message: Message | None = None
    """The assistant message."""
    finish_reason: str | None = None
    """`length` when max_tokens cut the answer."""
    logprobs: Logprobs | None = None
    """Present when the request asked for logprobs."""


class Usage(_Part):
    """Token counts."""

    prompt_tokens: int | None = Field(None, ge=0)
    """Tokens of the prompt."""
    completion_tokens: int | None = Field(None, ge=0)
    """Tokens generated."""


class ChatResponse(_Part):
    """A /chat/completions answer."""

    choices: list[Choice] = Field(min_length=1)
    """At least one choice."""
    usage: Usage | None = None
    """Token counts, when the server reports them."""


def chat_response(data: Any) -> ChatResponse:
    """`data` (a parsed body) as a ChatResponse, or an EndpointError naming the first bad field."""
    if not isinstance(data, dict):
        raise EndpointError(f"malformed response: a JSON {type(data).__name__}, not an object")
    if not isinstance(data.get("choices"), list) or not data["choices"]:
        raise EndpointError("malformed response: no choices[0]")
    try:
        return ChatResponse.model_validate(data)
    except ValidationError as e:
        first = e.errors(include_url=False, include_input=False)[0]
        raise EndpointError(f"malformed response: {field_path(first['loc'])}: {first['msg']}") from None


def field_path(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as `choices[0].logprobs.content[0].top_logprobs[1].logprob`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(answer)"
