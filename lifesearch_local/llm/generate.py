"""Generate-and-parse helpers shared by the judge, curation and ReportEval: JSON answers, bounded retries."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from serving import ChatRequest, Engine, ModelConfig, Span

T = TypeVar("T")

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_object(text: str, accept: Callable[[dict], T | None]) -> T | None:
    """The first JSON object in `text` that `accept` turns into a value (fences and chatter tolerated)."""
    body = _FENCE.sub("", text.strip())
    start = body.find("{")
    while start != -1:  # bounded: each turn moves past one opening brace
        try:
            obj, _ = json.JSONDecoder().raw_decode(body[start:])
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            value = accept(obj)
            if value is not None:
                return value
        start = body.find("{", start + 1)
    return None


class RetrySettings(Protocol):
    """What the retrying generators read from a config (JudgeConfig, CurateConfig, …)."""

    retries: int
    temperature: float
    model: ModelConfig


def generate_attempts(
    backend: Engine, cfg: RetrySettings, prompts: Sequence[str], parses: Sequence[Callable[[str], T | None]], *,
    max_tokens: int, seed: int = 0, reject_truncated: bool = False,
) -> list[tuple[T | None, list[str]]]:
    """`generate_parsed` with one parser per prompt, keeping every attempt's raw text.

    With `reject_truncated`, an answer cut off at `max_tokens` is invalid whatever it parses to
    (a cut-off rewrite would otherwise pass for a shorter one). Returns (parsed or None, raw
    texts of all attempts in order) per prompt.
    """
    results = _attempts(backend, cfg, prompts, parses, max_tokens=max_tokens, seed=seed, reject_truncated=reject_truncated)
    return [(v, raws) for v, raws, _ in results]


def _attempts(
    backend: Engine, cfg: RetrySettings, prompts: Sequence[str], parses: Sequence[Callable[[str], T | None]], *,
    max_tokens: int, seed: int = 0, reject_truncated: bool = False, spans: Sequence[Span | None] | None = None,
    template_kwargs: dict | None = None, stop_after_json: bool = False, json_schema: dict | None = None,
) -> list[tuple[T | None, list[str], int]]:
    """The retry loop; also returns the prompt tokens the backend elided to fit its context.
    `stop_after_json`: each answer ends where its first JSON object closes; `json_schema`: each
    answer is decoded under it (see ChatRequest), so a retry is left for what a schema cannot
    prevent (an answer cut at the token cap, a transport error)."""
    parsed: list[T | None] = [None] * len(prompts)
    raws: list[list[str]] = [[] for _ in prompts]
    cut = [0] * len(prompts)
    for attempt in range(cfg.retries + 1):
        todo = [i for i, v in enumerate(parsed) if v is None]
        if not todo:
            break
        reqs = [ChatRequest(
            messages=[{"role": "user", "content": prompts[i]}], max_tokens=max_tokens,
            temperature=cfg.temperature if attempt == 0 else max(cfg.temperature, 0.7),
            seed=cfg.model.seed + seed + attempt, elastic=spans[i] if spans else None,
            chat_template_kwargs=template_kwargs or {}, stop_after_json=stop_after_json, json_schema=json_schema,
        ) for i in todo]
        for i, gen in zip(todo, backend.generate(reqs)):
            raws[i].append(gen.text)
            cut[i] = gen.truncated_tokens
            parsed[i] = None if reject_truncated and gen.finish_reason == "length" else parses[i](gen.text)
    return list(zip(parsed, raws, cut))


def judge_template_kwargs(cfg: RetrySettings) -> dict:
    """A judge answers with thinking off (Qwen3-style templates), unless its model config says otherwise."""
    return {"enable_thinking": False, **cfg.model.chat_template_kwargs}


def generate_parsed(
    backend: Engine, cfg: RetrySettings, prompts: Sequence[str], parse: Callable[[str], T | None], *,
    max_tokens: int, seed: int = 0,
) -> list[tuple[T | None, str | None]]:
    """Generate an answer per prompt (thinking off); unparseable ones are retried (cfg.retries times,
    a new seed and at least temperature 0.7), then left None. Returns (parsed, raw text) per prompt."""
    return [(v, raws[-1] if raws else None) for v, raws, _ in generate_parsed_fitted(
        backend, cfg, prompts, parse, max_tokens=max_tokens, seed=seed)]


def generate_parsed_fitted(
    backend: Engine, cfg: RetrySettings, prompts: Sequence[str], parse: Callable[[str], T | None], *,
    max_tokens: int, seed: int = 0, spans: Sequence[Span | None] | None = None, stop_after_json: bool = False,
    json_schema: dict | None = None,
) -> list[tuple[T | None, str | None, int]]:
    """`generate_parsed` where `spans` mark what may be elided to fit the context; adds the tokens elided."""
    results = _attempts(backend, cfg, prompts, [parse] * len(prompts), max_tokens=max_tokens, seed=seed, spans=spans,
                        template_kwargs=judge_template_kwargs(cfg), stop_after_json=stop_after_json,
                        json_schema=json_schema)
    return [(v, raws[-1] if raws else None, cut) for v, raws, cut in results]
