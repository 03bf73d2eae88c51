"""Parsing model decisions: Hermes/Qwen tool-call text, native calls, thinking, malformed input."""

from __future__ import annotations

import pytest

from lifesearch_local.agent.config import ToolsConfig
from lifesearch_local.agent.python_tool import PythonTool
from lifesearch_local.agent.toolcalls import parse_decision, split_thinking
from lifesearch_local.agent.tools import WebFetchTool, WebSearchTool
from serving.protocol import Generation

SETTINGS = ToolsConfig()
TOOLS = {"web_search": WebSearchTool(SETTINGS, None), "web_fetch": WebFetchTool(SETTINGS, None), "python": PythonTool(SETTINGS)}


def parse(text: str, **kw):
    return parse_decision(Generation(text=text, **kw), TOOLS, step=3)


def test_several_hermes_calls_with_text_around():
    d = parse('Plan: search twice.\n<tool_call>\n{"name": "web_search", "arguments": {"query": "a"}}\n</tool_call>\n'
              '<tool_call>{"name": "web_search", "arguments": "{\\"query\\": \\"b\\", \\"num\\": \\"3\\"}"}</tool_call>')
    assert d.content == "Plan: search twice." and not d.errors and not d.is_final
    assert [(c.id, c.name, c.arguments) for c in d.calls] == [
        ("call_3_0", "web_search", {"query": "a"}), ("call_3_1", "web_search", {"query": "b", "num": "3"})]


def test_plain_text_is_a_final_answer_and_thinking_is_separated():
    d = parse("<think>let me think</think>\n\nThe answer is 42.")
    assert d.is_final and d.content == "The answer is 42." and d.thinking == "let me think"
    assert split_thinking("reasoning opened by the template</think>answer") == ("reasoning opened by the template", "answer")


@pytest.mark.parametrize("text,message", [
    ("<tool_call>{broken</tool_call>", "not a JSON object"),
    ('<tool_call>{"name": "browse", "arguments": {}}</tool_call>', "unknown tool 'browse'"),
    ('<tool_call>{"name": "web_fetch", "arguments": {}}</tool_call>', "missing required argument(s): url"),
    ('<tool_call>{"name": "web_fetch", "arguments": {"url": 5}}</tool_call>', "argument 'url' must be a string"),
    ('<tool_call>{"name": "python", "arguments": {"code": "1", "x": 2}}</tool_call>', "unknown argument 'x'"),
    ('<tool_call>["web_search"]</tool_call>', "not a JSON object"),
    ('I will fetch it.\n<tool_call>\n{"name": "web_fetch", "argu', "unterminated <tool_call>"),
])
def test_malformed_calls_become_errors_not_exceptions(text, message):
    d = parse(text)
    assert not d.calls and len(d.errors) == 1 and message in d.errors[0].message and not d.is_final


def test_a_bare_json_call_is_accepted_when_the_tags_were_lost():
    d = parse('{"name": "python", "parameters": {"code": "print(1)"}}')
    assert d.calls[0].name == "python" and d.content == ""
    assert parse('{"name": "someone", "age": 3}').is_final  # ordinary JSON stays an answer


def test_native_tool_calls_win_over_text():
    gen = Generation(text="calling", tool_calls=[
        {"id": "x1", "type": "function", "function": {"name": "web_fetch", "arguments": '{"url": "https://a.example/"}'}},
        {"id": "x2", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
    ])
    d = parse_decision(gen, TOOLS, step=1)
    assert [(c.id, c.arguments) for c in d.calls] == [("x1", {"url": "https://a.example/"})]
    assert "unknown tool 'nope'" in d.errors[0].message and d.content == "calling"


def test_a_call_nested_100000_deep_is_an_error_not_a_recursion():
    d = parse("<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>")
    assert not d.calls and len(d.errors) == 1 and "not a JSON object" in d.errors[0].message
    assert parse("[" * 100_000 + "]" * 100_000).is_final  # a bare answer that deep is text, not a call
