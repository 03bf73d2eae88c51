"""vLLM's structured outputs decode the judge's verdict under its JSON schema (the real CPU engine, smollm2-135m)."""

from __future__ import annotations

import json

from lifesearch_local.judge.rubric import parse_verdict
from lifesearch_local.judge.verdict import REASON_MAX_CHARS, VERDICT_SCHEMA
from serving.protocol import ChatRequest

PROSE = [{"role": "user", "content": "Write a long poem about the sea, in verse, with no JSON at all."}]


def test_vllm_writes_the_verdict_under_the_schema_where_it_would_write_prose(engine):
    free, bound = engine.generate([ChatRequest(messages=PROSE, max_tokens=48),
                                   ChatRequest(messages=PROSE, max_tokens=200, json_schema=VERDICT_SCHEMA)])
    assert parse_verdict(free.text) is None  # asked for prose, the model writes prose
    obj = json.loads(bound.text)
    assert set(obj) == {"satisfied", "reason"} and isinstance(obj["satisfied"], bool)
    assert len(obj["reason"]) <= REASON_MAX_CHARS and parse_verdict(bound.text) is not None
