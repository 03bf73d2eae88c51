"""The HTML run report: content and escaping, then loaded in a real headless Chromium.

The browser is driven over the Chrome DevTools Protocol on a pipe (`--remote-debugging-pipe`,
NUL-separated JSON on fds 3/4), so no websocket client or other package is needed. The
browser tests skip only when no Chromium binary exists; any other failure is a failure.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import struct
import subprocess
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lifesearch_local.analysis.scoring import score_by_judge, uncertainty_by_judge
from lifesearch_local.output.numbers import mean_ci, mean_pm_std, pct
from lifesearch_local.output.report import write_report
from lifesearch_local.output.report.data import fetch_stats
from lifesearch_local.records import Domain, Judgment, Report
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks

FIX = Path(__file__).resolve().parent / "fixtures" / "agree"
MANIFEST = {
    "package_version": "0.1.0",
    "git_sha": "abc123",
    "python": "3.11.7",
    "created": "2026-01-01T00:00:00+00:00",
    "updated": "2026-01-01T00:10:00+00:00",
    "stages": {
        "judge": {"decisions": 180, "decisions_per_s": 51.2, "gpu_seconds": 3.5, "tokens": {"prompt": 123456}},
        "web": {"pages_fetched": 10, "pages_cached": 7},
    },
}


def make_run_dir(root: Path, *, labels: bool = True, extras: bool = True) -> Path:
    """A run directory from the agree fixtures, with manifest, config and step logs when `extras`."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("tasks", "reports", "judgments") + (("labels",) if labels else ()):
        shutil.copy(FIX / f"{name}.jsonl", root / f"{name}.jsonl")
    if not extras:
        return root
    (root / "manifest.json").write_text(json.dumps(MANIFEST))
    (root / "config.yaml").write_text("judge:\n  model: <b>tiny</b>\n")
    steps = root / "trajectories" / "alpha"
    steps.mkdir(parents=True)
    (steps / "t1_0.jsonl").write_text(
        json.dumps({"step": 1, "tool_calls": [
            {"tool": "web_fetch", "arguments": {"url": "http://a"}, "result": {"failure": "timeout"}},
            {"tool": "web_fetch", "arguments": {"url": "http://b"}, "result": {"ok": True, "status": 200}},
            {"tool": "web_search", "result": {"error": "ignored: not a fetch"}},
        ]}) + "\n"  # fmt: skip
    )
    (root / "trajectories" / "beta").mkdir()
    (root / "trajectories" / "beta" / "t2_1.jsonl").write_text(
        '{"torn line\n' + json.dumps({"name": "web_fetch", "observation": {"ok": False, "kind": "paywall"}}) + "\n"
    )
    return root


# -- without a browser ------------------------------------------------------------------
def test_fetch_stats_from_step_logs(tmp_path):
    run = make_run_dir(tmp_path / "run")
    stats = fetch_stats(run, read_records(run / "reports.jsonl", Report))
    assert stats["alpha"].calls == 2 and dict(stats["alpha"].failures) == {"timeout": 1}
    assert stats["beta"].calls == 1 and dict(stats["beta"].failures) == {"paywall": 1}
    assert stats["beta"].unreadable_lines == 1
    assert fetch_stats(tmp_path / "nowhere", []) == {}


def test_report_with_only_tasks_reports_judgments(tmp_path):
    run = make_run_dir(tmp_path / "run", labels=False, extras=False)
    path = write_report(run)
    assert path == run / "report.html"
    page = path.read_text()
    assert 'id="scores-choice-a"' in page and 'id="scores-const"' in page
    assert 'id="chart-scatter"' in page and 'id="chart-domains"' in page
    assert 'id="agreement"' not in page and "No manifest.json" in page
    assert "No trajectories/ step logs" in page


def test_report_without_judgments(tmp_path):
    run = make_run_dir(tmp_path / "run", labels=False, extras=False)
    (run / "judgments.jsonl").unlink()
    page = write_report(run).read_text()
    assert "No judgments in this run yet" in page and 'id="chart-' not in page


class Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_report_escapes_everything(tmp_path):
    page = write_report(make_run_dir(tmp_path / "run")).read_text()
    parsed = Tags(page)
    names = {t for t, _ in parsed.tags}
    assert not names & {"script", "img", "iframe", "link", "object", "embed"}
    text = "".join(parsed.text)
    assert "<script>console.error('xss')</script>" in text  # shown, not run
    assert '<img src="http://example.invalid/x.png"> </details>' in text
    assert "<b>tiny</b>" in text and "not </td></tr></table> covered" in text
    assert page.count("<details") == page.count("</details>")


def test_report_is_self_contained(tmp_path):
    page = write_report(make_run_dir(tmp_path / "run")).read_text()
    refs = [(t, k, v) for t, a in Tags(page).tags for k, v in a.items() if k in {"src", "href", "srcset", "action", "data"}]
    assert refs == []
    assert "url(" not in page and "@import" not in page
    assert 'xmlns="http://www.w3.org/2000/svg"' in page  # a namespace name, not a request


def test_report_shows_agreement_errors(tmp_path):
    run = make_run_dir(tmp_path / "run", extras=False)
    (run / "labels.jsonl").write_text('{"task_id":"t1","agent":"omega","run":0,"rubric_id":"r1","satisfied":true}\n')
    page = write_report(run).read_text()
    assert "Agreement not computed" in page and "omega" in page
    assert 'id="scores-choice-a"' in page


def test_report_cli(tmp_path, capsys):
    from lifesearch_local.cli import report

    run = make_run_dir(tmp_path / "run", labels=False)
    p = argparse.ArgumentParser(prog="lifesearch")
    report.register(p.add_subparsers())
    out = tmp_path / "elsewhere.html"
    args = p.parse_args(["report", str(run), "--labels", str(FIX / "labels.jsonl"), "--out", str(out)])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert 'id="agreement"' in out.read_text() and not (run / "report.html").exists()


# -- the headless browser -----------------------------------------------------------------
def find_chromium() -> str | None:
    for name in (os.environ.get("LIFESEARCH_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """Headless Chromium driven over CDP on a pipe; events are kept for the checks."""

    def __init__(self, binary: str, profile: Path):
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        self._stderr = open(profile.parent / "chromium.log", "wb")  # noqa: SIM115 (closed in close())

        def fds():  # the protocol's fixed descriptors: 3 = commands in, 4 = replies out
            # via copies above 10, in case a pipe end itself is fd 3 or 4
            r, w = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--no-default-browser-check", "--remote-debugging-pipe",
                 f"--user-data-dir={profile}", "about:blank"]  # fmt: skip
        self.proc = subprocess.Popen(
            [binary, *flags], pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=self._stderr
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.inbox: queue.Queue = queue.Queue()
        self.events: list[dict] = []
        self._id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while chunk := os.read(self._r, 1 << 20):
            buf += chunk
            *msgs, buf = buf.split(b"\0")
            for m in msgs:
                self.inbox.put(json.loads(m))
        self.inbox.put(None)

    def _next(self, deadline: float) -> dict:
        try:
            msg = self.inbox.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("no reply from Chromium") from None
        if msg is None:
            raise RuntimeError(f"Chromium exited (rc {self.proc.poll()})")
        return msg

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._next(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def open(self, url: str, width: int = 1280, height: int = 2000) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=sid)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session=sid)
        self.call("Page.navigate", {"url": url}, session=sid)
        deadline = time.monotonic() + 60
        while not any(e.get("method") == "Page.loadEventFired" and e.get("sessionId") == sid for e in self.events):
            self.events.append(self._next(deadline))
        return Page(self, sid)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=10)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._w)
        self._stderr.close()


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def eval(self, expression: str):
        r = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self.session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def _events(self, *methods: str) -> list[dict]:
        self.eval("0")  # a round trip so events sent before it are in
        return [e for e in self.browser.events if e.get("sessionId") == self.session and e.get("method") in methods]

    def errors(self) -> list[str]:
        out = []
        for ev in self._events("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded"):
            p = ev["params"]
            if ev["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p["exceptionDetails"])[:300])
            elif ev["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                out.append(json.dumps(p["args"])[:300])
            elif ev["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(p["entry"]["text"])
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    def screenshot(self, path: Path) -> Path:
        data = self.browser.call("Page.captureScreenshot", {"format": "png"}, session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium binary (install Debian's `chromium`; .ci/run does) — browser checks not run")
    b = Browser(binary, tmp_path_factory.mktemp("chromium") / "profile")
    yield b
    b.close()


def test_browser_harness_catches_errors_and_requests(browser, tmp_path):
    """The checks below can fail: a page with errors and a request is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); throw new Error("x")</script>'
                   '<img src="http://127.0.0.1:9/x.png"></body></html>')  # fmt: skip
    page = browser.open(bad.as_uri())
    errors = page.errors()
    assert any("boom" in e for e in errors) and any("Uncaught" in e for e in errors)
    assert page.requests()[0] == bad.as_uri() and "http://127.0.0.1:9/x.png" in page.requests()


