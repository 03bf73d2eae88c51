"""Query files: aliases, language detection, every bad line named by file:line:field."""

from __future__ import annotations

import pytest

from lifesearch_local.curate.queries import detect_language, load_queries
from lifesearch_local.errors import InputError
from tests.helpers.inputs import write_jsonl


@pytest.mark.parametrize("text, lang", [
    ("Find the 2025 budget of a fictional town.", "en"),
    ("请比较 Workflow 和 Chatflow 的 start node 差异", "zh"),
    ("我们需要http://w.ks.gov.cn/上的统计公报数据", "zh"),
    ("Summarise the 2025 statistics bulletin of 青河县 for a report on population and housing demand.", "en"),
    ("12345", "en"),
])
def test_detect_language(text, lang):
    assert detect_language(text) == lang


def test_load_queries_aliases_and_language_detection(tmp_path):
    rows = [{"id": "a", "query": "Find X."}, {"qid": 7, "prompt": "查找X的资料。"},
            {"id": "c", "question": "Q?", "language": "Chinese"}, {"id": "d", "text": "T.", "lang": "en"}]
    got = load_queries(write_jsonl(tmp_path / "q.jsonl", rows))
    assert [(x.id, x.text, x.language) for x in got] == [("a", "Find X.", "en"), ("7", "查找X的资料。", "zh"),
                                                         ("c", "Q?", "zh"), ("d", "T.", "en")]


@pytest.mark.parametrize("row, field, message", [
    ({"query": "x"}, "id", "missing (expected one of: id, qid)"),
    ({"id": "b"}, "query", "missing (expected one of: query, prompt, question, text)"),
    ({"id": "b", "prompt": "  "}, "prompt", "expected a non-empty string"),
    ({"id": "b", "query": "x", "language": "fr"}, "language", "unknown language 'fr'"),
    ({"id": "a", "query": "y"}, "id", "duplicate query id 'a' (first on line 1)"),
])
def test_bad_queries_are_named_by_file_line_field(tmp_path, row, field, message):
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "query": "x"}, row])
    with pytest.raises(InputError) as e:
        load_queries(path)
    assert (e.value.line, e.value.field) == (2, field) and message in e.value.message
    assert str(e.value).startswith(f"{path}:2: {field}: ")
