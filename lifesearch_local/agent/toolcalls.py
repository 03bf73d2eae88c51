"""One model decision parsed: Hermes/Qwen `<tool_call>` JSON in the text, or native OpenAI tool_calls."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lifesearch_local.agent.tools import Tool, check_arguments
from serving import Generation, JSONError, loads

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_OPEN = "<tool_call>"
_THINK = re.compile(r"<think>.*?</think>", re.S)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


@dataclass
class ToolCall:
    """A well-formed call of a known tool."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class CallError:
    """A call the harness could not run; the model is told why."""

    message: str
    raw: str
    name: str | None = None


@dataclass
class Decision:
    """The model's move: the visible text, and the calls it asked for (possibly several)."""

    content: str
    thinking: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[CallError] = field(default_factory=list)

    @property
    def is_final(self) -> bool:
        """No tool use at all: the text is the answer."""
        return not self.calls and not self.errors


def split_thinking(text: str) -> tuple[str, str]:
    """(thinking, rest): `<think>…</think>` blocks, or everything before a bare `</think>` (the
    chat template opened the block in the prompt)."""
    thoughts = [m[7:-8] for m in _THINK.findall(text)]
    text = _THINK.sub("", text)
    if "</think>" in text:
        before, _, text = text.rpartition("</think>")
        thoughts.insert(0, before.replace("<think>", ""))
    return "\n".join(t.strip() for t in thoughts if t.strip()), text.strip()


def parse_decision(gen: Generation, tools: Mapping[str, Tool], step: int) -> Decision:
    """Parse a generation; malformed or unknown calls become CallErrors, never exceptions."""
    thinking, text = split_thinking(gen.text)
    if gen.tool_calls:
        calls, errors = _native(gen.tool_calls, tools, step)
        return Decision(content=text, thinking=thinking, calls=calls, errors=errors)
    blocks = _CALL.findall(text)
    content = _CALL.sub("", text)
    raws = [b.strip() for b in blocks]
    errors: list[CallError] = []
    if _OPEN in content:  # an opening tag with no closing one: usually cut by max_tokens
        head, _, tail = content.partition(_OPEN)
        content = head
        errors.append(CallError("unterminated <tool_call> (no </tool_call>; the output may have hit max_tokens)", tail[:500]))
    if not raws and not errors and _bare_call(content, tools):
        raws, content = [content.strip()], ""
    calls: list[ToolCall] = []
    for i, raw in enumerate(raws):
        call = _one(raw, f"call_{step}_{i}", tools)
        (calls if isinstance(call, ToolCall) else errors).append(call)
    return Decision(content=content.strip(), thinking=thinking, calls=calls, errors=errors)


def _bare_call(text: str, tools: Mapping[str, Tool]) -> bool:
    """A whole message that is just `{"name": <a known tool>, "arguments": {…}}` (tags lost in decoding)."""
    obj = _loads(text.strip())
    return isinstance(obj, dict) and obj.get("name") in tools and ("arguments" in obj or "parameters" in obj)


def _loads(raw: str) -> Any:
    m = _FENCE.match(raw)
    try:
        return loads(m.group(1) if m else raw)  # bounded: a model can write JSON 100 000 levels deep
    except JSONError:
        return None


def _one(raw: str, call_id: str, tools: Mapping[str, Tool]) -> ToolCall | CallError:
    obj = _loads(raw)
    if not isinstance(obj, dict):
        return CallError("the tool call is not a JSON object like {\"name\": …, \"arguments\": {…}}", raw[:500])
    name = obj.get("name")
    args = obj.get("arguments", obj.get("parameters", {}))
    return _checked(call_id, name, args, raw, tools)


def _checked(call_id: str, name: Any, args: Any, raw: str, tools: Mapping[str, Tool]) -> ToolCall | CallError:
    if not isinstance(name, str) or name not in tools:
        return CallError(f"unknown tool {name!r}; available: {', '.join(tools)}", raw[:500], name if isinstance(name, str) else None)
    if isinstance(args, str):  # some models double-encode the arguments
        args = _loads(args) if args.strip() else {}
    problem = check_arguments(tools[name].schema, args)
    if problem:
        return CallError(f"{name}: {problem}", raw[:500], name)
    return ToolCall(call_id, name, args)


def _native(items: list[dict[str, Any]], tools: Mapping[str, Tool], step: int) -> tuple[list[ToolCall], list[CallError]]:
    calls: list[ToolCall] = []
    errors: list[CallError] = []
    for i, item in enumerate(items):
        fn = item.get("function") or {}
        raw = json.dumps(item, ensure_ascii=False)
        call = _checked(str(item.get("id") or f"call_{step}_{i}"), fn.get("name"), fn.get("arguments", {}), raw, tools)
        (calls if isinstance(call, ToolCall) else errors).append(call)
    return calls, errors
