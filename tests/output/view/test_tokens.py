"""The judge's tokenizer for the viewer: found through the manifest, local files only, None when absent."""

from __future__ import annotations

from lifesearch_local.output.view.tokens import Tokenizers, judge_model, load_offsets

MANIFEST = {"stage_configs": {"judge/j": {"id": "j", "model": {"backend": "hf", "model": "tiny-llama", "seed": 0}},
                              "judge/api": {"id": "api", "model": {"backend": "openai", "model": "gpt"}},
                              "judge/odd": {"id": "odd", "model": "not a block"}}}


def test_the_model_block_the_manifest_records():
    assert judge_model(MANIFEST, "j") == {"backend": "hf", "model": "tiny-llama", "seed": 0}
    assert judge_model(MANIFEST, "odd") is None and judge_model(MANIFEST, "nobody") is None
    assert judge_model(None, "j") is None


def test_offsets_of_the_tiny_tokenizer_cover_the_text_in_order():
    offsets = load_offsets({"backend": "hf", "model": "tiny-llama"})
    text = "Acme revenue: $1.2B </s> <s> 比较"
    spans = offsets(text)
    assert spans and spans == sorted(spans) and spans[-1][1] == len(text)
    assert all(0 <= s <= e <= len(text) for s, e in spans)


def test_no_tokenizer_for_an_endpoint_or_a_model_not_on_this_machine():
    assert load_offsets({"backend": "openai", "model": "gpt"}) is None
    assert load_offsets({"backend": "hf", "model": "no-such-org/no-such-model-for-the-viewer"}) is None
    t = Tokenizers(MANIFEST)
    assert t.get("api") == (None, "gpt") and t.get("nobody") == (None, None)
    first = t.get("j")
    assert first[1] == "tiny-llama" and t.get("j") is first  # loaded once
