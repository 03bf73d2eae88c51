"""The premature-clarification heuristic (paper §4.4) on English and Chinese messages."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.agent.clarify import is_clarification
from tests.helpers.inputs import ROOT


@pytest.mark.parametrize("text", [
    "Before I start, could you confirm which city you mean? Also, do you want prices in USD or EUR?",
    "I need a bit more information to proceed. Which year are you interested in? Please let me know.",
    "To give you an accurate answer, I would like to confirm a few details:\n1. Which branch?\n2. Do you have a budget?",
    "Could you clarify the time window?",
    "在开始研究之前，我想确认几个问题：1. 您指的是哪一年的数据？2. 是否需要包含区镇数据？请确认后我再继续。",
    "请问您希望比较哪两家公司？",
    "为了准确回答，想先跟您确认：您使用的是哪个版本？",
])
def test_questions_to_the_user_are_clarifications(text):
    assert is_clarification(text)


@pytest.mark.parametrize("text", [
    "The 12-month APY at Harbor Lane is 4.10% as of 30 June 2026. Would you like more details?",
    "4.10%",
    "",
    "青河县2025年末常住人口为52.38万人，户籍人口为48.9万人。数据来自统计公报。",
    "## Permit\n" + "The residential permit costs $45 per year and is renewed online. " * 40 + "Do you want more?",
    "Why does the fee matter? Because it doubles the yearly cost for a second car, from $45 to $90 in total.",
])
def test_answers_are_not_clarifications(text):
    assert not is_clarification(text)


def test_the_sample_reports_agree_with_their_recorded_status():
    rows = [json.loads(line) for line in (ROOT / "data" / "sample" / "reports.jsonl").read_text().splitlines() if line]
    assert {r["task_id"] for r in rows if is_clarification(r["text"])} == {"sample-zh-03"}
    assert all(is_clarification(r["text"]) == (r["status"] == "clarification") for r in rows)
