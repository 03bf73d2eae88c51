"""The rebuilt prompt: the judge's own text, the report split where its fitting splits it, the marker exact."""

from __future__ import annotations

from lifesearch_local.judge.rubric import judge_prompt_span
from lifesearch_local.output.view.prompt import CHARS_PER_TOKEN, MARKER, fitted_prompt
from lifesearch_local.records import Task
from serving import chat
from tests.helpers.inputs import rubric, task

EN = Task.model_validate(task("t", [rubric("R1", 1.0, criterion="States <the> revenue")]))
ZH = Task.model_validate(task("z", [rubric("R1", 1.0, criterion="给出人口")], language="zh"))
REPORT = "H" * 300 + "M" * 400 + "T" * 300


def test_the_marker_is_the_engines_marker():
    assert MARKER == chat.MARKER


def test_a_report_read_whole_is_the_judges_prompt_unchanged():
    fp = fitted_prompt(judge_prompt_span, EN, EN.rubrics[0], REPORT, 0)
    text, digest, _ = judge_prompt_span(EN, EN.rubrics[0], REPORT)
    assert "".join(p.text for p in fp.pieces) == text
    assert [p.kind for p in fp.pieces] == ["text", "report", "text"] and fp.pieces[1].text == REPORT
    assert (fp.template_hash, fp.truncated_tokens, fp.chars_per_token) == (digest, 0, None)


def test_a_cut_report_keeps_head_and_tail_around_the_marker():
    fp = fitted_prompt(judge_prompt_span, EN, EN.rubrics[0], REPORT, 100)
    kinds = [p.kind for p in fp.pieces]
    assert kinds == ["text", "report", "marker", "elided", "report", "text"]
    head, marker, elided, tail = (p.text for p in fp.pieces[1:5])
    assert marker == MARKER.format(n=100)
    assert len(elided) == 400  # 100 tokens at 4 characters each
    assert (len(head), len(tail)) == (300, 300)  # the kept 600 halved, as the engine halves kept tokens
    assert head + elided + tail == REPORT
    text, _, _ = judge_prompt_span(EN, EN.rubrics[0], REPORT)
    assert "".join(p.text for p in fp.pieces if p.kind != "marker") == text
    assert fp.chars_per_token == CHARS_PER_TOKEN["en"]


def test_an_odd_kept_length_gives_the_head_the_extra_character():
    fp = fitted_prompt(judge_prompt_span, EN, EN.rubrics[0], "x" * 11, 1)
    assert [len(p.text) for p in fp.pieces if p.kind in ("report", "elided")] == [4, 4, 3]


def test_chinese_is_placed_at_its_own_rate_and_a_cut_past_the_report_takes_it_all():
    fp = fitted_prompt(judge_prompt_span, ZH, ZH.rubrics[0], "字" * 100, 10)
    assert len(next(p for p in fp.pieces if p.kind == "elided").text) == 14
    whole = fitted_prompt(judge_prompt_span, EN, EN.rubrics[0], "short", 500)
    assert [p.kind for p in whole.pieces] == ["text", "marker", "elided", "text"]
    assert next(p for p in whole.pieces if p.kind == "elided").text == "short"
