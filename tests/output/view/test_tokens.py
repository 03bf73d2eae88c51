"""The judge's tokenizer for the viewer: found through the manifest, local files only, None when absent."""

from __future__ import annotations

from lifesearch_local.judge.rubric import CHOICES, report_choice_group
from lifesearch_local.output.view.tokens import Tokenizers, judge_model, judge_settings, load_tokenizer
from lifesearch_local.records import Report, Task
from tests.helpers.inputs import rubric, task

MANIFEST = {"stage_configs": {
    "judge/j": {"id": "j", "mode": "choice", "model": {"backend": "hf", "model": "tiny-llama", "seed": 0,
                                                        "max_model_len": 1000}},
    "judge/api": {"id": "api", "model": {"backend": "openai", "model": "gpt"}},
    "judge/odd": {"id": "odd", "model": "not a block"}}}


def test_the_settings_and_model_block_the_manifest_records():
    assert judge_settings(MANIFEST, "j")["mode"] == "choice" and judge_settings(MANIFEST, "nobody") == {}
    assert judge_model(MANIFEST, "j")["model"] == "tiny-llama"
    assert judge_model(MANIFEST, "odd") is None and judge_model(MANIFEST, "nobody") is None
    assert judge_model(None, "j") is None


def test_the_tiny_tokenizer_its_limit_and_offsets_that_cover_the_text_in_order():
    jt = load_tokenizer(judge_model(MANIFEST, "j"))
    assert jt.tokenizer is not None and jt.limit == 1000  # the model's positions lowered by max_model_len
    text = "Acme revenue: $1.2B </s> <s> 比较"
    spans = jt.offsets(text)
    assert spans and spans == sorted(spans) and spans[-1][1] == len(text)
    assert all(0 <= s <= e <= len(text) for s, e in spans)


def test_refit_cuts_a_long_report_and_not_a_short_one():
    jt = load_tokenizer(judge_model(MANIFEST, "j"))
    t = Task.model_validate(task("t", [rubric("R1", 1.0), rubric("R2", 0.5), rubric("R0", 0.0)]))
    short, ids = report_choice_group(t, Report(task_id="t", agent="a", text="Short."))
    assert ids == ["R1", "R2"]  # the zero-weight rubric is not judged
    cut, text = jt.refit(short, CHOICES, 1)
    assert cut == 0 and "Short." in text and "The response should state R2." in text
    long_group, _ = report_choice_group(t, Report(task_id="t", agent="a", text="word " * 2000))
    cut, text = jt.refit(long_group, CHOICES, 0)
    assert cut > 0 and f"[… {cut} tokens omitted here to fit the model's context …]" in text


def test_no_tokenizer_for_an_endpoint_or_a_model_not_on_this_machine():
    assert load_tokenizer({"backend": "openai", "model": "gpt"}).tokenizer is None
    missing = load_tokenizer({"backend": "hf", "model": "no-such-org/no-such-model-for-the-viewer"})
    assert missing.tokenizer is None and missing.offsets("text") is None
    t = Tokenizers(MANIFEST)
    assert t.get("api").tokenizer is None and t.get("nobody") is None
    first = t.get("j")
    assert first.model == "tiny-llama" and t.get("j") is first  # loaded once