TABLES_JS = """JSON.stringify(Object.fromEntries([...document.querySelectorAll('table[id]')].map(t =>
  [t.id, [...t.tBodies[0].rows].map(r => [...r.cells].map(c => c.textContent.trim()))])))"""


def expected_score_rows(run: Path) -> dict[str, list[list[str]]]:
    """Table 4 rows per judge as scoring.py computes them, in the page's text format."""
    tasks = load_tasks(run / "tasks.jsonl")
    judgments = read_records(run / "judgments.jsonl", Judgment)
    by_judge = score_by_judge(tasks, judgments, allow_missing=True, reports=read_records(run / "reports.jsonl", Report))
    unc = uncertainty_by_judge(tasks, judgments, by_judge)
    doms = [d for d in Domain if any(d.value == t.domain.value for t in tasks)]
    return {
        f"scores-{judge.replace('#', '-')}": [
            [a, *[pct(r.domains[d.value]) for d in doms], mean_pm_std(r.overall_mean, r.overall_std),
             mean_ci(r.overall_mean, unc[judge].ci95[a]), str(len(r.runs)),
             f"{r.iterations:.1f}", f"{r.output_tokens / 1000:.1f}", str(r.ungraded), str(r.missing)]
            for a, r in rows.items()
        ]
        for judge, rows in by_judge.items()
    }  # fmt: skip


