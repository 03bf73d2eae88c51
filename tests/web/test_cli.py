"""`lifesearch fetch`, `search`, `corpus` and `bench fetch` end to end, in process, on loopback only."""

from __future__ import annotations

import json

from lifesearch_local.cli import main

from .conftest import FIXTURES
from .server import Reply

PAGE = b"<html><head><title>CLI page</title></head><body><article><p>" + b"Text served to the command line. " * 20 + b"</p></article></body></html>"


def test_web_fetch_prints_document_and_fails_typed(server, tmp_path, capsys):
    server.routes["/p"] = Reply(body=PAGE)
    assert main(["fetch", server.url("/p"), "--allow-private", "--json", "--cache", str(tmp_path), "--mode", "record"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["type"] == "document" and doc["title"] == "CLI page"
    assert main(["fetch", server.url("/p"), "--json", "--cache", str(tmp_path), "--mode", "replay"]) == 0
    assert json.loads(capsys.readouterr().out)["from_cache"] is True
    assert main(["fetch", server.url("/nope"), "--allow-private"]) == 1
    assert "[fetch failed: not_found]" in capsys.readouterr().err
    assert main(["fetch", server.url("/p")]) == 1  # loopback refused without --allow-private
    assert "unsafe_address" in capsys.readouterr().err


def test_web_fetch_replay_miss_exits_2(tmp_path, capsys):
    assert main(["fetch", "https://example.org/x", "--cache", str(tmp_path), "--mode", "replay"]) == 2
    assert "not in the cache" in capsys.readouterr().err


def test_web_index_then_search(tmp_path, capsys):
    assert main(["corpus", "build", "--out", str(tmp_path / "idx"), "--corpus", str(FIXTURES)]) == 0
    assert "indexed 5 pages" in capsys.readouterr().out
    assert main(["search", "offshore wind turbines", "--backend", "local", "--index", str(tmp_path / "idx"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["organic"][0]["link"] == "https://reports.example.org/wind-2022.pdf"
    assert main(["search", "新能源汽车", "--backend", "local", "--corpus", str(FIXTURES), "--as-of", "2023-12-31", "--json"]) == 0
    assert all("ev-2024" not in r["link"] for r in json.loads(capsys.readouterr().out)["organic"])


def test_web_config_file_rejects_unknown_keys(tmp_path, capsys):
    (tmp_path / "web.yaml").write_text("mode: live\nlimits: {max_bytes: 1000}\nnot_a_field: 1\n")
    assert main(["fetch", "https://example.org/", "--config", str(tmp_path / "web.yaml")]) == 2
    assert "not_a_field" in capsys.readouterr().err


def test_bench_fetch_small_run(capsys):
    assert main(["bench", "fetch", "--pages", "12", "--latency-ms", "20", "--concurrency", "6", "--page-kb", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inputs"] == {"pages": 12, "latency_ms": 20.0, "concurrency": 6, "page_kb": 2}
    assert report["documents"] == {"sequential": 12, "concurrent": 12, "replay": 12}
    assert report["ideal_pages_per_s"] == 12 / (2 * 0.02)
    pps = report["pages_per_s"]
    assert pps["concurrent"] > pps["sequential"]  # 6 in flight beat one at a time at 20 ms latency
    assert set(report["ratios"]) == {"concurrent_vs_sequential", "ideal_vs_concurrent", "replay_vs_sequential"}
