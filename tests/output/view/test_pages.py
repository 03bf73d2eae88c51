"""The viewer's pages: hostile text escaped everywhere, links only to the viewer, the tables' contents."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from lifesearch_local.judge.rubric import judge_prompt_span
from lifesearch_local.output.view.server import Viewer
from lifesearch_local.output.view.sources import Inputs, open_sources
from tests.helpers.html import Tags
from tests.helpers.inputs import write_jsonl
from tests.helpers.view import make_view_run

EVIL = '<script>alert(1)</script><img src=x onerror=alert(2)>"\'&'



def check_page(page: str) -> Tags:
    """No script, image or event handler; every link and form leads back into the viewer."""
    t = Tags(page)
    assert {tag for tag, _ in t.tags} & {"script", "img", "iframe", "object", "embed", "svg"} == set()
    assert [a for _, attrs in t.tags for a in attrs if a.startswith("on")] == []
    for tag, attrs in t.tags:
        for name in ("href", "action", "src"):
            if name in attrs:
                url = urlsplit(attrs[name])
                assert not url.scheme and not url.netloc and attrs[name].startswith("/"), (tag, attrs)
    return t


@pytest.fixture
def hostile(tmp_path):
    """A run whose ids, criteria, reasons, raw outputs and report hold markup."""
    run = tmp_path / "run"
    run.mkdir()
    rub = {"id": f"R{EVIL}", "criterion": f"crit {EVIL}", "type": "Objective", "necessity": "Explicit",
           "priority": "Must Have", "weight": 1.0}
    write_jsonl(run / "tasks.jsonl", [{"id": f"t{EVIL}", "language": "en", "domain": "company",
                                       "question": f"q {EVIL}", "rubrics": [rub]}])
    write_jsonl(run / "reports.jsonl", [{"task_id": f"t{EVIL}", "agent": f"a{EVIL}", "text": f"report {EVIL}"}])
    j = {"task_id": f"t{EVIL}", "agent": f"a{EVIL}", "run": 0, "rubric_id": f"R{EVIL}", "satisfied": True,
         "p_true": 0.8, "reason": f"reason {EVIL}", "raw": f"raw {EVIL}"}
    write_jsonl(run / "judgments.jsonl", [{**j, "judge": f"j{EVIL}"}, {**j, "judge": "k", "satisfied": False}])
    write_jsonl(run / "labels.jsonl", [{k: j[k] for k in ("task_id", "agent", "run", "rubric_id", "satisfied")}])
    (run / "manifest.json").write_text(json.dumps({"package_version": "0", "python": "3", "created": "x", "updated": "x",
                                                   "replays": [{"at": EVIL, "sampled": 1, "flips": 0,
                                                                "judges": {EVIL: [EVIL]}}]}))
    return Viewer(open_sources([run], Inputs()), judge_prompt_span)


def get(viewer: Viewer, url: str) -> str:
    from urllib.parse import parse_qs

    u = urlsplit(url)
    status, ctype, body, _ = viewer.route(u.path, parse_qs(u.query, keep_blank_values=True))
    assert status == 200 and ctype.startswith("text/html")
    return body.decode()


@pytest.mark.parametrize("url", ["/", "/s/0/", "/s/0/decisions", "/s/0/disagreements", "/s/0/d/0", "/s/0/d/1",
                                 "/s/0/decisions?q=alert", "/diff?a=0%3Ak&b=0%3Aj%3Cscript%3Ealert(1)%3C%2Fscript%3E%3Cimg+src%3Dx+onerror%3Dalert(2)%3E%22%27%26&only=all"])
def test_hostile_text_is_shown_as_text(hostile, url):
    page = get(hostile, url)
    t = check_page(page)
    assert "<script>" not in page and "onerror=alert" not in page.replace("onerror=alert(2)&gt;", "")
    if url.startswith("/s/0/d/"):
        text = "".join(t.text)
        for shown in (f"reason {EVIL}", f"raw {EVIL}", f"report {EVIL}", f"crit {EVIL}"):
            assert shown in text  # the page says exactly what the file holds


def test_the_decisions_table_lists_the_page_with_links_that_keep_the_filter(tmp_path):
    viewer = Viewer(open_sources([make_view_run(tmp_path / "run")], Inputs()), judge_prompt_span)
    page = get(viewer, "/s/0/decisions?judge=gen-b&verdict=false&per_page=5")
    t = check_page(page)
    assert "16 of 180 decisions match." in "".join(t.text)
    rows = [a["href"] for tag, a in t.tags if tag == "a" and a.get("href", "").startswith("/s/0/d/")]
    assert len(rows) == 5 and all(h.endswith("?judge=gen-b&verdict=false&per_page=5") for h in rows)
    pager = [a["href"] for tag, a in t.tags if tag == "a" and "page=" in a.get("href", "").replace("per_page", "")]
    assert pager == ["/s/0/decisions?judge=gen-b&verdict=false&page=2&per_page=5",  # next, last
                     "/s/0/decisions?judge=gen-b&verdict=false&page=4&per_page=5"]
    chosen = [a.get("value") for tag, a in t.tags if tag == "option" and "selected" in a]
    assert chosen == ["gen-b", "false", "file"]


def test_the_leaderboard_page_shows_each_judge_with_intervals_and_the_replay(tmp_path):
    viewer = Viewer(open_sources([make_view_run(tmp_path / "run")], Inputs()), judge_prompt_span)
    text = "".join(check_page(get(viewer, "/s/0/")).text)
    for want in ("Judge choice-a", "Judge gen-b#1", "Score [95% CI]", "Decisions cut", "0.0123", "manifest.json"):
        assert want in text


def test_the_same_judge_in_two_runs_side_by_side(tmp_path):
    a, b = make_view_run(tmp_path / "a"), make_view_run(tmp_path / "b")
    lines = (b / "judgments.jsonl").read_text().splitlines()
    moved = json.loads(lines[6])  # choice-a on t1 · alpha · run 1 · r2: false at 0.1
    lines[6] = json.dumps({**moved, "satisfied": True, "p_true": 0.75})
    (b / "judgments.jsonl").write_text("\n".join(lines) + "\n")
    viewer = Viewer(open_sources([a, b], Inputs()), judge_prompt_span)
    t = check_page(get(viewer, "/diff?a=0%3Achoice-a&b=1%3Achoice-a"))
    text = "".join(t.text)
    assert "30 decisions made by both; 1 shown (only those that differ), 1 verdict flip(s)." in text
    links = [attrs["href"] for tag, attrs in t.tags if tag == "a" and "/d/" in attrs.get("href", "")]
    assert links == ["/s/0/d/6", "/s/1/d/6"] and "0.650" in text
    every = "".join(check_page(get(viewer, "/diff?a=0%3Achoice-a&b=1%3Achoice-a&only=all")).text)
    assert "30 shown (all)" in every


def test_cut_reports_are_counted_per_agent_and_the_caveat_names_the_limit(tmp_path):
    run = make_view_run(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["stage_configs"] = {"judge/choice-a": {"model": {"backend": "hf", "model": "m", "max_model_len": 4096}}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    lines = (run / "judgments.jsonl").read_text().splitlines()
    second = json.loads(lines[1])  # the same report as the first cut decision: still one report
    lines[1] = json.dumps({**second, "truncated_tokens": 7})
    (run / "judgments.jsonl").write_text("\n".join(lines) + "\n")
    viewer = Viewer(open_sources([run], Inputs()), judge_prompt_span)
    t = check_page(get(viewer, "/s/0/"))
    text = "".join(t.text)
    assert "2 decision(s) on 1 report(s) were made on a cut report" in text
    assert "(recorded limits: choice-a: max_model_len 4096)" in text
    assert any(a.get("href") == "/s/0/decisions?truncated=yes" for tag, a in t.tags if tag == "a")
    page = get(viewer, "/s/0/")
    board = page[page.index('id="board-choice-a"'):]
    alpha = board[board.index("<td class=\"\">alpha</td>"):].split("</tr>")[0]
    assert alpha.endswith('<td class="num">2</td><td class="num">1</td>')  # decisions cut, reports cut
