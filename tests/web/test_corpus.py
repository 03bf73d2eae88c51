"""The local corpus: pages served from disk, and refused after a task's cutoff."""

from __future__ import annotations

import datetime as dt

import pytest

from lifesearch_local.errors import InputError
from lifesearch_local.web.corpus import read_manifest
from tests.helpers.web import WEB_FIXTURES, RecordingConnector, fetch_all, make_config


def test_corpus_pages_served_locally_and_refused_after_cutoff():
    config = make_config(corpus_dirs=[WEB_FIXTURES])
    urls = ["https://energy.example.org/news/solar-2023", "https://auto.example.cn/ev-2024"]
    connector = RecordingConnector(refuse=True)
    (solar, ev), fetcher = fetch_all(config, urls, as_of=dt.date(2023, 12, 31), connector=connector)
    assert solar.ok and solar.source == "corpus" and "12 percent" in solar.text
    assert ev.kind == "after_cutoff" and "2024-07-10" in ev.message
    assert connector.hosts == [] and fetcher.stats.corpus == 1
    (ev_now,), _ = fetch_all(config, urls[1:], connector=connector)
    assert ev_now.ok and "新能源汽车" in ev_now.text


@pytest.mark.parametrize("line, message", [
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested deeper than 64 levels"),
    (b'{"url": "https://a.example/", "path": "\xff.html"}', "not UTF-8"),
    (b'["a list"]', "expected a JSON object, got list"),
])
def test_a_damaged_corpus_manifest_line_is_located(tmp_path, line, message):
    (tmp_path / "manifest.jsonl").write_bytes(b"\n" + line + b"\n")
    with pytest.raises(InputError, match=f"manifest.jsonl:2: {message}"):
        read_manifest(tmp_path)
