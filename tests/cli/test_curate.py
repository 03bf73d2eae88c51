"""`lifesearch curate`: the summary it prints, with a scripted model in place of the engine."""

from __future__ import annotations

from lifesearch_local.cli import main
from tests.helpers.curate import EN_QUERY, Script, filter_json
from tests.helpers.inputs import write_jsonl


def test_cli_prints_the_summary(tmp_path, monkeypatch, capsys):
    import contextlib

    import serving

    s = Script({("filter", "and the other one too, cheaper??"): [filter_json(quality_level="low")]})
    monkeypatch.setattr(serving, "host_engine", lambda cfg, ray=None, phase="": contextlib.nullcontext(s.backend))
    monkeypatch.setattr("lifesearch_local.run.preflight.weights_problem", lambda name, revision=None: None)  # no hub here
    qs = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "query": EN_QUERY}, {"id": "b", "query": "and the other one too, cheaper??"}])
    assert main(["curate", "--queries", str(qs), "--model", "some/model", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "curate some/model: 2 queries, 0 already recorded, 2 processed now in" in out
    assert "every query failed" not in out
    assert "  kept 1, dropped 1, failed 0 (of 2 records)\n  dropped by reason: low_quality 1\n" in out
    assert "  kept by domain:    financial 1\n" in out


def test_cli_summary_when_every_query_failed_says_so(tmp_path, monkeypatch, capsys):
    import contextlib

    import serving

    other = "and the other one too, cheaper??"
    s = Script({("filter", EN_QUERY): ["nope"] * 3, ("filter", other): ["nope"] * 3})
    monkeypatch.setattr(serving, "host_engine", lambda cfg, ray=None, phase="": contextlib.nullcontext(s.backend))
    monkeypatch.setattr("lifesearch_local.run.preflight.weights_problem", lambda name, revision=None: None)  # no hub here
    qs = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "query": EN_QUERY}, {"id": "b", "query": other}])
    assert main(["curate", "--queries", str(qs), "--model", "some/model", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert " curated" not in out  # the old summary said "2 curated" for two failures
    assert "2 processed now in" in out and "  kept 0, dropped 0, failed 2 (of 2 records)" in out
    assert "every query failed" in out and "no query kept, the file is empty" in out
