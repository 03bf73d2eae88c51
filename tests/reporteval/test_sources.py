"""Sources of a report's claims, served from the bundled corpus and the web cache in replay mode."""

from __future__ import annotations

import datetime as dt

from lifesearch_local.reporteval.sources import fetch_sources, source_key
from lifesearch_local.web.cache import WebCache, page_key
from lifesearch_local.web.records import Document
from tests.helpers.reporteval import (
    web,
)

PERMITS = "https://wexmoor.example/services/parking/residential-permits"
LATER = "https://wexmoor.example/news/2026-08-12-council-approves-parking-fees"


def test_fetch_sources_corpus_cache_asof_and_misses(tmp_path):
    cached_url = "https://news.example/cached-story"
    doc = Document(url=cached_url, final_url=cached_url, title="Cached", text="A cached page with 42 in it.",
                   content_type="text/html", status=200, bytes=30, fetched_at="2026-01-01T00:00:00+00:00",
                   cache_key=page_key(cached_url, None))
    WebCache(tmp_path / "cache").put_page(page_key(cached_url, None), cached_url, None, doc, b"<p>A cached page with 42 in it.</p>")
    cutoff = dt.date(2026, 7, 20)
    wanted = [(PERMITS, cutoff), (PERMITS + "#fees", cutoff), (LATER, cutoff), (LATER, None), (cached_url, None),
              ("https://never.example/x", None)]
    got, stats = fetch_sources(web(tmp_path), wanted, budget=6000)
    assert len(got) == 5  # the fragment is the same page
    assert "$45 per year" in got[source_key(PERMITS, cutoff)].chunks[0]
    assert got[source_key(LATER, cutoff)].failure.startswith("after_cutoff:")  # dated 2026-08-12, after the task's cutoff
    assert got[source_key(LATER, None)].failure is None  # no cutoff: served
    assert got[source_key(cached_url, None)].chunks == ["A cached page with 42 in it."]
    assert got[source_key("https://never.example/x", None)].failure.startswith("replay_miss:")
    assert stats["corpus"] == 2 and stats["cached"] == 1 and stats["live"] == 0
