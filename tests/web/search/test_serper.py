"""Serper over loopback: only with a key, and a failing answer that echoes X-API-KEY is one
redacted line, never the key (in the backend, the agent's tool and the CLI)."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json

import pytest

from lifesearch_local.web.search import Searcher, SearchError
from tests.helpers.web import make_config
from tests.helpers.web_server import Reply

KEY = "serper-KEY_0123456789abcdef"


@pytest.fixture
def key(monkeypatch):
    from serving._util import redact

    monkeypatch.setattr(redact, "_secrets", set())
    monkeypatch.setattr(redact, "_pattern", None)
    monkeypatch.setenv("LS_SERPER_TEST_KEY", KEY)
    return KEY


def _echo_403(req):
    sent = req.headers["x-api-key"]
    body = {"message": f"Forbidden: X-API-KEY {sent} ({sent.upper()}, {base64.b64encode(sent.encode()).decode()}) is not valid",
            "statusCode": 403}
    return Reply(403, json.dumps(body).encode(), content_type="application/json")


def _config(server, tmp_path):
    return make_config(tmp_path, search={"backend": "serper", "serper_url": server.url("/search"),
                                         "serper_key_env": "LS_SERPER_TEST_KEY", "retries": 0})


def test_serper_403_echoing_the_key_is_redacted(server, tmp_path, key):
    server.routes["/search"] = _echo_403
    with pytest.raises(SearchError) as e:
        asyncio.run(Searcher(_config(server, tmp_path)).search("solar", num=3))
    msg = str(e.value)
    assert server.requests[-1].headers["x-api-key"] == key  # the key was really sent
    assert key not in msg and key.upper() not in msg and base64.b64encode(key.encode()).decode() not in msg
    assert "HTTP 403" in msg and server.url("/search") in msg and "***" in msg


def test_web_search_tool_shows_the_agent_no_key(server, tmp_path, key):
    from lifesearch_local.agent.config import ToolsConfig
    from lifesearch_local.agent.tools import WebSearchTool
    from lifesearch_local.records import Task

    server.routes["/search"] = _echo_403
    web = type("Web", (), {"searcher": Searcher(_config(server, tmp_path))})()
    task = Task(id="t", language="en", domain="company", question="q", rubrics=[])
    obs = asyncio.run(WebSearchTool(ToolsConfig(), web).run({"query": "solar"}, task))
    assert not obs.ok and obs.failure == "search_error"
    assert key not in obs.text + obs.summary and key.upper() not in obs.text


def test_search_cli_reports_the_endpoint_and_status_in_one_line(server, tmp_path, key, capsys):
    from lifesearch_local.cli import main

    server.routes["/search"] = _echo_403
    cfg = tmp_path / "web.yaml"
    cfg.write_text(f"search:\n  serper_url: {server.url('/search')}\n  serper_key_env: LS_SERPER_TEST_KEY\n  retries: 0\n")
    assert main(["search", "solar", "--backend", "serper", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "HTTP 403" in err and server.url("/search") in err
    assert key not in err and "Traceback" not in err


def test_serper_only_with_a_key(server, monkeypatch):
    monkeypatch.delenv("TEST_SERPER_KEY", raising=False)
    config = make_config(search={"backend": "serper", "serper_key_env": "TEST_SERPER_KEY", "serper_url": server.url("/serp")})
    with pytest.raises(SearchError, match="TEST_SERPER_KEY"):
        asyncio.run(Searcher(config).search("x", num=3))
    assert server.hits["/search"] == 0
    monkeypatch.setenv("TEST_SERPER_KEY", "k123")
    organic = [{"title": "A", "link": "https://a.org/", "snippet": "sa", "date": "Jan 2, 2023", "position": 1}, {"title": "B", "link": "https://b.org/", "snippet": "sb", "position": 2}]
    server.routes["/serp"] = Reply(body=json.dumps({"organic": organic}).encode(), content_type="application/json")
    results = asyncio.run(Searcher(config, as_of=dt.date(2023, 6, 30)).search("solar", num=2))
    assert [(r.title, r.link, r.date) for r in results] == [("A", "https://a.org/", "Jan 2, 2023"), ("B", "https://b.org/", None)]
    req = server.requests[-1]
    assert req.headers["x-api-key"] == "k123"
    assert json.loads(req.body) == {"q": "solar", "num": 2, "tbs": "cdr:1,cd_max:06/30/2023"}
