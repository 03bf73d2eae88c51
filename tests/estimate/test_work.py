"""The estimate's model of the engines' work against the engines themselves: tokens, passes, weights, pool placement."""

from __future__ import annotations

import pytest

from lifesearch_local.estimate.work import (
    Arch,
    Pass,
    Shape,
    arch_of,
    choice_form,
    choice_unit,
    kernel_passes,
    replica_seconds,
    vllm_passes,
)
from lifesearch_local.judge.rubric import CHOICES, Pending, choice_group, judged_rubrics
from lifesearch_local.records import Report
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import SAMPLE


@pytest.fixture(scope="module")
def engine():
    from lifesearch_local.llm.models import engine_config
    from serving.config import HFConfig
    from serving.engines.hf import HFEngine

    return HFEngine(engine_config(HFConfig(model="tiny-llama", device="cpu")))


@pytest.fixture(scope="module")
def groups():
    tasks = {t.id: t for t in load_tasks(SAMPLE / "tasks.jsonl")}
    reports = read_records(SAMPLE / "reports.jsonl", Report)[:2]
    return [choice_group(Pending(tasks[r.task_id], r, judged_rubrics(tasks[r.task_id])[:6]))[0] for r in reports]


@pytest.mark.parametrize(("form", "budget"), [("shared", 8192), ("shared", 1800), ("two_stage", 8192),
                                              ("two_stage", 3000), ("single", 8192)])
def test_the_planned_passes_are_the_kernels_own(engine, groups, form, budget):
    # what the estimate counts must be what the kernel computes: the same batches, the same tokens
    from serving.chat import choice_group_items
    from serving.kernels.kernel import PackedScorer

    scorer = PackedScorer(engine.model, form=form, token_budget=budget)
    shape = Shape(engine.tokenizer, arch_of(engine.model.config), engine.max_positions, "cpu", form, budget,
                  rows_loop=scorer.rows is not None)
    for g in groups:
        items, _ = choice_group_items(engine.tokenizer, g, CHOICES, engine.max_positions)
        before = (scorer.stats.forward_tokens, scorer.stats.passes)
        scorer.score([items])
        unit = choice_unit(shape, g, CHOICES)
        assert unit.tokens == scorer.stats.forward_tokens - before[0]
        assert unit.passes == scorer.stats.passes - before[1]
        assert unit.prompt_tokens == sum(len(it.ids) for it in items)
    assert form == "single" or scorer.stats.forward_tokens < scorer.stats.prompt_tokens  # the prefix counted once


