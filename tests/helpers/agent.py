"""Scripted agent turns, the bundled corpus as the whole web, and agent settings for short test runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lifesearch_local.agent.config import AgentConfig, PythonToolConfig, ToolsConfig
from lifesearch_local.records import Task
from lifesearch_local.web.config import SearchConfig, WebConfig
from serving.protocol import ChatRequest, Generation
from tests.helpers.inputs import CORPUS


def call(name: str, **arguments) -> str:
    """A Hermes/Qwen tool call as the model writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"


def turn(request: ChatRequest) -> int:
    """Which decision of its task a request asks for (0-based): the assistant turns so far."""
    return sum(m["role"] == "assistant" for m in request.messages)


class Script:
    """Scripted decisions per task question: turn i gets turns[i] (the last one repeats).

    A turn is a string, a Generation, or a function of the request returning either.
    """

    def __init__(self, by_question: dict[str, list]):
        self.by_question = by_question
        self.requests: list[ChatRequest] = []

    def __call__(self, request: ChatRequest) -> str | Generation:
        self.requests.append(request)
        turns = self.by_question[request.messages[1]["content"]]
        item = turns[min(turn(request), len(turns) - 1)]
        return item(request) if callable(item) else item

    def for_task(self, task: Task) -> list[ChatRequest]:
        return [r for r in self.requests if r.messages[1]["content"] == task.question]


def web_config(index_dir: Path | None = None, **kw) -> WebConfig:
    """The bundled corpus as the whole web: BM25 search over it, pages from disk, loopback allowed."""
    return WebConfig(mode="live", corpus_dirs=[CORPUS], allow_networks=["127.0.0.0/8"], respect_robots=False,
                     search=SearchConfig(backend="local", index_dir=index_dir), **kw)


def agent_config(**kw) -> AgentConfig:
    tools = kw.pop("tools", {})
    python = PythonToolConfig(**{"wall_s": 10.0, "cpu_s": 5, "memory_mb": 512, **tools.pop("python", {})})
    return AgentConfig(id=kw.pop("id", "scripted"), temperature=0.0, model_retries=0,
                       tools=ToolsConfig(**{"python": python, "timeout_s": 20.0, **tools}), **kw)


Turn = str | Generation | Callable[[ChatRequest], str | Generation]
