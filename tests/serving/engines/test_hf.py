"""The hf backend: its forms agree on real judge prompts, the decision token, streaming, thinking off."""

from __future__ import annotations

import math

import pytest

from lifesearch_local.judge.rubric import PREFILL
from lifesearch_local.llm.models import engine_config, tiny_training_texts
from lifesearch_local.records import Task
from serving.config import model_config
from serving.engines.hf import choice_items
from serving.models.tiny import train_tokenizer, wrap_tokenizer
from tests.helpers.judging import tiny_inputs
from tests.helpers.tolerances import P_TOL

pytest.importorskip("torch")

from lifesearch_local.judge.rubric import CHOICES, judge_prompt  # noqa: E402
from lifesearch_local.resources import resource_path  # noqa: E402
from lifesearch_local.tasks import load_tasks  # noqa: E402
from serving.engines.hf import HFEngine  # noqa: E402
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest  # noqa: E402

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


def test_hf_backend_streams_the_same_results_group_by_group():
    from lifesearch_local.judge.rubric import choice_group, pending_work

    tasks, reports = tiny_inputs(3)
    work = pending_work({t.id: t for t in tasks}, reports, set(), "j", 0)
    groups = [choice_group(p)[0] for p in work]
    backend = HFEngine(engine_config(model_config(model="tiny-llama", device="cpu")))
    whole = backend.score_choices(groups, ["true", "false"])
    parts = list(backend.iter_score_choices(groups, ["true", "false"]))
    assert [idx for idx, _ in parts] == [[0], [1], [2]]
    for (i,), (res,) in parts:
        assert all(math.isclose(a.probs[0], b.probs[0], abs_tol=P_TOL) for a, b in zip(res, whole[i]))  # other batches


@pytest.fixture(scope="module")
def backend():
    return HFEngine(engine_config(model_config(model="tiny-qwen3", kernel="single")))


def groups_for(tasks: list[Task]) -> list[ChoiceGroup]:
    out = []
    for t in tasks:
        answer = f"A short report about {t.question[:80]}"
        out.append(ChoiceGroup(key=t.id, requests=[
            ChoiceRequest(messages=[{"role": "user", "content": judge_prompt(t, r, answer)[0]}], prefill=PREFILL)
            for r in t.rubrics[:6]
        ]))
    return out


def test_forms_agree_on_real_judge_prompts(backend):
    tasks = load_tasks(resource_path("data", "sample", "tasks.jsonl"))
    groups = groups_for([tasks[0], tasks[-1]])  # one English, one Chinese
    ref = backend.score_choices(groups, CHOICES)
    for form in ("two_stage", "shared"):
        backend.scorer.form = form
        got = backend.score_choices(groups, CHOICES)
        diffs = [abs(a.probs[0] - b.probs[0]) for ga, gb in zip(ref, got) for a, b in zip(ga, gb)]
        assert max(diffs) <= P_TOL
    backend.scorer.form = "single"
    assert all(abs(sum(r.probs) - 1) < 1e-9 for g in ref for r in g)


def test_choice_scoring_disables_thinking(backend):
    text = backend.render([{"role": "user", "content": "hi"}], prefill=PREFILL, enable_thinking=False)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n" + PREFILL)
    assert "<think>" not in backend.render([{"role": "user", "content": "hi"}])


def test_generate_is_deterministic_and_counts_tokens(backend):
    req = ChatRequest(messages=[{"role": "user", "content": "Say something."}], max_tokens=12)
    a, b = backend.generate([req, req.model_copy(update={"max_tokens": 5})])
    again = backend.generate([req])[0]
    assert a.text == again.text and 0 < a.output_tokens <= 12 and a.prompt_tokens > 3
    assert b.output_tokens <= 5 and a.finish_reason in ("stop", "length")


def test_identity_names_the_library_dtype_and_kernel_form(backend):
    import transformers

    info = backend.identity()
    assert (info.engine, info.version, info.dtype) == ("hf", transformers.__version__, "float32")  # auto on CPU
    assert info.kernel_form == backend.scorer.form == "single"
