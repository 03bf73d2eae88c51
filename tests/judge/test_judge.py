"""The rubric judge: prompts, choice and generate modes, the resumable judge stage."""

from __future__ import annotations

import pytest
from conftest import rubric, task
from doubles import ScriptedBackend

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.rubric import PREFILL, judge_prompt, parse_verdict
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.rundir.directory import RunDir

TASKS = [
    Task.model_validate(task("en1", [rubric("R1", 0.5), rubric("R2", 1.0), rubric("R3", 0.0)], question="Q {answer}?")),
    Task.model_validate(task("zh1", [rubric("R1", 0.7, criterion="回复应给出人口。")], language="zh", domain="policy")),
]
REPORTS = [Report(task_id=t.id, agent=a, run=0, text=f"report of {a} for {t.id}") for t in TASKS for a in ("good", "bad")]


def test_prompts_are_the_papers_with_placeholders_filled():
    en, h_en = judge_prompt(TASKS[0], TASKS[0].rubrics[0], "My {criterion} answer")
    zh, h_zh = judge_prompt(TASKS[1], TASKS[1].rubrics[0], "答复")
    assert en.startswith("You are a strict grader.") and "[Question]\nQ {answer}?\n" in en
    assert "[Model Response]\nMy {criterion} answer\n" in en  # values are not substituted again
    assert '{\n  "satisfied": true or false,\n  "reason": "reason in English, <= 30 words"\n}' in en
    assert "- priority: Must Have (Must Have = must be satisfied / Nice to Have = bonus)" in en
    assert zh.startswith("你是一个严格的评分员。") and "【评分标准】\n- criterion: 回复应给出人口。" in zh
    assert '"reason": "≤80字中文理由"' in zh
    assert h_en != h_zh and len(h_en) == 16


@pytest.mark.parametrize("text,expected", [
    ('{"satisfied": true, "reason": "covers it"}', (True, "covers it")),
    ('```json\n{"satisfied": false, "reason": "missing"}\n```', (False, "missing")),
    ('Sure. {"satisfied": "TRUE", "reason": "ok"} done', (True, "ok")),
    ('{"note": 1} then {"satisfied": false}', (False, "")),
    ('{\n  "satisfied": true,\n  "reason": "多行"\n}', (True, "多行")),
])
def test_parse_verdict_accepts_the_papers_json(text, expected):
    assert parse_verdict(text) == expected


@pytest.mark.parametrize("text", ["", "true", "satisfied: yes", '{"satisfied": "maybe"}', '{"satisfied": 1}', "{broken"])
def test_parse_verdict_rejects_garbage(text):
    assert parse_verdict(text) is None


def test_choice_mode_records_p_true_and_threshold(tmp_path):
    backend = ScriptedBackend(p_true_fn=lambda key, i, req: {0: 0.8, 1: 0.49}[i])
    cfg = JudgeConfig(id="j", threshold=0.5)
    rd = RunDir(tmp_path)
    stats = judge_stage(rd, TASKS, REPORTS, cfg, backend, show=False)
    js = rd.load("judgments.jsonl", Judgment)
    assert stats["decisions"] == len(js) == 2 * 2 + 2 * 1  # R3 has zero weight: not judged
    by = {(j.task_id, j.agent, j.rubric_id): j for j in js}
    assert by[("en1", "good", "R1")].p_true == pytest.approx(0.8) and by[("en1", "good", "R1")].satisfied
    assert by[("en1", "good", "R2")].satisfied is False and by[("en1", "good", "R2")].p_true == pytest.approx(0.49)
    req = backend.choice_calls[0][0].requests[0]
    assert req.prefill == PREFILL == '{"satisfied": ' and req.messages[0]["role"] == "user"
    assert all(j.prompt_hash and j.judge == "j" for j in js)
    m = rd.manifest()
    assert "prompts/judge_en" in m.hashes and m.stages["judge/j"]["decisions"] == 6


def test_generate_mode_retries_then_ungraded(tmp_path):
    # R1 of every report answers garbage once then valid JSON; everything else stays garbage.
    seen: dict[str, int] = {}

    def reply(req):
        key = req.messages[0]["content"]
        seen[key] = seen.get(key, 0) + 1
        if "state R1." in key and seen[key] == 2:
            return '{"satisfied": true, "reason": "found"}'
        return "I think it is fine."

    backend = ScriptedBackend(reply)
    cfg = JudgeConfig(id="g", mode="generate", retries=2)
    rd = RunDir(tmp_path)
    judge_stage(rd, TASKS[:1], REPORTS[:2], cfg, backend, show=False)
    js = {(j.agent, j.rubric_id): j for j in rd.load("judgments.jsonl", Judgment)}
    assert js[("good", "R1")].satisfied is True and js[("good", "R1")].reason == "found"
    assert js[("good", "R2")].satisfied is None and "ungraded" in js[("good", "R2")].reason
    assert js[("good", "R2")].raw == "I think it is fine."
    assert len(backend.generate_calls) == 3  # one try + two retries, then stop
    assert max(seen.values()) == 3
    assert [len(c) for c in backend.generate_calls] == [4, 4, 2]  # retries only what failed


def test_resume_judges_only_what_is_missing(tmp_path):
    rd = RunDir(tmp_path)
    cfg = JudgeConfig(id="j", groups_per_call=1)

    class Boom(ScriptedBackend):
        def score_choices(self, groups, choices):
            if len(self.choice_calls) == 2:
                raise KeyboardInterrupt  # a kill after two reports were written
            return super().score_choices(groups, choices)

    with pytest.raises(KeyboardInterrupt):
        judge_stage(rd, TASKS, REPORTS, cfg, Boom(), show=False)
    assert len(rd.load("judgments.jsonl", Judgment)) == 4  # two en1 reports × 2 rubrics
    again = ScriptedBackend()
    judge_stage(rd, TASKS, REPORTS, cfg, again, show=False)
    js = rd.load("judgments.jsonl", Judgment)
    assert len(js) == len({j.key for j in js}) == 6
    assert sum(len(g.requests) for call in again.choice_calls for g in call) == 2  # only the zh1 reports
    judge_stage(rd, TASKS, REPORTS, cfg, None, show=False)  # nothing left: no model is even loaded


def test_unknown_task_in_reports_is_an_error(tmp_path):
    from lifesearch_local.errors import LifesearchError

    with pytest.raises(LifesearchError, match="not in the tasks file: zz"):
        judge_stage(RunDir(tmp_path), TASKS, [Report(task_id="zz", agent="a", text="t")], JudgeConfig(id="j"),
                    ScriptedBackend(), show=False)


def test_judge_runs_repeat(tmp_path):
    rd = RunDir(tmp_path)
    judge_stage(rd, TASKS, REPORTS, JudgeConfig(id="j", runs=3), ScriptedBackend(), show=False)
    js = rd.load("judgments.jsonl", Judgment)
    assert sorted({j.judge_run for j in js}) == [0, 1, 2] and len(js) == 18
