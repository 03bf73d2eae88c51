"""Generate mode under the verdict's JSON schema: a model pushed toward prose still answers with a valid verdict."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.judge.rubric import parse_verdict
from lifesearch_local.judge.verdict import REASON_MAX_CHARS, VERDICT_SCHEMA
from lifesearch_local.llm.models import tiny_model_dir
from serving.config import model_config
from serving.engines.openai import chat_body
from serving.engines.vllm import sampling_kwargs
from serving.grammar import in_thinking, thinks
from serving.kernels.prefix_decode import Row
from serving.protocol import ChatRequest

pytest.importorskip("llguidance")



MSGS = [{"role": "user", "content": "Does the report name the capital of France? Answer with JSON."}]


@pytest.fixture(scope="module", params=["shared_prefix", "padded"])
def engine(request):
    """The tiny random model on both hf generation paths (shared-prefix decoding; model.generate, padded)."""
    from serving.engines.hf import HFEngine

    return HFEngine(model_config(backend="hf", model=str(tiny_model_dir("tiny-llama")), device="cpu",
                                  generate_form=request.param))


@pytest.fixture
def against_braces(engine):
    """The model's logits biased hard against every token that starts with '{' (what the verdict must start with)."""
    tok = engine.tokenizer
    brace = [i for i in range(len(tok)) if tok.decode([i]).lstrip().startswith("{")]
    assert brace

    def bias(_module, _inputs, out):
        out[..., brace] -= 1e4
        return out

    handle = engine.model.get_output_embeddings().register_forward_hook(bias)
    yield
    handle.remove()


def verdicts(engine, schema, n=3, max_tokens=96):
    reqs = [ChatRequest(messages=MSGS + [{"role": "assistant", "content": f"draft {i}"}, MSGS[0]], max_tokens=max_tokens,
                        json_schema=schema) for i in range(n)]
    return engine.generate(reqs)


def test_a_model_pushed_away_from_json_still_writes_a_valid_verdict_under_the_schema(engine, against_braces):
    free = verdicts(engine, None)
    assert all(parse_verdict(g.text) is None for g in free)  # without the schema: no verdict at all
    got = verdicts(engine, VERDICT_SCHEMA)
    for g in got:
        v = parse_verdict(g.text)
        assert v is not None, g.text
        obj = json.loads(g.text)
        assert set(obj) == {"satisfied", "reason"} and isinstance(obj["satisfied"], bool)
        assert len(obj["reason"]) <= REASON_MAX_CHARS
        assert g.finish_reason == "stop" and g.text.endswith("}")


def test_the_schema_bounds_the_answer_so_it_closes_before_the_token_cap(engine):
    # the random model would write to the cap; the schema's bounded reason makes it close the object first
    got = verdicts(engine, VERDICT_SCHEMA, n=2, max_tokens=REASON_MAX_CHARS + 40)
    assert all(g.finish_reason == "stop" and parse_verdict(g.text) is not None for g in got), [g.text for g in got]


def test_a_thinking_row_is_free_until_its_think_block_closes():
    from serving.engines.hf import HFEngine

    engine = HFEngine(model_config(backend="hf", model=str(tiny_model_dir("tiny-llama")), device="cpu"))
    assert thinks({"enable_thinking": True}) and not thinks({"enable_thinking": False}) and not thinks({})
    assert in_thinking("<|im_start|>assistant\n<think>\n") and not in_thinking("<think>\n\n</think>\n\n")
    con = engine.decoder._constraint([Row(ids=[1, 2], max_new=4, schema=VERDICT_SCHEMA, think=True),
                                      Row(ids=[1, 2], max_new=4, schema=VERDICT_SCHEMA), Row(ids=[1, 2], max_new=4)])
    assert con.matchers[0] is None and con.waiting == [True, False, False]
    assert con.matchers[1] is not None and con.matchers[2] is None


def test_vllm_and_openai_are_sent_the_schema_unless_the_model_thinks_first():
    req = ChatRequest(messages=MSGS, json_schema=VERDICT_SCHEMA)
    assert sampling_kwargs(req)["structured_outputs"] == VERDICT_SCHEMA
    assert "structured_outputs" not in sampling_kwargs(req, {"enable_thinking": True})
    assert "structured_outputs" not in sampling_kwargs(ChatRequest(messages=MSGS))
    body = chat_body("m", req, {})
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == VERDICT_SCHEMA
    assert "response_format" not in chat_body("m", req, {"enable_thinking": True})
