"""The hf backend end to end: judge prompts rendered, thinking off, forms agree, generation runs."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from lifesearch_local.judge.rubric import CHOICES, PREFILL, judge_prompt  # noqa: E402
from lifesearch_local.llm.models import engine_config  # noqa: E402
from lifesearch_local.records import Task  # noqa: E402
from lifesearch_local.resources import resource_path  # noqa: E402
from lifesearch_local.tasks import load_tasks  # noqa: E402
from serving.config import model_config  # noqa: E402
from serving.engines.hf import HFEngine  # noqa: E402
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest  # noqa: E402


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
        assert max(diffs) <= 1e-4
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
