"""`lifesearch rejudge` on the demo's run directory: the same engine reproduces its verdicts, the report shows it."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run_cli


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from lifesearch_local.cli import main

    out = tmp_path_factory.mktemp("demo") / "run"
    # the demo's judge (tiny-qwen3, the packed kernel on CPU) over the sample reports of two tasks
    assert main(["demo", "--no-agent", "--limit", "2", "--out", str(out), "--quiet"]) == 0
    return out


def test_the_demo_judge_reproduces_its_verdicts(demo, capsys):
    code, out, err = run_cli(["rejudge", str(demo), "--sample", "24", "--seed", "7", "--json"], capsys)
    assert code == 0, err
    replay = json.loads(out)
    assert replay["sampled"] == 24 and replay["flips"] == 0
    assert replay["max_abs_dp"] is not None and replay["max_abs_dp"] <= 1e-5
    (judge,) = replay["judges"]
    assert replay["judges"][judge] == []  # the same fingerprint: engine, version, dtype, kernel form, weights
    fp = json.loads((demo / "manifest.json").read_text())["fingerprints"][judge]
    assert (fp["engine"], fp["dtype"], fp["kernel_form"]) == ("hf", "float32", "shared")
    assert json.loads((demo / "manifest.json").read_text())["replays"][-1]["max_abs_dp"] == replay["max_abs_dp"]


def test_the_report_shows_the_last_replay_and_the_fingerprint(demo, capsys):
    code, out, err = run_cli(["rejudge", str(demo), "--sample", "3", "--seed", "1"], capsys)
    assert code == 0, err
    assert out.startswith("sampled 3 of ") and "0 flipped verdict(s)" in out and "same fingerprint as recorded" in out
    assert run_cli(["report", str(demo)], capsys)[0] == 0
    page = (demo / "report.html").read_text()
    replay = page[page.index('id="replay"'):]
    assert "Sampled</td><td" in replay and "3 of " in replay and "(seed 1)" in replay
    assert 'id="fingerprints"' in page and "shared" in page[page.index('id="fingerprints"'):page.index('id="replay"')]


def test_nothing_to_replay_is_one_line(tmp_path, capsys):
    code, _, err = run_cli(["rejudge", str(tmp_path), "--sample", "3"], capsys)
    assert code == 2 and "no judgments.jsonl" in err and len(err.strip().splitlines()) == 1

