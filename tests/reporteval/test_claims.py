"""Claim extraction: numbered references, markdown links, bare URLs; sentences, tables, lead-ins."""

from __future__ import annotations

import pytest

from lifesearch_local.reporteval.claims import extract_claims, parse_references, split_sentences
from tests.helpers.reporteval import sample_report

NUMBERED = """# Report

## Findings
Revenue was $412.6M in 2025 [1]. Margins rose to 31.5% [1][2]. Both grew [1, 3]. Three sources agree [1-3].
The claim cites nothing. A missing entry is cited [9].

## References
[1] Fernleaf, "Annual report": https://fernleaf.example/investors/annual-report-2025
[2] [Brightplate results](https://brightplate.example/press/2025-11-18-fy2025-results)
- [3] https://kitchentradeweekly.example/2026/01/meal-kit-scorecard.
"""


def cites(claim) -> list[tuple[str, int | None, str | None]]:
    return [(c.style, c.ref, c.url) for c in claim.citations]


def test_reference_list_styles():
    assert parse_references(NUMBERED) == {
        1: "https://fernleaf.example/investors/annual-report-2025",
        2: "https://brightplate.example/press/2025-11-18-fy2025-results",
        3: "https://kitchentradeweekly.example/2026/01/meal-kit-scorecard",  # trailing period trimmed
    }
    numbered_list = "## Sources\n1. Fernleaf: https://f.example/a\n2) [B](https://b.example/b)\n"
    assert parse_references(numbered_list) == {1: "https://f.example/a", 2: "https://b.example/b"}
    assert parse_references("1. Not a reference https://x.example/ outside a references section") == {}


def test_numbered_citations_resolve_and_expand():
    claims = extract_claims(NUMBERED)
    assert [c.text for c in claims] == [
        "Revenue was $412.6M in 2025.", "Margins rose to 31.5%.", "Both grew.", "Three sources agree.",
        "A missing entry is cited."]
    f, b, k = (parse_references(NUMBERED)[n] for n in (1, 2, 3))
    assert cites(claims[0]) == [("numbered", 1, f)]
    assert cites(claims[1]) == [("numbered", 1, f), ("numbered", 2, b)]
    assert cites(claims[2]) == [("numbered", 1, f), ("numbered", 3, k)]
    assert [c.ref for c in claims[3].citations] == [1, 2, 3]
    assert cites(claims[4]) == [("numbered", 9, None)]  # unresolved, kept (judged unverifiable)


def test_markdown_links_and_bare_urls():
    text = ("Tallyflow caps lines at 100 characters ([guide](https://t.example/contributing)). "
            "Book online at https://w.example/bulky-items, at least 5 days ahead. "
            "PEP 8 says 79 ([a](https://t.example/contributing), [b](https://t.example/contributing#pep8)).\n")
    claims = extract_claims(text)
    assert [c.text for c in claims] == [
        "Tallyflow caps lines at 100 characters (guide).",
        "Book online at https://w.example/bulky-items, at least 5 days ahead.",
        "PEP 8 says 79 (a, b).",
    ]
    assert cites(claims[0]) == [("link", None, "https://t.example/contributing")]
    assert cites(claims[1]) == [("url", None, "https://w.example/bulky-items")]  # the comma is not part of the URL
    assert len(claims[2].citations) == 1  # one source (fragment ignored) is cited once


def test_bare_urls_in_chinese_text():
    text = "外地老人凭身份证免费乘车，见 https://m.example/fare.html。换乘优惠1元（https://m.example/fare.html）\n"
    claims = extract_claims(text)
    assert len(claims) == 2 and all(cites(c) == [("url", None, "https://m.example/fare.html")] for c in claims)


