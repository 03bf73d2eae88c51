"""The HTML run report: content and escaping, then loaded in a real headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

from lifesearch_local.analysis.scoring import score_by_judge, uncertainty_by_judge
from lifesearch_local.output.numbers import mean_ci, mean_pm_std, pct, per_report
from lifesearch_local.output.report import write_report
from lifesearch_local.records import Domain, Judgment, Report
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.browser import LAYOUT_JS, TABLES_JS
from tests.helpers.html import Tags
from tests.helpers.inputs import AGREE
from tests.helpers.report_runs import make_run_dir


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



def test_every_id_on_the_page_is_unique(tmp_path):
    """Every report.html said id="agreement" and id="failures" twice, the heading and its table:
    a link to #agreement, or a script, found the wrong one."""
    from collections import Counter

    page = write_report(make_run_dir(tmp_path / "run")).read_text()
    ids = Counter(attrs["id"] for _, attrs in Tags(page).tags if "id" in attrs)
    assert {"agreement", "failures", "agreement-table", "failures-table"} <= set(ids)
    assert [i for i, n in ids.items() if n > 1] == []


def test_domain_chart_has_error_bars_and_n(tmp_path):
    """The domain chart had no error bars and no n: a domain resting on one task looked like the others."""
    from lifesearch_local.output.report.html import domain_chart

    tasks = load_tasks(AGREE / "tasks.jsonl")
    judgments = read_records(AGREE / "judgments.jsonl", Judgment)
    one_each = score_by_judge(tasks, judgments, judge="choice-a")  # t1 company, t2 technical: one task a domain
    unc = uncertainty_by_judge(tasks, judgments, one_each)["choice-a"]
    chart = domain_chart(one_each["choice-a"], unc)
    assert "Comp. (n=1)" in chart and 'class="ci"' not in chart and "n=1: no interval" in chart
    both = [t.model_copy(update={"domain": Domain.company}) for t in tasks]  # one domain of two tasks
    rows = score_by_judge(both, judgments, judge="choice-a")
    unc = uncertainty_by_judge(both, judgments, rows)["choice-a"]
    chart = domain_chart(rows["choice-a"], unc)
    assert "Comp. (n=2)" in chart and chart.count('class="ci"') == sum(
        1 for a in rows["choice-a"] if "company" not in unc.domain_ci_reason.get(a, {})) > 0


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


def test_agreement_tables_show_the_chance_baseline_and_name_the_run_majority(tmp_path):
    """Found in use: "Maj%" (majority over judge runs) read as the majority-class baseline, which was not shown."""
    page = write_report(make_run_dir(tmp_path / "run")).read_text()
    agreement = page[page.index('id="agreement"'):page.index('id="by-language"')]
    assert ">Chance: majority-class acc. (%)</th>" in agreement and ">Majority over judge runs (%)</th>" in agreement
    assert ">53.33</td>" in agreement and "Maj%" not in agreement.replace("RunMaj%", "")
    assert "κ&#x27;s chance baseline is 0" in agreement or "κ's chance baseline is 0" in agreement


def test_report_shows_agreement_errors(tmp_path):
    run = make_run_dir(tmp_path / "run", extras=False)
    (run / "labels.jsonl").write_text('{"task_id":"t1","agent":"omega","run":0,"rubric_id":"r1","satisfied":true}\n')
    page = write_report(run).read_text()
    assert "Agreement not computed" in page and "omega" in page
    assert 'id="scores-choice-a"' in page


