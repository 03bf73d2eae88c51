"""A judge phase's plan: its counts per repetition, and its engine calls' work in choice and generate mode."""

from __future__ import annotations

import pytest

from lifesearch_local.estimate.dry_run import _Shapes
from lifesearch_local.estimate.plan import VERDICT_TOKENS, judge_plan
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Report
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from serving import model_config
from tests.helpers.inputs import SAMPLE


@pytest.fixture(scope="module")
def sample():
    tasks = load_tasks(SAMPLE / "tasks.jsonl")
    reports = read_records(SAMPLE / "reports.jsonl", Report)[:3]
    return tasks, reports, _Shapes(local_only=True)(model_config(model="tiny-llama", device="cpu"))


def judge(mode: str, **kw) -> JudgeConfig:
    return JudgeConfig(id=mode, model=model_config(model="tiny-llama", device="cpu"), mode=mode, groups_per_call=2, **kw)


@pytest.mark.parametrize(("max_tokens", "steps"), [(60, 60), (512, VERDICT_TOKENS)])
def test_a_generate_mode_judge_prefills_the_choice_groups_then_decodes_its_verdicts(sample, max_tokens, steps):
    tasks, reports, shape = sample
    choice = judge_plan(judge("choice"), tasks, reports, set(), shape)
    gen = judge_plan(judge("generate", max_tokens=max_tokens), tasks, reports, set(), shape)
    assert [len(c) for c in gen.calls] == [len(c) for c in choice.calls] == [2, 1]  # groups_per_call reports a call
    for g, c in zip((u for call in gen.calls for u in call), (u for call in choice.calls for u in call), strict=True):
        assert (g.prompt_tokens, g.rows, g.steps) == (c.prompt_tokens, c.rows, steps)
    assert gen.sample == choice.sample and gen.sample is not None  # the first report's prompts calibrate both
    assert gen.decisions == choice.decisions == gen.requests > 0
    assert f"generate mode: {steps} output tokens per verdict (high: max_tokens {max_tokens})" in gen.assumptions[0]
    assert choice.assumptions == []


def test_a_repetition_plans_only_what_is_left_and_calls_no_model_for_empty_reports(sample):
    tasks, reports, shape = sample
    empty = reports[0].model_copy(update={"text": "  \n"})
    cfg = judge("choice", runs=2)
    one = {(cfg.id, 0, r.task_id, r.agent, r.run, rub.id) for r in reports[1:2]
           for rub in next(t for t in tasks if t.id == r.task_id).rubrics if rub.weight > 0}
    plan = judge_plan(cfg, tasks, [empty, *reports[1:]], one, shape)
    per_report = [sum(rub.weight > 0 for rub in next(t for t in tasks if t.id == r.task_id).rubrics) for r in reports]
    assert plan.per_repetition == [sum(per_report) - per_report[1], sum(per_report)]
    assert plan.requests == plan.decisions - 2 * per_report[0]  # the empty report's verdicts need no model
    assert [len(c) for c in plan.calls] == [1, 2]  # run 0: report 2 alone; run 1: reports 1 and 2