@pytest.mark.parametrize("text,expected", [
    ("It costs $1,822.83 per month. Next one.", ["It costs $1,822.83 per month.", "Next one."]),
    ("See Novak, K. & Lindgren, E. (2025) for details. Then more.", ["See Novak, K. & Lindgren, E. (2025) for details.", "Then more."]),
    ("Use e.g. the CLI. Done.", ["Use e.g. the CLI.", "Done."]),
    ("Fact one. [2] Fact two [3].", ["Fact one. [2]", "Fact two [3]."]),
    ("常住人口52.38万人。城镇化率61.2%！对吗？", ["常住人口52.38万人。", "城镇化率61.2%！", "对吗？"]),
    ("Version 3.4.1 is out.Next", ["Version 3.4.1 is out.Next"]),
])
def test_sentence_splitting(text, expected):
    assert split_sentences(text) == expected


def test_tables_rows_are_claims_with_own_or_header_citations():
    text = ("| Fee | Harbor [1] | Northgate [2] |\n|---|---|---|\n| APY | 4.10% | 4.25% |\n| Minimum | $1,000 [1] | $2,500 |\n\n"
            "[1] https://h.example/rates\n[2] https://n.example/cd\n")
    claims = extract_claims(text)
    assert [c.text for c in claims] == ["Fee: APY; Harbor: 4.10%; Northgate: 4.25%", "Fee: Minimum; Harbor: $1,000; Northgate: $2,500"]
    assert [c.ref for c in claims[0].citations] == [1, 2]  # the header's citations
    assert [c.ref for c in claims[1].citations] == [1]  # the row's own


def test_lead_in_citations_carry_to_the_list_until_a_heading():
    text = ("## Steps\nFollow the [upgrade guide](https://t.example/upgrade):\n- Stop the service now.\n"
            "- Back up the database first.\n\n## Later\n- Unrelated item without a source.\n")
    claims = extract_claims(text)
    assert [c.text for c in claims] == ["Stop the service now.", "Back up the database first."]
    assert all(c.citations[0].url == "https://t.example/upgrade" for c in claims)


def test_source_lists_and_reference_sections_are_not_claims():
    text = ("Permits cost $55 a year.\n\nSources: https://a.example/1, https://a.example/2\n\n"
            "Sources:\n- https://a.example/3\n- https://a.example/4\n\n## References\n- Town page: https://a.example/5\n")
    assert extract_claims(text) == []


def test_sample_reports_each_citation_style():
    en01 = extract_claims(sample_report("sample-en-01"))
    assert {c.style for cl in en01 for c in cl.citations} == {"numbered", "url"}
    bulky = next(c for c in en01 if "555-0142" in c.text)
    assert bulky.citations[0].url == "https://wexmoor.example/services/waste/bulky-items"
    en03 = extract_claims(sample_report("sample-en-03"))
    assert any(c.style == "link" for cl in en03 for c in cl.citations)
    zh05 = extract_claims(sample_report("sample-zh-05"))  # a table cited by the "数据来源" line after it
    assert len(zh05) == 6 and all(c.style == "link" for cl in zh05 for c in cl.citations)
    zh01 = extract_claims(sample_report("sample-zh-01"))
    refs = {c.ref: c.url for cl in zh01 for c in cl.citations}
    assert refs[2] == "https://tjj.qinghe.example/tjnj/2024/t2-1.html"  # "[2] [《…》](url)": the link target
    assert extract_claims(sample_report("sample-en-01", "sample-shallow")) == []  # only a closing source list


def test_bold_label_source_list_after_a_blank_line():
    text = ("Revenue was $412.6M [1]. Prices start at $8.99 [2].\n\n**References**\n\n"
            "1. Fernleaf Kitchen, Annual Report 2025 highlights: https://f.example/ar\n"
            "2. Fernleaf Kitchen, Plans and pricing: https://f.example/plans\n")
    assert parse_references(text) == {1: "https://f.example/ar", 2: "https://f.example/plans"}
    claims = extract_claims(text)
    assert [c.text for c in claims] == ["Revenue was $412.6M.", "Prices start at $8.99."]  # the list is not claims
    assert [c.citations[0].url for c in claims] == ["https://f.example/ar", "https://f.example/plans"]


def test_years_in_brackets_are_not_citations():
    claims = extract_claims("Output grew in [2025] by 6.5% [1].\n\n[1] https://x.example/r\n")
    assert [c.ref for c in claims[0].citations] == [1]
