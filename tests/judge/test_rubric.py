"""The rubric judge's prompts and verdicts: the paper's text, its JSON, garbage refused."""

from __future__ import annotations

import pytest

from lifesearch_local.judge.rubric import judge_prompt, parse_verdict
from tests.helpers.judging import TASKS


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


def test_the_choice_group_of_a_report_holds_its_judged_rubrics_in_order():
    from lifesearch_local.judge.rubric import PREFILL, judge_prompt_span, report_choice_group
    from tests.helpers.judging import REPORTS

    task, report = TASKS[0], REPORTS[0]  # en1: R1 (0.5), R2 (1.0), R3 (weight 0: not judged)
    group, ids = report_choice_group(task, report)
    assert ids == ["R1", "R2"] and group.key == f"{task.id}|{report.agent}|{report.run}"
    for req, rid in zip(group.requests, ids, strict=True):
        text, _, span = judge_prompt_span(task, next(r for r in task.rubrics if r.id == rid), report.text)
        assert req.messages == [{"role": "user", "content": text}] and req.prefill == PREFILL and req.elastic == span
