"""`lifesearch view`: the command as a user runs it, stopped by a signal, and driven in headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.browser import TABLES_JS
from tests.helpers.cli import run_cli
from tests.helpers.inputs import ROOT
from tests.helpers.view import make_view_run


@contextmanager
def viewer(*args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`lifesearch view ARGS --port 0` in a fresh process: its URL (first stdout line) and the process."""
    proc = subprocess.Popen([sys.executable, "-m", "lifesearch_local", "view", *args, "--port", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("lifesearch view: http://127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
        yield line.split()[-1], proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()


def test_help_says_what_it_serves_and_how_to_reach_it(capsys):
    with pytest.raises(SystemExit) as ended:
        run_cli(["view", "--help"], capsys)
    assert ended.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for words in ("127.0.0.1", "ssh -L PORT:127.0.0.1:PORT", "read-only", "--port", "--host", "paged on the server"):
        assert words in out
    with pytest.raises(SystemExit):
        run_cli(["--help"], capsys)
    assert "browse runs and every judge decision in a local web page" in capsys.readouterr().out


def test_a_path_with_nothing_to_show_is_one_line(tmp_path, capsys):
    code, out, err = run_cli(["view", str(tmp_path / "nope"), "--port", "0"], capsys)
    assert (code, out) == (2, "") and err.strip() == f"error: {tmp_path / 'nope'}: no such file or directory"


def test_it_serves_prints_the_ssh_hint_and_stops_on_sigterm(tmp_path):
    run = make_view_run(tmp_path / "run")
    with viewer(str(run)) as (url, proc):
        with urllib.request.urlopen(url + "s/0/d/0", timeout=30) as r:
            assert r.status == 200 and "The prompt the judge read" in r.read().decode()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        err = proc.stderr.read()
    port = url.rstrip("/").rsplit(":", 1)[1]
    assert f"ssh -L {port}:127.0.0.1:{port}" in err and "lifesearch view: stopped" in err
    assert f"{run}: 180 decisions" in err


def test_another_host_is_warned_about(tmp_path):
    run = make_view_run(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, "-m", "lifesearch_local", "view", str(run), "--port", "0", "--host",
                             "0.0.0.0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("lifesearch view: http://0.0.0.0:")
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        err = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    assert "warning: listening on 0.0.0.0: anyone who can reach it can read every report" in err


# -- in a real browser ----------------------------------------------------------------------------
def wait_for(page, expression: str, what: str) -> None:
    """Poll the page until `expression` is truthy (a navigation a click started has finished)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if page.eval(f"document.readyState === 'complete' && Boolean({expression})"):
                return
        except RuntimeError as err:  # asked while the old page goes: its context is destroyed mid-call
            if not any(w in str(err).lower() for w in ("context", "navigated")):
                raise
        assert time.monotonic() < deadline, f"the page never got to: {what} (at {page.eval('location.href')})"
        time.sleep(0.1)


def keep(shot: Path) -> None:
    """Screenshots go to LIFESEARCH_ARTIFACTS too when it is set (CI keeps them)."""
    if os.environ.get("LIFESEARCH_ARTIFACTS"):
        dest = Path(os.environ["LIFESEARCH_ARTIFACTS"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / shot.name)


def test_filter_open_a_decision_and_come_back_in_chromium(browser, tmp_path):
    run = make_view_run(tmp_path / "run")
    with viewer(str(run)) as (url, _):
        page = browser.open(url + "s/0/decisions", height=1100)
        keep(page.screenshot(tmp_path / "view-decisions.png"))
        assert page.eval("document.querySelector('#found').textContent") == "180 of 180 decisions."
        # a user picks judge gen-b and verdict false, and presses Apply
        page.eval("""(() => { const f = document.querySelector('form.filters');
            f.judge.value = 'gen-b'; f.verdict.value = 'false'; f.querySelector('button').click(); })()""")
        wait_for(page, "location.search.includes('judge=gen-b') && document.querySelector('#decisions')", "the filter")
        rows = json.loads(page.eval(TABLES_JS))["decisions"]
        assert page.eval("document.querySelector('#found').textContent") == "16 of 180 decisions match."
        assert len(rows) == 16 and {(r[5], r[6]) for r in rows} == {("gen-b", "✗ false")}
        keep(page.screenshot(tmp_path / "view-filtered.png"))
        # opens the first decision of the list
        first = rows[0][0]
        page.eval("document.querySelector('#decisions tbody a').click()")
        wait_for(page, f"location.pathname === '/s/0/d/{first}' && document.querySelector('#prompt')", "the decision")
        prompt = page.eval("document.querySelector('#prompt').textContent")
        assert "【题目】" in prompt or "Compare <b>Acme</b> & Globex revenue in 2025." in prompt
        assert page.eval("document.querySelector('#reason').textContent") in (
            "<script>console.error('xss')</script> covered", "not </td></tr></table> covered")
        keep(page.screenshot(tmp_path / "view-decision.png"))
        # and follows the link back: the same filter, still chosen in the form
        page.eval("document.querySelector('#back').click()")
        wait_for(page, "location.pathname === '/s/0/decisions' && document.querySelector('#found')", "back")
        assert page.eval("location.search") == "?judge=gen-b&verdict=false"
        assert page.eval("[document.querySelector('form.filters').judge.value, "
                         "document.querySelector('form.filters').verdict.value]") == ["gen-b", "false"]
        # the cut decision: the marker and the text the judge did not read
        page.eval("location.href = '/s/0/d/0'")
        wait_for(page, "location.pathname === '/s/0/d/0' && document.querySelector('#prompt .marker')", "decision 0")
        assert "100 tokens omitted here" in page.eval("document.querySelector('#prompt .marker').textContent")
        assert page.eval("getComputedStyle(document.querySelector('#prompt .elided')).textDecorationLine") == "line-through"
        page.eval("document.querySelector('#prompt .marker').scrollIntoView({block: 'center'})")
        keep(page.screenshot(tmp_path / "view-cut.png"))
        # the run's leaderboard
        page.eval("document.querySelector('header a[href=\"/s/0/\"]').click()")
        wait_for(page, "location.pathname === '/s/0/' && document.querySelector('#board-choice-a')", "the leaderboard")
        board = json.loads(page.eval(TABLES_JS))["board-choice-a"]
        assert [r[0] for r in board] == ["alpha", "beta", "gamma"] and all("[" in r[1] for r in board)
        keep(page.screenshot(tmp_path / "view-leaderboard.png"))
        assert page.errors() == []  # no script ran (hostile reasons and reports), no CSP violation
        assert [u for u in page.requests() if not u.startswith(url)] == []
        wide = page.eval("document.documentElement.scrollWidth")
        assert wide <= 1280  # nothing widens the page past the window