def test_browser_harness_catches_errors_and_requests(browser, tmp_path):
    """The checks below can fail: a page with errors and a request is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); throw new Error("x")</script>'
                   '<img src="http://127.0.0.1:9/x.png"></body></html>')  # fmt: skip
    page = browser.open(bad.as_uri())
    errors = page.errors()
    assert any("boom" in e for e in errors) and any("Uncaught" in e for e in errors)
    assert page.requests()[0] == bad.as_uri() and "http://127.0.0.1:9/x.png" in page.requests()


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
             mean_ci(r.overall_mean, unc[judge].ci95[a], unc[judge].ci_reason.get(a)), str(len(r.runs)),
             f"{r.iterations:.1f}", f"{r.output_tokens / 1000:.1f}", per_report(r.tool_calls), per_report(r.pages_read),
             str(r.ungraded), str(r.missing)]
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
    # the Table 3 layout, hand-computed in tests/analysis/test_agreement.py
    agree = {r[0]: r for r in tables["agreement-table"]}
    assert list(agree) == ["gen-b", "choice-a", "const"]
    # Chance% (always the labels' majority class: 8 of 15 "not satisfied") sits beside Acc%
    assert agree["choice-a"][1:7] == ["3", "91.11", "53.33", "80.0", "93.33", "0.824"]
    assert agree["const"][2:7] == ["46.67", "53.33", "—", "46.67", "0.000"]
    assert tables["confusion-gen-b"] == [["true", "13", "1", "0"], ["false", "0", "15", "1"]]
    fail = {r[0]: r for r in tables["failures-table"]}  # agent, reports, statuses…, fetches, failures, kinds
    assert fail["gamma"][3] == "1" and fail["beta"][4] == "1" and fail["alpha"][6:] == ["2", "1", "timeout: 1"]
    assert ["judge", "decisions_per_s", "51.200"] in tables["stages"]
    # the comparison matrix: row − column, antisymmetric, an em dash on the diagonal
    cmp_ = {r[0]: r[1:] for r in tables["compare-choice-a"]}
    assert cmp_["alpha"][0] == "—" and cmp_["beta"][0].startswith("-43.8") and cmp_["alpha"][1].startswith("+43.8")
    # agreement intervals contain their point estimates; judge vs judge; the disagreement list
    ci = {r[0]: r for r in tables["agreement-ci"]}
    # a constant judge has κ = 0 on every resample: no spread, so no interval (not [0.00, 0.00])
    assert ci["choice-a"][1] == "6" and ci["const"][4] == "no spread: no interval"
    vs = {(r[0], r[1]): r for r in tables["judge-vs-judge"]}
    # p of the report-level sign-flip test, exact over the 2^6 sign vectors of 6 reports (McNemar said 2/2^7)
    assert vs[("choice-a", "const")][4:] == ["7", "0", "0.062"]
    n_dis = len(tables["disagreements-list"]) + len(tables.get("disagreements-more", []))
    assert n_dis == 14 and tables["disagreements-list"][0][8] == "0.600"  # 14: see tests/cli/test_agree.py
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
    shutil.copy(AGREE / "tasks.jsonl", root / "tasks.jsonl")
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



def test_report_layout_at_1400_px(browser, tmp_path):
    """At 1400 px, nothing widens the page, the Table 3 / CI / comparison tables fit without their own
    scrollbar, and no chart label leaves its chart or overlaps another."""
    run = make_wide_run(tmp_path / "wide")
    page = browser.open(write_report(run).as_uri(), width=1400, height=1200)
    assert page.errors() == []
    got = json.loads(page.eval(LAYOUT_JS))
    assert got["page"] <= 0, got
    fits = {"agreement-table", "agreement-ci", "judge-vs-judge", "disagreements-list"} | {
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


def test_a_cut_report_shows_in_the_score_table_and_a_caveat(tmp_path):
    """report.html presented a score of a report the judge half-read like any other."""
    run = make_run_dir(tmp_path / "run", labels=False, extras=False)
    rows = [json.loads(line) for line in (run / "judgments.jsonl").read_text().splitlines()]
    key = ("judge", "judge_run", "agent", "task_id", "run")
    first = tuple(rows[0].get(k, 0) for k in key)
    for r in rows:
        if tuple(r.get(k, 0) for k in key) == first:
            r["truncated_tokens"] = 40
    (run / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = write_report(run).read_text()
    assert page.count("Reports cut (median seen)") == 1 and "1/" in page.split("Reports cut (median seen)")[1]
    assert 'class="warn caveat reports-cut"' in page and "max_model_len" in page
