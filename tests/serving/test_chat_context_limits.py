"""Prompts longer than the model's context are fitted (head and tail kept, marked, counted), never run past it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from lifesearch_local.judge.config import JudgeConfig  # noqa: E402
from lifesearch_local.judge.rubric import Pending, judge_choice, judge_generate  # noqa: E402
from lifesearch_local.llm.models import engine_config  # noqa: E402
from lifesearch_local.records import Report, Task  # noqa: E402
from serving.config import model_config  # noqa: E402
from serving.engines.hf import HFEngine  # noqa: E402
from serving.kernels.plan import common_prefix_len  # noqa: E402
from serving.protocol import ChatRequest  # noqa: E402
from tests.helpers.inputs import rubric, task  # noqa: E402
from tests.helpers.tolerances import P_TOL  # noqa: E402

LIMIT = 640
REPORT = "HEADMARK " + " ".join(f"Finding {i}: revenue grew in region {i % 7}." for i in range(300)) + " TAILMARK"


class Positions:
    """Largest position id the model's rotary embedding was asked for, and how many calls."""

    def __init__(self, model):
        self.max, self.calls = -1, 0
        model.model.rotary_emb.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        pos = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
        self.max = max(self.max, int(pos.max()))
        self.calls += 1


@pytest.fixture(scope="module")
def backend():
    b = HFEngine(engine_config(model_config(model="tiny-llama", kernel="two_stage", max_model_len=LIMIT)))
    b.positions = Positions(b.model)
    return b


def pending(text: str) -> Pending:
    t = Task.model_validate(task("t1", [rubric(f"R{i}", 1.0) for i in range(3)], question="How did revenue grow?"))
    return Pending(t, Report(task_id="t1", agent="a", text=text), t.rubrics)


def spy_items(backend, monkeypatch):
    seen = []
    real = backend.scorer.score

    def spy(groups):
        seen.extend(groups)
        return real(groups)

    monkeypatch.setattr(backend.scorer, "score", spy)
    return seen


@pytest.mark.parametrize("form", ["two_stage", "shared", "single"])
def test_long_report_is_fitted_in_choice_mode(backend, monkeypatch, form):
    assert len(backend.tokenizer(REPORT)["input_ids"]) > 4 * LIMIT
    backend.scorer.form = form
    seen = spy_items(backend, monkeypatch)
    backend.positions.max = -1
    (row,) = judge_choice(backend, JudgeConfig(id="j"), [pending(REPORT)], 0)
    assert all(j.truncated_tokens > 3 * LIMIT for j in row) and len({j.truncated_tokens for j in row}) == 1
    assert 0 <= backend.positions.max < LIMIT  # never past the model's positions
    for item in seen[0]:
        text = backend.tokenizer.decode(item.ids)
        assert len(item.ids) < LIMIT and "HEADMARK" in text and "TAILMARK" in text
        assert f"[… {row[0].truncated_tokens} tokens omitted here to fit the model's context …]" in text
        assert "[Criterion]" in text  # the rubric suffix is never what gets cut
    backend.scorer.form = "two_stage"


def test_fitted_prompts_still_share_the_report_prefix(backend, monkeypatch):
    backend.scorer.form = "two_stage"
    seen = spy_items(backend, monkeypatch)
    (packed,) = judge_choice(backend, JudgeConfig(id="j"), [pending(REPORT)], 0)
    p = common_prefix_len([it.ids for it in seen[0]])
    shared = backend.tokenizer.decode(seen[0][0].ids[:p])
    assert "omitted here" in shared and "TAILMARK\n\n[Criterion]" in shared  # the report is cut the same way
    backend.scorer.form = "single"
    (alone,) = judge_choice(backend, JudgeConfig(id="j"), [pending(REPORT)], 0)
    backend.scorer.form = "two_stage"
    assert [j.p_true for j in packed] == pytest.approx([j.p_true for j in alone], abs=P_TOL)


def test_a_report_that_fits_is_read_whole(backend, monkeypatch):
    seen = spy_items(backend, monkeypatch)
    (row,) = judge_choice(backend, JudgeConfig(id="j"), [pending("A short report. TAILMARK")], 0)
    assert all(j.truncated_tokens == 0 for j in row)
    assert "omitted here" not in backend.tokenizer.decode(seen[0][0].ids)


def test_long_report_is_fitted_in_generate_mode(backend):
    backend.positions.max = -1
    cfg = JudgeConfig(id="g", mode="generate", max_tokens=40, retries=0)
    (row,) = judge_generate(backend, cfg, [pending(REPORT)], 0)
    assert all(j.truncated_tokens > 3 * LIMIT for j in row)
    assert 0 <= backend.positions.max < LIMIT  # prompt plus the generated tokens


def test_agent_context_is_fitted_by_its_longest_message(backend):
    backend.positions.max = -1
    messages = [{"role": "system", "content": "You research."}, {"role": "user", "content": "QUESTIONMARK"},
                {"role": "tool", "tool_call_id": "c1", "content": REPORT},
                {"role": "user", "content": "Write your final answer now. FINALMARK"}]
    (gen,) = backend.generate([ChatRequest(messages=messages, max_tokens=1000)])
    assert gen.truncated_tokens > 3 * LIMIT and gen.prompt_tokens < LIMIT
    assert 0 <= backend.positions.max < LIMIT  # max_tokens is capped to what the context has left
    assert gen.output_tokens <= LIMIT - gen.prompt_tokens


@pytest.mark.parametrize("mode", ["choice", "generate"])
def test_reporteval_quality_fits_a_long_report(backend, mode):
    from lifesearch_local.reporteval.config import ReportEvalConfig
    from lifesearch_local.reporteval.items import ReportItem
    from lifesearch_local.reporteval.quality import judge_quality

    backend.positions.max = -1
    cfg = JudgeConfig(id="q", mode=mode, retries=0, max_tokens=16)
    item = ReportItem(report=Report(task_id="t1", agent="a", text=REPORT), question="How did revenue grow?")
    (rec,) = judge_quality(backend, cfg, ReportEvalConfig(quality_max_tokens=16), [item])
    assert rec.truncated_tokens > 3 * LIMIT
    assert 0 <= backend.positions.max < LIMIT
    if mode == "choice":
        assert all(d.score is not None for d in rec.quality.dimensions)


def test_a_prompt_whose_fixed_text_exceeds_the_context_is_refused_loudly(backend):
    from serving.chat import ContextOverflowError, Segment, fit_group

    prompt = [Segment([5] * 100, data=False), Segment([6] * 40, data=True, elastic=True)]
    with pytest.raises(ContextOverflowError, match="needs 1.. positions but the model has 50"):
        fit_group(backend.tokenizer, [prompt], [1], 50)
