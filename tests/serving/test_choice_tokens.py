"""The decision is read at the first token where 'true' and 'false' differ, on several tokenizers."""

from __future__ import annotations

import pytest

from lifesearch_local.judge.rubric import PREFILL
from lifesearch_local.llm.models import tiny_training_texts
from serving.engines.hf import choice_items
from serving.engines.tiny import train_tokenizer, wrap_tokenizer

CORPUS = list(tiny_training_texts()) + ['{"satisfied": true, "reason": "x"}\n{"satisfied": false, "reason": "y"}'] * 300


@pytest.fixture(scope="module", params=["plain", "prefix_space", "fused"])
def tokenizer(request):
    kind = request.param
    tok = train_tokenizer(CORPUS, vocab_size=3000, add_prefix_space=kind == "prefix_space", fuse_words=kind == "fused")
    return kind, wrap_tokenizer(tok)


PROMPTS = [
    "<|im_start|>user\nIs the sky blue?<|im_end|>\n<|im_start|>assistant\n" + PREFILL,
    "<|im_start|>user\n题目：天空是蓝色的吗？<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" + PREFILL,
    "no chat template at all, prefill without trailing space:" + PREFILL.rstrip(),
]


@pytest.mark.parametrize("text", PROMPTS)
def test_candidates_are_the_first_differing_tokens(tokenizer, text):
    kind, tok = tokenizer
    (item,) = choice_items(tok, [text], ["true", "false"])
    full_true = tok(text + "true", add_special_tokens=False)["input_ids"]
    full_false = tok(text + "false", add_special_tokens=False)["input_ids"]
    n = len(item.ids)
    assert full_true[:n] == full_false[:n] == item.ids
    assert [full_true[n], full_false[n]] == item.candidates
    assert item.candidates[0] != item.candidates[1]
    assert tok.decode(full_true[n:]).strip().endswith("true")


def test_fused_merges_move_the_decision_point_back():
    """With merges across punctuation, the prompt's own last tokens fuse with the decision word:
    reading the next token after the separately tokenized prompt would score the wrong thing."""
    tok = wrap_tokenizer(train_tokenizer(CORPUS, vocab_size=3000, fuse_words=True))
    text = PROMPTS[0]
    (item,) = choice_items(tok, [text], ["true", "false"])
    alone = tok(text, add_special_tokens=False)["input_ids"]
    assert len(item.ids) < len(alone)  # the decision token starts inside the prompt's tokens
    assert alone[: len(item.ids)] == item.ids
    fused_true, fused_false = (tok.decode([c]) for c in item.candidates)
    assert "tru" in fused_true and not fused_true.startswith("t")  # fused with what precedes it
    # both fused tokens carry the same preceding text, then the start of their own word
    assert fused_false[: fused_false.rindex("f")] == fused_true[: fused_true.rindex("tru")] != ""


def test_choices_must_be_distinguishable():
    tok = wrap_tokenizer(train_tokenizer(CORPUS, vocab_size=1000))
    with pytest.raises(ValueError, match="distinct"):
        choice_items(tok, ["x"], ["true", "true"])
    with pytest.raises(ValueError, match="not told apart"):
        choice_items(tok, ["x: "], ["a", "a "])  # one choice tokenizes as a prefix of the other
