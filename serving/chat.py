"""Chat prompts as token ids: template text keeps its control tokens, data never becomes one; fitting to the context.

The chat template is rendered with a sentinel in place of every piece of data (message
contents, tool-call arguments); the rendered text is cut at the sentinels, template parts
are tokenized as usual (their `<|im_start|>`, BOS … are real control tokens) and data
parts with special tokens split, so a report that contains `<|im_end|>` or `<tool_call>`
stays text. A piece boundary is a token boundary (no BPE merge across it).

A prompt longer than the model's context is fitted: the elastic data part (the report,
marked by the caller; else the longest data part) loses its middle, head and tail kept
around an explicit marker; the elided token count comes back with the result.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .protocol import ChatRequest, ChoiceGroup, Span

MARKER = "\n\n[… {n} tokens omitted here to fit the model's context …]\n\n"
_CONTROL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_IGNORES_TOOLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PROBE_TOOL = {"type": "function", "function": {"name": "lifesearch_probe_tool", "description": "probe",
                                                 "parameters": {"type": "object", "properties": {}}}}
# For templates that drop `tools` (SmolLM2's does): the tools and the call format go into the
# system message in the Hermes/Qwen convention that agent/toolcalls.py parses.
TOOLS_BLOCK = (
    "\n\n# Tools\n\nYou can call these functions. Their signatures, one JSON object per line:\n<tools>\n{tools}\n</tools>\n\n"
    "To call one, answer with a JSON object holding its name and arguments between tags, like this:\n"
    '<tool_call>\n{{"name": "function_name", "arguments": {{"arg": "value"}}}}\n</tool_call>'
)


@dataclass
class Item:
    """One prompt to score: its token ids and the candidate next tokens."""

    ids: list[int]
    candidates: list[int]


class ContextOverflowError(ValueError):
    """A prompt cannot be fitted into the model's context even with its data elided."""


def _tok(tokenizer: Any, text: str, *, split: bool) -> list[int]:
    # verbose=False: a report longer than the model is expected here (it is fitted afterwards)
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=split, verbose=False)["input_ids"])


def control_tokens(tokenizer: Any) -> tuple[frozenset[int], tuple[str, ...]]:
    """Ids and texts of the tokenizer's added tokens (special or not, e.g. Qwen's `<think>`),
    whitespace-only ones excepted: what data must never be tokenized into."""
    if tokenizer not in _CONTROL:
        added = {i: str(getattr(t, "content", t)) for i, t in tokenizer.added_tokens_decoder.items()}
        added = {i: s for i, s in added.items() if s.strip()}
        _CONTROL[tokenizer] = (frozenset(added), tuple(sorted(set(added.values()), key=len, reverse=True)))
    return _CONTROL[tokenizer]


def encode_data(tokenizer: Any, text: str) -> list[int]:
    """Token ids of data text in which no added token is matched.

    `split_special_tokens` covers special tokens only; added tokens that are not special
    (`<think>`, `<tool_call>` in Qwen tokenizers) still match, so every occurrence of one is
    cut after its first character and the pieces are tokenized apart.
    """
    ids = _tok(tokenizer, text, split=True)
    control, texts = control_tokens(tokenizer)
    if control.isdisjoint(ids):
        return ids
    cuts = sorted({m.start() + 1 for t in texts if len(t) > 1 for m in re.finditer(re.escape(t), text)})
    out: list[int] = []
    for a, b in zip([0, *cuts], [*cuts, len(text)]):
        part = _tok(tokenizer, text[a:b], split=True)
        if not control.isdisjoint(part):  # a normalizer rebuilt one: fall back to characters
            part = [i for ch in text[a:b] for i in _tok(tokenizer, ch, split=True)]
        if not control.isdisjoint(part):
            raise ValueError(f"cannot tokenize {text[a:b][:40]!r} without producing a control token")
        out += part
    return out


@dataclass
class Segment:
    """A run of prompt tokens: template text or data (`elastic`: the part the caller marked)."""

    ids: list[int]
    data: bool
    elastic: bool = False


