"""`lifesearch fetch`, `search` and `corpus` end to end, in process, on loopback only."""

from __future__ import annotations

import json

from lifesearch_local.cli import main
from tests.helpers.web import WEB_FIXTURES
from tests.helpers.web_server import Reply

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
    assert main(["corpus", "build", "--out", str(tmp_path / "idx"), "--corpus", str(WEB_FIXTURES)]) == 0
    assert "indexed 5 pages" in capsys.readouterr().out
    assert main(["search", "offshore wind turbines", "--backend", "local", "--index", str(tmp_path / "idx"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["organic"][0]["link"] == "https://reports.example.org/wind-2022.pdf"
    assert main(["search", "新能源汽车", "--backend", "local", "--corpus", str(WEB_FIXTURES), "--as-of", "2023-12-31", "--json"]) == 0
    assert all("ev-2024" not in r["link"] for r in json.loads(capsys.readouterr().out)["organic"])


def test_web_config_file_rejects_unknown_keys(tmp_path, capsys):
    (tmp_path / "web.yaml").write_text("mode: live\nlimits: {max_bytes: 1000}\nnot_a_field: 1\n")
    assert main(["fetch", "https://example.org/", "--config", str(tmp_path / "web.yaml")]) == 2
    assert "not_a_field" in capsys.readouterr().err
