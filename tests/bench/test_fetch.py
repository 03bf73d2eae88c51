"""`lifesearch bench fetch` on a small run."""

from __future__ import annotations

import json

from lifesearch_local.cli import main


def test_bench_fetch_small_run(capsys):
    assert main(["bench", "fetch", "--pages", "12", "--latency-ms", "20", "--concurrency", "6", "--page-kb", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inputs"] == {"pages": 12, "latency_ms": 20.0, "concurrency": 6, "page_kb": 2}
    assert report["documents"] == {"sequential": 12, "concurrent": 12, "replay": 12}
    assert report["ideal_pages_per_s"] == 12 / (2 * 0.02)
    pps = report["pages_per_s"]
    assert pps["concurrent"] > pps["sequential"]  # 6 in flight beat one at a time at 20 ms latency
    assert set(report["ratios"]) == {"concurrent_vs_sequential", "ideal_vs_concurrent", "replay_vs_sequential"}