def ignores_tools(tokenizer: Any) -> bool:
    """Whether the chat template renders the same with and without a tool list (the tools would be lost)."""
    if tokenizer not in _IGNORES_TOOLS:
        msgs = [{"role": "user", "content": "x"}]
        try:
            with_tools = tokenizer.apply_chat_template(msgs, tools=[_PROBE_TOOL], tokenize=False, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 - a template that cannot take tools at all ignores them too
            with_tools = None
        plain = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        _IGNORES_TOOLS[tokenizer] = with_tools is None or with_tools == plain
    return _IGNORES_TOOLS[tokenizer]


def _inline_tools(messages: list[dict[str, Any]], tools: list, mark: Any) -> list[dict[str, Any]]:
    """Messages (contents already marked) with the tool list in the system message and past
    calls written as `<tool_call>` text: what a template that drops `tools` cannot say itself."""
    block = TOOLS_BLOCK.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    out = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = "".join(_call_text(c, mark) for c in m.pop("tool_calls"))
            m["content"] = (m.get("content") or "") + calls if m.get("content") else calls.lstrip("\n")
        out.append(m)
    if out and out[0].get("role") == "system":
        out[0]["content"] = (out[0].get("content") or "") + block
    else:
        out.insert(0, {"role": "system", "content": block.lstrip()})
    return out


def _call_text(call: dict[str, Any], mark: Any) -> str:
    fn = call.get("function") or {}
    args = fn.get("arguments")
    args = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
    return f'\n<tool_call>\n{{"name": {json.dumps(fn.get("name", ""))}, "arguments": {mark(args)}}}\n</tool_call>'


def _nonce(strings: Sequence[str]) -> str:
    for k in range(1000):  # bounded: some tag is absent from any real data
        tag = f"LSDATA{k}Q"
        if not any(tag in s for s in strings):
            return tag
    raise ValueError("no free sentinel for the chat template")


def chat_segments(tokenizer: Any, messages: Sequence[dict[str, Any]], *, tools: list | None = None,
                  elastic: Span | None = None, memo: dict[str, list[int]] | None = None,
                  **template_kwargs: Any) -> list[Segment]:
    """The chat template applied up to the assistant turn, as template and data segments.

    `memo` keeps data token ids across calls (the rubric prompts of a report repeat the report).
    """
    memo = {} if memo is None else memo
    data: list[str] = []
    marks: list[bool] = []
    strings = [str(m.get("content") or "") for m in messages]
    strings += [str(c.get("function", {}).get("arguments", "")) for m in messages for c in m.get("tool_calls") or []]
    tag = _nonce(strings)

    def mark(text: str, is_elastic: bool = False) -> str:
        data.append(text)
        marks.append(is_elastic)
        return f"{tag}{len(data) - 1}E"

    inline = bool(tools) and ignores_tools(tokenizer)
    marked = []
    for i, m in enumerate(messages):
        m = dict(m)
        content = m.get("content")
        if isinstance(content, str):
            if elastic is not None and elastic.message == i:
                s, e = min(elastic.start, len(content)), min(max(elastic.end, elastic.start), len(content))
                m["content"] = mark(content[:s]) + mark(content[s:e], True) + mark(content[e:])
            else:
                m["content"] = mark(content)
        if m.get("tool_calls") and not inline:
            m["tool_calls"] = [_mark_call(c, mark) for c in m["tool_calls"]]
        marked.append(m)
    if inline:
        marked, tools = _inline_tools(marked, tools, mark), None
    text = tokenizer.apply_chat_template(marked, tools=tools, tokenize=False, add_generation_prompt=True, **template_kwargs)
    segments: list[Segment] = []
    for k, part in enumerate(re.split(f"{tag}(\\d+)E", text)):
        if k % 2 == 0:
            if part:
                segments.append(Segment(_tok(tokenizer, part, split=False), data=False))
        else:
            j = int(part)
            if data[j] not in memo:
                memo[data[j]] = encode_data(tokenizer, data[j])
            segments.append(Segment(memo[data[j]], data=True, elastic=marks[j]))  # shared, never mutated
    return segments


def _mark_call(call: dict[str, Any], mark: Any) -> dict[str, Any]:
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
        return call
    return {**call, "function": {**fn, "arguments": mark(fn["arguments"])}}


def ids_of(segments: Sequence[Segment]) -> list[int]:
    return [i for s in segments for i in s.ids]


def _need(prompts: Sequence[list[Segment]], extra: Sequence[int]) -> int:
    return max(sum(len(s.ids) for s in p) + x for p, x in zip(prompts, extra))


def context_limit(config: Any, cap: int | None = None) -> int | None:
    """Positions the model can take: its config's limit, lowered by a configured cap."""
    n = next((getattr(config, a) for a in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
              if isinstance(getattr(config, a, None), int)), None)
    if cap is not None:
        n = min(n, cap) if n is not None else cap
    return n


def _order(prompt: Sequence[Segment]) -> list[int]:
    """Segments to elide, in turn: the caller's elastic span first, then data by size."""
    idx = [k for k, s in enumerate(prompt) if s.data]
    return sorted(idx, key=lambda k: (not prompt[k].elastic, -len(prompt[k].ids)))


def fit_group(tokenizer: Any, prompts: Sequence[list[Segment]], extra: Sequence[int], limit: int | None) -> int:
    """Elide data (the same segment, the same amount, in every prompt, so a shared prefix stays
    shared) until every prompt plus its `extra` positions fits `limit`. Returns tokens elided."""
    if limit is None or not prompts:
        return 0
    total = 0
    for k in _order(prompts[0]):
        over = _need(prompts, extra) - limit
        if over <= 0:
            return total
        n = min(len(p[k].ids) for p in prompts)
        cut, mk = min(over, n), []
        for _ in range(4):  # the marker's length depends on the number it prints
            mk = encode_data(tokenizer, MARKER.format(n=cut))
            new = min(over + len(mk), n)
            if new == cut:
                break
            cut = new
        if cut <= len(mk):  # too short to gain anything by eliding
            continue
        for p in prompts:
            ids = p[k].ids
            keep = len(ids) - cut
            head = (keep + 1) // 2
            p[k] = Segment(ids[:head] + mk + ids[len(ids) - (keep - head):], data=True, elastic=p[k].elastic)
        total += cut
    over = _need(prompts, extra) - limit
    if over > 0:
        raise ContextOverflowError(
            f"a prompt needs {over + limit} positions but the model has {limit}, even with its data elided; "
            "shorten the fixed prompt text or use a model with a longer context")
    return total


def decision_item(seqs: Sequence[Sequence[int]], choices: Sequence[str]) -> Item:
    """Ids up to the first token where the full prompt+choice sequences differ, and each one's token there."""
    d = 0
    shortest = min(len(s) for s in seqs)
    while d < shortest and all(s[d] == seqs[0][d] for s in seqs):
        d += 1
    if d == shortest:
        raise ValueError(f"choices {list(choices)} are not told apart by any token (one tokenizes as a prefix of another)")
    cands = [s[d] for s in seqs]
    if len(set(cands)) != len(cands):
        raise ValueError(f"choices {list(choices)} share their first distinguishing token; use choices that differ there")
    if d == 0:
        raise ValueError("empty scoring context: the prompt rendered to nothing")
    return Item(ids=list(seqs[0][:d]), candidates=cands)


def check_choices(choices: Sequence[str]) -> None:
    if len(set(choices)) != len(choices) or len(choices) < 2:
        raise ValueError(f"need at least two distinct choices, got {list(choices)}")


def choice_group_items(tokenizer: Any, group: ChoiceGroup, choices: Sequence[str], limit: int | None) -> tuple[list[Item], int]:
    """The items of one choice group (thinking disabled), fitted to `limit`; and the tokens elided.

    The prefill and each choice are tokenized together (BPE may fuse them), as data.
    """
    check_choices(choices)
    memo: dict[str, list[int]] = {}
    prompts = [chat_segments(tokenizer, r.messages, elastic=r.elastic, memo=memo,
                             **{**r.chat_template_kwargs, "enable_thinking": False})
               for r in group.requests]
    tails = [[encode_data(tokenizer, r.prefill + c) for c in choices] for r in group.requests]
    cut = fit_group(tokenizer, prompts, [max(len(t) for t in ts) for ts in tails], limit)
    items = [decision_item([ids_of(p) + t for t in ts], choices) for p, ts in zip(prompts, tails)]
    return items, cut


def chat_ids(tokenizer: Any, req: ChatRequest, limit: int | None, template_kwargs: dict[str, Any]) -> tuple[list[int], int, int]:
    """(prompt ids, tokens elided, max new tokens) of a chat request fitted to `limit`.

    Room is kept for the generation budget, at most half the context; the budget is then
    capped to what is left, so prompt plus output never pass the model's positions.
    """
    prompt = chat_segments(tokenizer, req.messages, tools=req.tools, elastic=req.elastic,
                           **{**template_kwargs, **req.chat_template_kwargs})
    prefill = encode_data(tokenizer, req.prefill) if req.prefill else []
    reserve = req.max_tokens if limit is None else min(req.max_tokens, limit // 2)
    cut = fit_group(tokenizer, [prompt], [len(prefill) + reserve], limit)
    ids = ids_of(prompt) + prefill
    return ids, cut, req.max_tokens if limit is None else min(req.max_tokens, limit - len(ids))


def render_chat(tokenizer: Any, messages: list[dict], *, prefill: str = "", tools: list | None = None,
                **kwargs: Any) -> str:
    """The chat template applied up to the assistant turn, then the prefill."""
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True, **kwargs)
    return text + prefill


def softmax(xs: Sequence[float]) -> list[float]:
    """Probabilities from logits or log-probabilities (the max subtracted first, so exp never overflows)."""
    import math

    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    s = sum(e)
    return [v / s for v in e]
