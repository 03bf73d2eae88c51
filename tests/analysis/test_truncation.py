"""What a judge read of each report: per report and per agent figures by hand, and the caveat that names the limit."""

from __future__ import annotations

import pytest

from lifesearch_local.analysis.truncation import (
    AgentCut,
    agent_cuts,
    context_limit,
    cut_caveat,
    report_cuts,
    report_tokens,
    share_seen,
)
from lifesearch_local.records import Judgment, Report


def jd(task: str, agent: str, rubric: str, cut: int, judge: str = "qwen", judge_run: int = 0) -> Judgment:
    return Judgment(task_id=task, agent=agent, rubric_id=rubric, judge=judge, judge_run=judge_run, satisfied=True,
                    truncated_tokens=cut)


def rep(task: str, agent: str, chars: int) -> Report:
    return Report(task_id=task, agent=agent, text="abcd" * (chars // 4))


def test_report_tokens_by_hand():
    assert report_tokens("abcd" * 100) == 100  # 400 ASCII characters at 4 a token
    assert report_tokens("数据" * 10) == 14  # 20 wide characters at 0.7 a token
    assert report_tokens("") == 0


@pytest.mark.parametrize(("cut", "length", "want"), [
    (0, None, 1.0), (0, 100, 1.0), (250, 1000, 0.75), (12_333, 20_000, 0.38335),
    (500, None, None),  # no text: unknown
    (500, 400, None),  # an estimate shorter than the cut is wrong, not "0% seen"
])
def test_share_seen_by_hand(cut, length, want):
    got = share_seen(cut, length)
    assert got == (None if want is None else pytest.approx(want))


def test_per_report_takes_the_largest_cut_of_its_decisions_and_per_agent_counts_and_medians():
    js = [jd("t1", "a", "r1", 100), jd("t1", "a", "r2", 120),  # report a/t1: cut 120 of ≈1000 → 88% seen
          jd("t2", "a", "r1", 0), jd("t2", "a", "r2", 0),  # a/t2 whole
          jd("t3", "a", "r1", 500),  # a/t3: cut 500 of ≈1000 → 50%
          jd("t4", "a", "r1", 900),  # a/t4: cut 900 of ≈1000 → 10%
          jd("t1", "b", "r1", 0),
          jd("t1", "a", "r1", 7, judge_run=1)]  # a repetition is another judge name
    reports = [rep(t, "a", 4000) for t in ("t1", "t2", "t3", "t4")] + [rep("t1", "b", 40)]
    cuts = report_cuts(js, reports)
    first = cuts[0]
    assert (first.judge, first.agent, first.task_id, first.tokens_cut, first.decisions, first.decisions_cut,
            first.length) == ("qwen", "a", "t1", 120, 2, 2, 1000)
    assert first.share_seen == pytest.approx(0.88)
    per = agent_cuts(cuts)
    assert per["qwen"]["a"] == AgentCut(reports=4, reports_cut=3, tokens_cut=1520, median_share_seen=pytest.approx(0.5))
    assert per["qwen"]["b"] == AgentCut(1, 0, 0, None) and per["qwen#1"]["a"].reports_cut == 1
    assert per["qwen"]["a"].cell() == "3/4 cut, 50% seen" and per["qwen"]["b"].cell() == "0/1 cut"
    # without the reports' texts: the counts, no share
    bare = agent_cuts(report_cuts(js))["qwen"]["a"]
    assert (bare.reports_cut, bare.median_share_seen, bare.cell()) == (3, None, "3/4 cut")


def test_the_caveat_names_the_cut_reports_the_context_limit_and_the_field_to_raise():
    js = [jd("t1", "a", "r1", 12_333), jd("t2", "a", "r1", 0), jd("t1", "b", "r1", 0)]
    manifest = {"stage_configs": {"judge/qwen": {"model": {"backend": "hf", "max_model_len": 8192}}}}
    line = cut_caveat(js, [rep("t1", "a", 80_000)], manifest)
    assert line.startswith("WARNING: reports cut: 1 report(s) were read only in part")
    assert "judge qwen: a 1/2 cut, 38% seen" in line and "b " not in line.split("(")[1].split(")")[0]
    assert "qwen: 8192 tokens" in line and "`max_model_len` under the judge's `model:`" in line
    assert "the model's own" in cut_caveat(js)  # no manifest: no recorded limit
    assert cut_caveat([jd("t1", "a", "r1", 0)]) is None


def test_context_limit_reads_only_a_recorded_integer():
    assert context_limit({"stage_configs": {"judge/x": {"model": {"max_model_len": 4096}}}}, "x") == 4096
    for bad in (None, {}, {"stage_configs": {"judge/x": "?"}}, {"stage_configs": {"judge/x": {"model": {"max_model_len": True}}}}):
        assert context_limit(bad, "x") is None


def test_the_limit_comes_from_the_judge_s_config_where_the_command_has_it():
    """`judge`, `run` and `demo` hold the judge's config: its max_model_len is named even without a manifest."""
    from lifesearch_local.judge.config import JudgeConfig
    from serving.config import model_config

    cfg = JudgeConfig(model=model_config(model="tiny-llama", max_model_len=2048))
    js = [jd("t1", "a", "r1", 99, judge=cfg.id)]
    assert f"{cfg.id}: 2048 tokens" in cut_caveat(js, judges=[cfg])
    bare = JudgeConfig(model=model_config(model="tiny-llama"))
    assert f"{bare.id}: the model's own" in cut_caveat([jd("t1", "a", "r1", 99, judge=bare.id)], judges=[bare])