def test_the_estimate_follows_a_change_in_the_kernels_plan(engine, groups, monkeypatch):
    # the estimate asks the kernel's plan instead of copying its rules: a smaller prefill chunk and budget
    # there change the kernel's passes and the estimate's count alike
    from serving.chat import choice_group_items
    from serving.kernels import plan
    from serving.kernels.kernel import PackedScorer

    shape = Shape(engine.tokenizer, arch_of(engine.model.config), engine.max_positions, "cpu", "two_stage")
    before = choice_unit(shape, groups[0], CHOICES)
    monkeypatch.setattr(plan, "PREFILL_CHUNK", 64)
    monkeypatch.setattr(plan, "TOKEN_BUDGET", 2 * before.prompt_tokens // before.rows)
    scorer = PackedScorer(engine.model, form="two_stage")
    items, _ = choice_group_items(engine.tokenizer, groups[0], CHOICES, engine.max_positions)
    scorer.score([items])
    after = choice_unit(shape, groups[0], CHOICES)
    assert (after.passes, after.tokens) == (scorer.stats.passes, scorer.stats.forward_tokens)
    assert after.passes > before.passes + 2  # more prefill chunks and smaller batches than under the defaults
    assert scorer.stats.forms == {"two_stage": after.passes}


def test_the_shape_counts_the_models_weights(engine):
    # every weight a token multiplies through, and all weights, as the loaded model holds them
    arch = arch_of(engine.model.config)
    linear = sum(m.weight.numel() for n, m in engine.model.named_modules()
                 if type(m).__name__ == "Linear" and not n.endswith("lm_head"))
    assert arch.linear_params == linear
    assert arch.params == pytest.approx(sum(p.numel() for p in engine.model.parameters()), rel=0.01)


def test_auto_is_shared_on_cpu_and_two_stage_on_a_gpu(engine):
    assert choice_form("auto", engine.model.config, "cpu") == "shared"
    assert choice_form("auto", engine.model.config, "cuda") == "two_stage"
    assert choice_form("single", engine.model.config, "cpu") == "single"


def test_vllm_recomputes_from_the_last_full_block():
    # drb-56's shape (docs/benchmarks.md): a 2,292-token prefix, 128-token blocks on CPU: 2,176 tokens
    # read from the cache by each of the 27 prompts after the first
    ids = [[1] * 2292 + [2 + k] * 300 for k in range(28)]
    passes = vllm_passes(ids, "cpu")
    assert sum(p.rows * p.width for p in passes) == 28 * 2592 - 27 * 2176
    assert passes[1] == Pass(1, 2592 - 2176, 2176, 1)


def test_flops_count_the_linears_the_attention_pairs_and_the_head():
    a = Arch(layers=2, hidden=8, heads=2, kv_heads=1, head_dim=4, intermediate=16, vocab=10, tied=True)
    assert a.linear_params == 2 * (8 * 8 * 2 + 8 * 4 * 2 + 3 * 8 * 16)
    # 3 rows of 2 new tokens after 5 cached: 3 × (2·5 + 3) query-key pairs
    assert a.flops(Pass(3, 2, 5, 3)) == 2 * a.linear_params * 6 + 4 * 2 * 2 * 4 * 39 + 2 * 8 * 10 * 3


def test_a_pool_call_lasts_as_long_as_its_busiest_replica():
    # placed by cost, longest first: 5 alone, 3 + 1 together
    assert replica_seconds([5, 3, 1], [10.0, 4.0, 1.0], 2) == 10.0
    assert replica_seconds([5, 3, 1], [1.0, 4.0, 3.0], 2) == 7.0
    assert replica_seconds([5, 3, 1], [1.0, 4.0, 3.0], 1) == 8.0
    assert kernel_passes([[1, 2, 3], [1, 2, 4]], "shared", 100) == [Pass(1, 2, 0, 1), Pass(2, 1, 2, 2)]


def test_tokens_without_a_tokenizer_are_approximated_from_characters():
    from lifesearch_local.estimate.work import approx_tokens

    assert approx_tokens("") == 0 and approx_tokens("abcd" * 10) == 10  # 4 ASCII characters a token
    assert approx_tokens("研究报告") == 3  # 0.7 a CJK character, rounded up: ceil(2.8)
    assert approx_tokens("ab研究") == 2  # ceil(0.5 + 1.4)


def test_a_choice_group_without_a_tokenizer_shares_its_prefix_once():
    from lifesearch_local.estimate.work import Arch, Shape, choice_unit
    from serving.protocol import ChoiceGroup, ChoiceRequest

    report = "word " * 400  # 2,000 characters: 500 tokens
    group = ChoiceGroup(key="g", requests=[
        ChoiceRequest(messages=[{"role": "user", "content": report + "Rubric: " + c}], prefill='{"satisfied": ')
        for c in ("aaaa" * 5, "bbbb" * 10)])
    arch = Arch(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=1000, tied=True)
    shape = Shape(tokenizer=None, arch=arch, limit=None, device="cuda", form="two_stage")
    u = choice_unit(shape, group, ("true", "false"))
    prefix = 502 + 10  # the report and "Rubric: " (2,008 characters), 5 template tokens a message and the reply
    widths = [9 + 1, 14 + 1]  # the rubric and the prefill (34 and 54 characters), the decision token
    # the kernel's own plan: the prefix in one chunk, then both rows in one batch, padded to the wider (two_stage)
    assert u.rows == 2 and u.passes == 2 and u.tokens == prefix + 2 * max(widths)
    assert u.prompt_tokens == 2 * prefix + sum(widths) and u.flops > 0
    cut = choice_unit(Shape(tokenizer=None, arch=arch, limit=300, device="cuda", form="vllm"), group, ("true", "false"))
    assert cut.prompt_tokens == 2 * (300 - 15 - 1) + sum(widths)  # the report cut to fit the context, as the engine does
