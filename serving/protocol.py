"""The model protocol: two verbs, `generate` and `score_choices`, and their request types."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Span(BaseModel):
    """Characters of one message's content that may be shortened in the middle to fit the context."""

    model_config = ConfigDict(extra="forbid")

    message: int = Field(ge=0)
    """Index of the message in `messages`."""
    start: int = Field(ge=0)
    """First character of the span in that message's content."""
    end: int = Field(ge=0)
    """One past the last character of the span."""


class ChatRequest(BaseModel):
    """A chat completion to generate."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]]
    """OpenAI-style messages: role, content (and tool_calls / tool_call_id where used)."""
    max_tokens: int = 1024
    """Upper bound on generated tokens."""
    temperature: float = 0.0
    """0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass (ignored when greedy)."""
    seed: int | None = None
    """Sampling seed; with greedy decoding it changes nothing."""
    stop: list[str] = Field(default_factory=list)
    """Strings that end the generation (the stop string itself is not returned)."""
    stop_after_json: bool = False
    """End the generation once the first top-level JSON object of the output closes (braces
    counted outside strings); the text ends at its closing brace. The hf engine stops decoding
    there; vllm and openai engines cut the text there."""
    json_schema: dict[str, Any] | None = None
    """Decode the answer under this JSON schema, so that it parses whatever the model would rather
    write (hf: a token mask in shared-prefix decoding; vllm: its structured outputs; openai:
    `response_format`). A model that thinks first (`enable_thinking`) is constrained after its
    `</think>` (hf), or not at all (vllm, openai: their reasoning parsers are server settings)."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI-style tool schemas, rendered by the chat template or sent natively."""
    prefill: str = ""
    """Text the assistant turn starts with; generation continues after it."""
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra chat-template switches, e.g. {"enable_thinking": false}."""
    elastic: Span | None = None
    """What to elide (head and tail kept, a marker between) when the prompt exceeds the model's
    context; None: the longest message content."""


class Generation(BaseModel):
    """A generated completion."""

    text: str
    """Generated text after the prefill (stop string removed)."""
    prompt_tokens: int = 0
    """Tokens in the rendered prompt."""
    output_tokens: int = 0
    """Tokens generated."""
    finish_reason: str = "stop"
    """stop | length | error."""
    tool_calls: list[dict[str, Any]] | None = None
    """Native tool calls when the backend returns them (OpenAI endpoints)."""
    truncated_tokens: int = 0
    """Prompt tokens elided to fit the model's context (0: the prompt fit whole)."""


class ChoiceRequest(BaseModel):
    """One prompt whose next continuation is to be chosen among candidates."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]]
    """The chat up to the assistant turn."""
    prefill: str = ""
    """Start of the assistant turn, up to where the choice is made."""
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Chat-template switches; choice scoring always disables thinking where a template has it."""
    elastic: Span | None = None
    """What to elide when the prompt exceeds the model's context (see ChatRequest.elastic)."""


class ChoiceGroup(BaseModel):
    """Prompts that share a long prefix (e.g. all rubrics of one report); never split across passes."""

    key: str
    """Caller's id for the group (e.g. task/agent/run), used for routing and logs."""
    requests: list[ChoiceRequest]
    """The prompts of the group."""


class ChoiceResult(BaseModel):
    """Scores of the candidate continuations of one prompt."""

    probs: list[float]
    """Probabilities renormalised over the candidates (sum to 1)."""
    logprobs: list[float]
    """Raw next-token log-probabilities of each candidate's first distinguishing token."""
    truncated_tokens: int = 0
    """Prompt tokens elided to fit the model's context (0: the prompt fit whole)."""


class EngineInfo(BaseModel):
    """What an engine says about itself: the parts of a judge's fingerprint the engine knows."""

    model_config = ConfigDict(extra="forbid")

    engine: str
    """The engine: hf, vllm, openai (a test double or other engine: its class name)."""
    weights_hash: str | None = None
    """Hash of the weights as the engine loaded them (`model_hash()`); None where the engine cannot
    see them (an endpoint: its `model_hash()` names the endpoint, which is where it runs, not what)."""
    version: str | None = None
    """Version of the library that computes (transformers, vllm); None where the engine cannot say (an endpoint)."""
    dtype: str | None = None
    """Compute dtype of the weights as loaded (float32, bfloat16, …); None where unknown."""
    kernel_form: str | None = None
    """The choice-scoring form the packed kernel runs (shared, two_stage, single); None without the packed kernel."""


class Engine:
    """What every engine (hf, vllm, openai, a Ray pool of them) offers: two verbs, and defaults
    for the rest, so that callers never probe an engine for what it has."""

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        """Complete each chat request."""
        raise NotImplementedError

    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        """For every prompt of every group, score the candidate continuations `choices`."""
        raise NotImplementedError

    def iter_score_choices(
        self, groups: Sequence[ChoiceGroup], choices: Sequence[str]
    ) -> Iterator[tuple[list[int], list[list[ChoiceResult]]]]:
        """`score_choices` as (group indices, their results) chunks, so a caller can save each
        before a kill; engines that finish groups one at a time yield them one at a time."""
        yield list(range(len(groups))), self.score_choices(groups, choices)

    def close(self) -> None:
        """Release processes and memory now rather than at garbage collection."""

    def model_hash(self) -> str | None:
        """A short hash identifying the weights served (None: not known to this engine)."""
        return None

    def stats(self) -> dict[str, Any]:
        """Counters of the work done (tokens, passes, retries); flat, JSON-ready."""
        return {}

    def identity(self) -> EngineInfo:
        """The engine, its library's version, dtype and kernel form (a judge's fingerprint reads them)."""
        return EngineInfo(engine=type(self).__name__, weights_hash=self.model_hash())


class UnsupportedModelError(RuntimeError):
    """The model cannot be served by this backend or kernel (e.g. hybrid attention)."""
