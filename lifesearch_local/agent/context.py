"""The conversation of one task: messages, a calibrated token estimate, and truncation to the context budget."""

from __future__ import annotations

import json
import re
from typing import Any

from lifesearch_local.agent.observation import Observation
from lifesearch_local.agent.toolcalls import CallError, Decision, ToolCall

FINAL_ANSWER = ("The {limit} budget of this task is used up. Do not call any more tools. "
                "Write your final answer to the task now, based on the evidence you have gathered.")
_CJK = re.compile(r"[\u3000-\u9fff\uf900-\ufaff\uff00-\uffef]")
_PER_MESSAGE = 6  # role markers and separators the chat template adds


def rough_tokens(text: str) -> int:
    """A tokenizer-free estimate: one token per CJK character, one per three other characters.

    Deliberately on the high side for English BPE vocabularies; `Context` rescales it with the
    prompt token counts the engine reports.
    """
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 2) // 3


def _size(message: dict[str, Any]) -> int:
    calls = message.get("tool_calls") or []
    return _PER_MESSAGE + rough_tokens(message.get("content") or "") + sum(rough_tokens(json.dumps(c, ensure_ascii=False)) for c in calls)


class Context:
    """Messages sent to the model; tool results can be cut, oldest first, to fit a token budget."""

    def __init__(self, system: str, question: str, tool_schemas: list[dict[str, Any]], keep_chars: int):
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        self.keep_chars = keep_chars
        self.tool_schemas = tool_schemas
        self._tool_overhead = rough_tokens(json.dumps(tool_schemas, ensure_ascii=False))
        self._results: list[int] = []  # indices of tool-result messages, oldest first
        self._cut: set[int] = set()
        self.scale = 1.0  # engine-reported prompt tokens / rough estimate, from the last call

    # -- growing the conversation ----------------------------------------------------------
    def add_decision(self, decision: Decision) -> None:
        msg: dict[str, Any] = {"role": "assistant", "content": decision.content}
        if decision.calls:
            msg["tool_calls"] = [_wire(c) for c in decision.calls]
        self.messages.append(msg)

    def add_results(self, calls: list[ToolCall], observations: list[Observation]) -> None:
        for call, obs in zip(calls, observations):
            self._results.append(len(self.messages))
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": obs.text})

    def add_errors(self, errors: list[CallError]) -> None:
        if errors:
            lines = [f"- {e.message}" + (f"\n  call: {e.raw}" if e.raw else "") for e in errors]
            text = ("[error: malformed tool call] These tool calls could not be run:\n" + "\n".join(lines)
                    + '\nCall a tool as <tool_call>{"name": "<tool>", "arguments": {…}}</tool_call>.')
            self.messages.append({"role": "user", "content": text})

    # -- the budget ------------------------------------------------------------------------
    def estimate(self, extra: str = "") -> int:
        raw = self._tool_overhead + sum(_size(m) for m in self.messages) + (rough_tokens(extra) + _PER_MESSAGE if extra else 0)
        return int(raw * self.scale) + 1

    def calibrate(self, prompt_tokens: int, estimated: int, truncated_tokens: int = 0) -> None:
        """Rescale the estimate by what the engine counted for the same prompt (within 4x either way).

        `truncated_tokens` is what the engine elided to fit the model's positions (our budget was
        above the model's context): the prompt as sent was that much longer, so the next estimate
        grows and `fit` cuts old tool results here instead of the engine cutting the longest message.
        """
        if prompt_tokens > 0 and estimated > 0:
            self.scale = min(4.0, max(0.25, self.scale * (prompt_tokens + truncated_tokens) / estimated))

    def fit(self, budget: int, extra: str = "") -> tuple[bool, int]:
        """Cut tool results, oldest first, until the prompt fits `budget` tokens; (fits, results cut now)."""
        cut = 0
        for i in self._results:
            if self.estimate(extra) <= budget:
                break
            if i not in self._cut:
                self._truncate(i)
                cut += 1
        return self.estimate(extra) <= budget, cut

    def _truncate(self, i: int) -> None:
        text = self.messages[i]["content"]
        if len(text) > self.keep_chars:
            kept = text[: self.keep_chars]
            self.messages[i] = {**self.messages[i], "content": f"{kept}\n[… {len(text) - self.keep_chars} characters "
                                "of this older tool result removed to fit the context budget]"}
        self._cut.add(i)

    def request_messages(self, final_limit: str | None = None) -> list[dict[str, Any]]:
        """The messages of the next call; with `final_limit`, plus the instruction to answer now."""
        if final_limit is None:
            return list(self.messages)
        return [*self.messages, {"role": "user", "content": FINAL_ANSWER.format(limit=final_limit)}]

    def final_prompt(self, limit: str) -> str:
        return FINAL_ANSWER.format(limit=limit)


def _wire(call: ToolCall) -> dict[str, Any]:
    """OpenAI wire form of a call (chat templates render it back as <tool_call> JSON)."""
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
