"""Generated text never carries U+FFFD from a multi-byte character split across byte tokens."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from lifesearch_local.llm.models import engine_config  # noqa: E402
from serving.config import model_config  # noqa: E402
from serving.decoding import JsonObjectEnd, _byte_decoder, cut_after_json, decode_generated, json_object_end  # noqa: E402  # noqa: E402
from serving.engines.hf import HFEngine  # noqa: E402
from serving.models.tiny import train_tokenizer, wrap_tokenizer  # noqa: E402
from serving.protocol import (
    ChatRequest,  # noqa: E402
    )

FFFD = "\ufffd"


@pytest.fixture(scope="module")
def tok():
    return wrap_tokenizer(train_tokenizer(["价格 45 元 hello world, the fee"] * 5, vocab_size=400))


def byte_id(tok, b: int) -> int:
    return tok.convert_tokens_to_ids({v: k for k, v in _byte_decoder().items()}[b])


def test_a_character_cut_at_the_end_is_held_back(tok):
    ids = tok("fee 45", add_special_tokens=False)["input_ids"] + [byte_id(tok, 0xE4), byte_id(tok, 0xBB)]  # 2 of 3 bytes
    assert tok.decode(ids).endswith(FFFD)  # what a plain decode gives
    assert decode_generated(tok, ids) == "fee 45"


def test_a_lone_byte_inside_the_text_is_dropped_and_whole_characters_kept(tok):
    ids = [byte_id(tok, 0xE4)] + tok("价格 45 元", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert decode_generated(tok, ids) == "价格 45 元"


def test_a_spelled_out_replacement_character_and_markup_tokens_survive(tok):
    ids = tok(f"a{FFFD}b <tool_call>x", add_special_tokens=False)["input_ids"] + [byte_id(tok, 0xE4)]
    assert decode_generated(tok, ids) == f"a{FFFD}b <tool_call>x"


def test_hf_backend_generate_decodes_without_replacement_characters(monkeypatch):
    import torch


    # the padded path, where `model.generate` can be replaced (prefix_decode decodes with the same function)
    backend = HFEngine(engine_config(model_config(model="tiny-qwen3", device="cpu", kernel="single", generate_form="padded")))
    tail = [byte_id(backend.tokenizer, 0xE5), byte_id(backend.tokenizer, 0x85)]  # "元" is E5 85 83: cut before 83
    body = backend.tokenizer("价格 45", add_special_tokens=False)["input_ids"]

    def fake_generate(input_ids, **kw):  # the model "writes" body + a split character, then hits max_tokens
        out = torch.tensor([body + tail] * input_ids.shape[0])
        return torch.cat([input_ids, out], dim=1)

    monkeypatch.setattr(backend.model, "generate", fake_generate)
    (gen,) = backend.generate([ChatRequest(messages=[{"role": "user", "content": "fee?"}], max_tokens=len(body) + 2)])
    assert FFFD not in gen.text and gen.text == "价格 45"
    assert gen.finish_reason == "length" and gen.output_tokens == len(body) + 2


@pytest.mark.parametrize("text,end", [
    ('{"satisfied": false, "reason": "no"}\n\nMore', 36),
    ('Sure: {"a": {"b": "}"}, "c": "\\"}"} x', 35),
    ('```json\n{"satisfied": true}\n```', 27),
    ('"}" {"a": 1', None),
    ("no object", None),
])
def test_json_object_end(text, end):
    assert json_object_end(text) == end
    tracker = JsonObjectEnd()
    fed = [tracker.feed(text[:k]) for k in range(1, len(text) + 1)]  # as decoding grows the text
    assert fed[-1] == end and (end is None or fed.index(end) == end - 1)
    assert cut_after_json(text) == ((text[:end], True) if end else (text, False))


def test_json_object_end_waits_for_a_split_character():
    tracker = JsonObjectEnd()
    assert tracker.feed('{"r": "a\ufffd') is None
    assert tracker.feed('{"r": "a价"} tail') == 11
