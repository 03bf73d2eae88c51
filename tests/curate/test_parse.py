"""The curation answers' parsers: the paper's fields and types, domain names, rewrites."""

from __future__ import annotations

import json

from lifesearch_local.curate.parse import parse_domain_answer, parse_filter, parse_rewrite, strip_fences
from lifesearch_local.records import Domain
from tests.helpers.curate import EN_QUERY, OK, ZH_QUERY, domain_json, filter_json, q


def test_filter_parser_takes_exactly_the_papers_fields_and_types():
    assert parse_filter(filter_json()).quality_level == "high"
    assert parse_filter("Sure:\n```json\n" + filter_json(quality_level=" Medium ") + "\n```").quality_level == "medium"
    assert parse_filter(filter_json(quality_level="excellent")) is None
    assert parse_filter(filter_json(is_time_dependent="false")) is None  # a string, not a JSON boolean
    assert parse_filter(filter_json(is_unrelated_to_search=0)) is None
    assert parse_filter(filter_json(quality_reason=None)) is None
    assert parse_filter(json.dumps({**OK, "extra": 1})) is None
    assert parse_filter(json.dumps({k: v for k, v in OK.items() if k != "unrelated_reason"})) is None
    assert parse_filter("no json here") is None and parse_filter('{"quality_level": "high",') is None


def test_domain_parser_maps_english_and_chinese_names():
    assert parse_domain_answer(domain_json("Policy, regulation and government data")).domain is Domain.policy
    assert parse_domain_answer(domain_json("政策法规与政府数据")).domain is Domain.policy
    assert parse_domain_answer(domain_json("行业新闻与趋势聚合")).domain is Domain.industry
    assert parse_domain_answer("```json\n" + domain_json("Everyday facts") + "\n```").domain is Domain.everyday
    assert parse_domain_answer(domain_json("<one of the seven English category names>")) is None
    assert parse_domain_answer(domain_json("Gardening")) is None
    assert parse_domain_answer(json.dumps({"taxonomy": "Everyday facts"})) is None
    assert parse_domain_answer(json.dumps({"taxonomy": "Everyday facts", "reason": "x", "confidence": 1})) is None


def test_rewrite_parser():
    en, zh = q(), q(ZH_QUERY, language="zh")
    assert parse_rewrite(f"```\n{EN_QUERY}\n```", en, 1.25) == EN_QUERY
    assert strip_fences("```markdown\nA\nB\n```") == "A\nB"
    # empty answers are asked again (a broken model answers nothing too); see the empty-rewrite tests
    assert parse_rewrite("  \n", en, 1.25) is None and parse_rewrite('""', en, 1.25) is None
    assert parse_rewrite(ZH_QUERY, en, 1.25) is None and parse_rewrite(EN_QUERY, zh, 1.25) is None
    # the language is the query text's, not its label: an English query labelled zh keeps English
    assert parse_rewrite(EN_QUERY, q(EN_QUERY, language="zh"), 1.25) == EN_QUERY
    assert parse_rewrite(EN_QUERY + " x" * 30, en, 1.25) is None  # 74 chars -> at most 112
    assert parse_rewrite(EN_QUERY + " x" * 10, en, 1.25) == EN_QUERY + " x" * 10
