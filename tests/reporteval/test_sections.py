"""Section splitting, intro/conclusion/references exclusion (EN and ZH), and seeded pair sampling."""

from __future__ import annotations

import pytest

from lifesearch_local.records import Report
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.items import ReportItem
from lifesearch_local.reporteval.redundancy import plan_pairs
from lifesearch_local.reporteval.sections import heading_key, pair_seed, sample_pairs, split_sections
from tests.helpers.reporteval import sample_report

EN = """# Solar in Ruritania

## Executive summary
Short answer up front.

## 1. Market size
The market grew.

### 1.1 By region
North leads.

## 2. Prices
Prices fell.

```
## not a heading inside code
```

## 3. Conclusion
It grew and prices fell.

## References
[1] https://a.example/x
"""

ZH = """# 报告标题

## 一、概述
概述内容。

## 二、产量
产量增长。

## 三、结论：谁更适合加盟
中间的“结论”小节不是报告的结论。

## 四、出口
出口增长。

## 五、总结
全文总结。

## 参考文献
[1] https://b.example/y
"""


def kept(text: str) -> list[str]:
    return [s.title for s in split_sections(text)[1] if s.excluded is None]


def test_headings_split_leave_out_intro_conclusion_references_en():
    mode, secs = split_sections(EN)
    assert mode == "headings"
    assert [(s.title, s.excluded) for s in secs] == [
        ("Executive summary", "introduction"), ("1. Market size", None), ("2. Prices", None),
        ("3. Conclusion", "conclusion"), ("References", "references")]
    market = secs[1].text
    assert "### 1.1 By region" in market and "North leads." in market  # subheadings stay in their section
    assert "not a heading inside code" in secs[2].text  # a '#' line inside a code fence is not a heading


def test_headings_split_zh_only_first_and_last_are_tested():
    assert kept(ZH) == ["二、产量", "三、结论：谁更适合加盟", "四、出口"]
    exc = {s.title: s.excluded for s in split_sections(ZH)[1]}
    assert exc["一、概述"] == "introduction" and exc["五、总结"] == "conclusion" and exc["参考文献"] == "references"


def test_preamble_under_the_title_is_the_introduction():
    text = "# Title\nThis report looks at X.\n\n## A\nalpha\n\n## B\nbeta\n"
    assert [(s.title, s.excluded) for s in split_sections(text)[1]] == [
        ("Title", "introduction"), ("A", None), ("B", None)]


@pytest.mark.parametrize("raw,key", [("## 3. Conclusion", "Conclusion"), ("五、总结", "总结"), ("**1) Summary**", "Summary"),
                                     ("第二章 背景", "背景"), ("II. Overview", "Overview")])
def test_heading_key_strips_numbering(raw, key):
    assert heading_key(raw.lstrip("# ")) == key


def test_paragraphs_when_no_headings_first_and_last_left_out():
    text = ("Intro line.\n\n**Parking**\nPermits cost $45.\n\nBulky items are free.\n\n"
            "Library cards are free.\n\nOverall, moving is cheap.\n\nSources: https://a.example/1, https://a.example/2\n")
    mode, secs = split_sections(text)
    assert mode == "paragraphs"
    assert [s.excluded for s in secs] == ["introduction", None, None, None, "conclusion", "references"]
    assert secs[1].text == "**Parking**\nPermits cost $45."  # a bold label joins the paragraph it introduces


def test_a_lone_title_does_not_make_sections():
    text = "## Fernleaf vs Brightplate\n\nFirst para.\n\nSecond para.\n\nThird para.\n\nLast para.\n"
    mode, secs = split_sections(text)
    assert mode == "paragraphs" and [s.title for s in secs] == ["First para.", "Second para.", "Third para.", "Last para."]
    assert kept(text) == ["Second para.", "Third para."]


def test_sample_reports_split_as_expected():
    assert kept(sample_report("sample-en-01"))[0] == "1. Residential parking permit"  # "Summary" left out
    assert kept(sample_report("sample-zh-03"))[-1] == "七、常见问题"  # "八、小结" left out
    assert "三、结论：哪一家适合个人加盟者？" in kept(sample_report("sample-zh-05"))
    assert split_sections(sample_report("sample-zh-03", "sample-shallow"))[0] == "paragraphs"


def test_pairs_same_seed_same_pairs_different_seed_different_pairs():
    a, b, c = sample_pairs(10, 30, 7), sample_pairs(10, 30, 7), sample_pairs(10, 30, 8)
    assert a == b and a != c
    assert len(a) == 30 and len(set(a)) == 30 and all(0 <= x < y < 10 for x, y in a) and a == sorted(a)


def test_all_pairs_when_under_the_cap_and_none_for_one_section():
    assert sample_pairs(5, 30, 1) == sample_pairs(5, 30, 2) == [(x, y) for x in range(5) for y in range(x + 1, 5)]
    assert sample_pairs(1, 30, 0) == [] and sample_pairs(0, 30, 0) == []


def test_per_report_seed_is_independent_of_batch_order():
    text = "\n\n".join(f"## S{i}\nbody {i}" for i in range(12))
    items = [ReportItem(Report(task_id=t, agent="a", text=text), "q") for t in ("t1", "t2")]
    cfg = ReportEvalConfig(seed=3)
    first = [plan_pairs(it, cfg)[0].pairs for it in items]
    again = [plan_pairs(it, cfg)[0].pairs for it in reversed(items)][::-1]
    assert first == again and first[0] != first[1]  # per report, not per position
    res, kept_secs = plan_pairs(items[0], cfg)
    assert res.possible_pairs == 66 and len(res.pairs) == 30 and len(kept_secs) == 12
    assert pair_seed(3, "t1", "a", 0) == "3:t1:a:0"
    other = plan_pairs(items[0], ReportEvalConfig(seed=4))[0].pairs
    assert other != first[0]
