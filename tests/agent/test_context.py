"""The agent's context: rendered through a real chat template, and its budget calibrated by what the engine elided."""

from __future__ import annotations

import pytest

from lifesearch_local.agent.config import ToolsConfig
from lifesearch_local.agent.context import Context
from lifesearch_local.agent.observation import Observation
from lifesearch_local.agent.python_tool import PythonTool
from lifesearch_local.agent.toolcalls import parse_decision
from lifesearch_local.agent.tools import WebFetchTool
from serving.protocol import Generation
from tests.helpers.agent import call


def test_tool_calls_and_results_round_trip_through_the_template():
    # The function tokenizer.apply_chat_template renders with (importing a tokenizer costs seconds).
    from transformers.utils.chat_template_utils import render_jinja_template

    from serving.models.tiny import CHAT_TEMPLATE

    settings = ToolsConfig()
    tools = {"web_fetch": WebFetchTool(settings, None), "python": PythonTool(settings)}
    ctx = Context("SYSTEM PROMPT", "What is the fee?", [t.schema for t in tools.values()], 100)
    decision = parse_decision(Generation(text="Checking.\n" + call("web_fetch", url="https://a.example/fee")), tools, 1)
    ctx.add_decision(decision)
    ctx.add_results(decision.calls, [Observation(text="URL: https://a.example/fee\n\nThe fee is $45.")])
    (text,), _ = render_jinja_template([ctx.request_messages()], tools=ctx.tool_schemas, chat_template=CHAT_TEMPLATE,
                                       add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nSYSTEM PROMPT\n\n# Tools")
    assert '"name": "web_fetch"' in text and '"name": "python"' in text
    assert ('<|im_start|>assistant\nChecking.<tool_call>\n{"name": "web_fetch", "arguments": {"url": "https://a.example/fee"}}'
            '\n</tool_call><|im_end|>') in text
    assert "<tool_response>\nURL: https://a.example/fee\n\nThe fee is $45.\n</tool_response>" in text
    # What the template renders for a past call parses back into the same call.
    rendered = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    again = parse_decision(Generation(text=rendered), tools, 2)
    assert [(c.name, c.arguments) for c in again.calls] == [("web_fetch", {"url": "https://a.example/fee"})]


def test_agent_context_learns_from_what_the_engine_elided():
    """When the engine had to elide (the agent's budget exceeds the model's context), the agent's
    estimate grows by that much, so its own budget cuts old tool results on the next call."""

    plain, told = (Context("sys", "question", [], keep_chars=100) for _ in range(2))
    plain.calibrate(1000, 1000)
    told.calibrate(1000, 1000, truncated_tokens=1000)
    assert plain.scale == pytest.approx(1.0) and told.scale == pytest.approx(2.0)