def test_report_in_browser(browser, tmp_path):
    run = make_run_dir(tmp_path / "run")
    url = write_report(run).as_uri()
    page = browser.open(url)
    assert page.errors() == []
    assert page.requests() == [url]
    tables = json.loads(page.eval(TABLES_JS))
    # every Table 4 row equals scoring.py's numbers; one checked by hand: choice-a alpha scores
    # 1.0 (run 0, its flip makes t2 r2 true) and .625 (run 1) → 81.25 ± 26.52
    for tid, rows in expected_score_rows(run).items():
        assert tables[tid] == rows, tid
    alpha = tables["scores-choice-a"][0]
    assert alpha[0] == "alpha" and alpha[3] == "81.25 ± 26.52"
    # two tasks (t1 .875, t2 .75): every resample's mean lies in [.75, .875], and both ends are drawn
    assert alpha[4] == "81.2 [75.0, 87.5]"
    assert [r[3] for r in tables["scores-const"]] == ["100.00 ± 0.00"] * 3
    # the Table 3 layout, hand-computed in test_agreement.py
    agree = {r[0]: r for r in tables["agreement"]}
    assert list(agree) == ["gen-b", "choice-a", "const"]
    assert agree["choice-a"][1:6] == ["3", "91.11", "80.0", "93.33", "0.824"]
    assert agree["const"][2:6] == ["46.67", "—", "46.67", "0.000"]
    assert tables["confusion-gen-b"] == [["true", "13", "1", "0"], ["false", "0", "15", "1"]]
    fail = {r[0]: r for r in tables["failures"]}  # agent, reports, statuses…, fetches, failures, kinds
    assert fail["gamma"][3] == "1" and fail["beta"][4] == "1" and fail["alpha"][6:] == ["2", "1", "timeout: 1"]
    assert ["judge", "decisions_per_s", "51.200"] in tables["stages"]
    # the comparison matrix: row − column, antisymmetric, an em dash on the diagonal
    cmp_ = {r[0]: r[1:] for r in tables["compare-choice-a"]}
    assert cmp_["alpha"][0] == "—" and cmp_["beta"][0].startswith("-43.8") and cmp_["alpha"][1].startswith("+43.8")
    # agreement intervals contain their point estimates; judge vs judge; the disagreement list
    ci = {r[0]: r for r in tables["agreement-ci"]}
    assert ci["choice-a"][1] == "6" and ci["const"][4] == "[0.00, 0.00]"
    vs = {(r[0], r[1]): r for r in tables["judge-vs-judge"]}
    assert vs[("choice-a", "const")][4:] == ["7", "0", "0.016"]  # McNemar: 2 / 2^7
    n_dis = len(tables["disagreements-list"]) + len(tables.get("disagreements-more", []))
    assert n_dis == 14 and tables["disagreements-list"][0][8] == "0.600"  # 14: see test_stats
    # the charts: one point per agent with token counts, one bar per agent (× domain)
    counts = page.eval("""JSON.stringify({pts: document.querySelectorAll('#chart-scatter circle.point').length,
        overall: document.querySelectorAll('#chart-overall rect.bar').length,
        domains: document.querySelectorAll('#chart-domains rect.bar').length,
        sized: [...document.querySelectorAll('svg.chart')].every(s => s.getBoundingClientRect().width > 100),
        order: [...document.querySelectorAll('#chart-scatter circle.point')]
          .sort((a, b) => a.cx.baseVal.value - b.cx.baseVal.value).map(c => c.dataset.label)})""")
    assert json.loads(counts) == {"pts": 3, "overall": 3, "domains": 6, "sized": True, "order": ["gamma", "beta", "alpha"]}
    whiskers = page.eval("JSON.stringify([document.querySelectorAll('#chart-overall path.ci').length, "
                         "document.querySelectorAll('#chart-scatter line.err').length])")
    assert json.loads(whiskers) == [3, 3]  # every agent's 95% CI drawn (const agents of other judges are not charted)
    # the drill-down opens; arbitrary markup in reasons and reports shows as text
    drill = page.eval("""document.querySelectorAll('details').forEach(d => d.open = true);
        JSON.stringify({rows: document.querySelectorAll('table.rubrics tbody tr').length,
          visible: document.querySelector('table.rubrics').getBoundingClientRect().height > 0,
          text: document.body.innerText.includes("<script>console.error('xss')</script> covered")})""")
    assert json.loads(drill) == {"rows": 30, "visible": True, "text": True}
    assert page.errors() == [] and page.requests() == [url]
    page.eval("document.querySelectorAll('details').forEach(d => d.open = false); window.scrollTo(0, 0)")
    shot = page.screenshot(run / "report.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", shot.read_bytes()[16:24]) == (1280, 2000)
    if os.environ.get("LIFESEARCH_ARTIFACTS"):
        dest = Path(os.environ["LIFESEARCH_ARTIFACTS"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "report.png")
        shutil.copy(run / "report.html", dest / "report.html")


def test_reporteval_summary_is_shown(tmp_path):
    run = make_run_dir(tmp_path, extras=False)
    summary = {"judge-x": {"agent-a": {
        "quality": {"comprehensiveness": 3.25, "coherence": 2.0, "clarity": 1.5, "insightfulness": 0.75, "overall": 2.5},
        "redundancy": {"mean": 3.875},
        "factuality": {"mean_support": -0.125, "full_support_rate": 0.4375, "claims_per_report": 12.5,
                       "unverifiable_share": None},
    }}}
    (run / "reporteval_summary.json").write_text(json.dumps(summary))
    html = write_report(run).read_text()
    section = html[html.index('id="reporteval"'):]
    start = section.index("agent-a")
    row = section[start:section.index("</tr>", start)]
    for cell in ("3.25", "2.00", "1.50", "0.75", "2.50", "3.88", "-0.12", "43.8%", "12.5", "—"):
        assert f">{cell}</td>" in row, cell
    assert 'id="reporteval"' not in write_report(make_run_dir(tmp_path / "plain", extras=False)).read_text()


def make_wide_run(root: Path, n_agents: int = 12, judges: tuple[str, ...] = ("tiny-qwen3/choice/94252f",
                  "smollm2-135m/generate/1c531e", "gemini-like-reference-judge")) -> Path:
    """A run the size of the paper's tables: 12 agents with long names, one run each, three judges
    with long ids, output tokens close together (crowded scatter labels), labels on every decision."""
    import random

    rng = random.Random(0)
    root.mkdir(parents=True)
    shutil.copy(FIX / "tasks.jsonl", root / "tasks.jsonl")
    tasks = load_tasks(root / "tasks.jsonl")
    agents = [f"{name}-deep-research-agent" for name in ("sample-thorough", "sample-shallow", "tiny-qwen3", "kimi-like",
              "glm-like", "qwen-like", "minimax-like", "deepseek-like", "gpt-like", "claude-like", "gemini-like",
              "llama-like")][:n_agents]  # fmt: skip
    reports, judgments, labels = [], [], []
    for i, agent in enumerate(agents):
        for t in tasks:
            reports.append({"task_id": t.id, "agent": agent, "run": 0, "text": "r", "status": "completed",
                            "iterations": 3, "output_tokens": 5000 + 40 * i})
            for r in t.rubrics:
                truth = rng.random() < 0.3 + 0.05 * i
                labels.append({"task_id": t.id, "agent": agent, "run": 0, "rubric_id": r.id, "satisfied": truth,
                               "source": "human"})
                for judge in judges:
                    p = min(1.0, max(0.0, (0.7 if truth else 0.3) + rng.uniform(-0.35, 0.35)))
                    judgments.append({"task_id": t.id, "agent": agent, "run": 0, "rubric_id": r.id, "judge": judge,
                                      "satisfied": p >= 0.5, "p_true": round(p, 3), "reason": "because " * 12})
    for name, rows in (("reports", reports), ("judgments", judgments), ("labels", labels)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    return root


LAYOUT_JS = """JSON.stringify({
  page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  scrolled: [...document.querySelectorAll('.wide')].filter(d => d.scrollWidth > d.clientWidth + 1)
    .map(d => d.querySelector('table').id),
  outside: [...document.querySelectorAll('svg.chart text')].filter(t => {
      const r = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
      return r.left < s.left - 0.5 || r.right > s.right + 0.5 || r.top < s.top - 0.5 || r.bottom > s.bottom + 0.5; })
    .map(t => t.textContent),
  overlaps: (() => { const b = [...document.querySelectorAll('#chart-scatter text.pl')]
      .map(t => [t.textContent, t.getBoundingClientRect()]); const out = [];
    for (let i = 0; i < b.length; i++) for (let j = i + 1; j < b.length; j++) {
      const [p, q] = [b[i][1], b[j][1]];
      if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) out.push([b[i][0], b[j][0]]); }
    return out; })()})"""


def test_report_layout_at_1400_px(browser, tmp_path):
    """At 1400 px, nothing widens the page, the Table 3 / CI / comparison tables fit without their own
    scrollbar, and no chart label leaves its chart or overlaps another (issue 28, item 4)."""
    run = make_wide_run(tmp_path / "wide")
    page = browser.open(write_report(run).as_uri(), width=1400, height=1200)
    assert page.errors() == []
    got = json.loads(page.eval(LAYOUT_JS))
    assert got["page"] <= 0, got
    fits = {"agreement", "agreement-ci", "judge-vs-judge", "disagreements-list"} | {
        f"compare-{j.replace('/', '-')}" for j in ("tiny-qwen3/choice/94252f",)}
    assert not fits & set(got["scrolled"]), got["scrolled"]
    assert got["outside"] == [] and got["overlaps"] == []
    # one run per agent: no ± anywhere in the score cells or the caption
    page_text = page.eval("document.getElementById('scores').parentElement.innerText")
    assert "Score: one run per agent, so no ±" in page_text
    assert not any("±" in r[-9] for r in json.loads(page.eval(TABLES_JS))["scores-tiny-qwen3-choice-94252f"])
    shot = page.screenshot(run / "report-1400.png")
    assert struct.unpack(">II", shot.read_bytes()[16:24]) == (1400, 1200)
    if os.environ.get("LIFESEARCH_ARTIFACTS"):
        dest = Path(os.environ["LIFESEARCH_ARTIFACTS"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "report-1400.png")


def test_layout_check_catches_a_page_that_overflows(browser, tmp_path):
    """The width check can fail: a table wider than the page without the scrolling box is caught."""
    wide = tmp_path / "wide.html"
    wide.write_text("<html><body><table><tr>" + "<td>wide_cell_content</td>" * 120 + "</tr></table>"
                    '<svg class="chart" width="100" height="50"><text x="60" y="20">label far too long</text></svg>'
                    "</body></html>")
    got = json.loads(browser.open(wide.as_uri(), width=1400, height=600).eval(LAYOUT_JS))
    assert got["page"] > 0 and got["outside"] == ["label far too long"]


def test_report_on_a_judge_out_directory(tmp_path, capsys):
    """`judge --out DIR` keeps judgments and a manifest; the report finds tasks and reports through
    the paths the manifest records (their hashes checked), or through --tasks / --reports."""
    from lifesearch_local.cli import main
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.rundir.directory import open_run

    inputs = make_run_dir(tmp_path / "inputs", labels=False, extras=False)
    out = tmp_path / "judged"
    out.mkdir()
    shutil.copy(inputs / "judgments.jsonl", out / "judgments.jsonl")
    with pytest.raises(LifesearchError, match="no tasks.jsonl.*pass --tasks"):
        write_report(out)
    assert main(["report", str(out), "--tasks", str(inputs / "tasks.jsonl")]) == 0
    assert 'id="scores-choice-a"' in (out / "report.html").read_text()
    # what judge / sweep / reporteval record
    with open_run(out, "judge", inputs={"tasks": inputs / "tasks.jsonl", "reports": inputs / "reports.jsonl"}):
        pass
    page = write_report(out).read_text()
    assert 'id="scores-choice-a"' in page and 'id="chart-scatter"' in page  # reports found: output tokens
    (inputs / "tasks.jsonl").write_text((inputs / "tasks.jsonl").read_text() + "\n")
    with pytest.raises(LifesearchError, match="changed since"):
        write_report(out)


def test_report_after_a_real_judge_out(tmp_path, capsys):
    """The issue's case: `lifesearch judge --out DIR` then `lifesearch report DIR`, no other flag."""
    from lifesearch_local.cli import main

    out = tmp_path / "judged"
    assert main(["judge", "--tasks", str(FIX / "tasks.jsonl"), "--reports", str(FIX / "reports.jsonl"),
                 "--model", "tiny-llama", "--out", str(out), "--limit", "1", "--quiet"]) == 0
    assert not (out / "tasks.jsonl").exists()
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert 'id="scores-tiny-llama-choice-' in page and "Mean [95% CI]" in page


def test_chart_labels_are_cut_only_when_too_long_and_spread_apart():
    from lifesearch_local.output.report import svg

    bars = svg.hbars({"tiny-qwen3-agent": 50.0, "x" * 80: 10.0}, title="t", chart_id="c")
    assert ">tiny-qwen3-agent<title>" in bars  # sized to the longest label that fits
    keep = int((0.4 * 600 - 12) / svg.CHAR_W) - 1  # 40% of the 600 px chart, less the gap, less the "…"
    assert ">" + "x" * keep + "…<title>" + "x" * 80 in bars  # cut, the full name in the tooltip
    ys = svg.spread_labels([50.0, 51.0, 52.0, 200.0], lo=10.0, hi=300.0)
    assert sorted(ys)[1] - sorted(ys)[0] >= svg.LABEL_GAP and sorted(ys)[2] - sorted(ys)[1] >= svg.LABEL_GAP
    assert ys[3] == 200.0 and svg.spread_labels([295.0, 296.0], lo=10.0, hi=300.0)[1] <= 300.0
    rows = svg.legend_rows([f"agent-{i:02d}-with-a-long-name" for i in range(12)], 56, 848)
    assert len(rows) > 1 and all(x + 24 + svg.CHAR_W * len(n) - 10 <= 848 for r in rows for x, n in r)
