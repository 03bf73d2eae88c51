"""One decision's page: the prompt with the cut marked, the verdict and label, every judge on it, the way back."""

from __future__ import annotations

import re
from html import escape

from lifesearch_local.judge.rubric import CHOICES, judge_prompt_span, report_choice_group
from lifesearch_local.output.view.decision import decision_page
from lifesearch_local.output.view.prompt import MARKER
from lifesearch_local.output.view.query import Query
from lifesearch_local.output.view.sources import Inputs, open_sources
from tests.helpers.view import CUT, LONG_TEXT, make_view_run


def sources(tmp_path, **kw):
    return open_sources([make_view_run(tmp_path / "run")], Inputs(**kw))


def test_a_cut_decision_shows_the_marker_and_what_the_judge_did_not_read(tmp_path):
    srcs = sources(tmp_path)
    page = decision_page(0, srcs[0], 0, Query(judge="choice-a", page=2), srcs, judge_prompt_span)
    assert f"<b>{CUT}</b>" in page
    assert f'<span class="marker">{escape(MARKER.format(n=CUT))}</span>' in page
    elided = re.search(r'<span class="elided">([^<]*)</span>', page).group(1)
    assert len(elided) == 4 * CUT and "HEAD-OF-REPORT" not in elided and "TAIL-OF-REPORT" not in elided
    assert "HEAD-OF-REPORT" in page and "TAIL-OF-REPORT" in page
    assert "estimated here at 4 characters per token" in page
    assert 'href="/s/0/decisions?judge=choice-a&amp;page=2"' in page  # back to the same filter and page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; cut &amp; read" in page
    assert "12 of 90 decisions again: max |Δp| 0.0123, 1 flip(s)" in page


def test_every_judge_on_the_same_decision_is_listed(tmp_path):
    srcs = sources(tmp_path)
    page = decision_page(0, srcs[0], 0, Query(), srcs, judge_prompt_span)
    table = page[page.index('id="others"'):]
    table = table[: table.index("</table>")]
    judges = re.findall(r'<a href="/s/0/d/(\d+)">([^<]+)</a>', table)
    assert [j for _, j in judges] == ["choice-a", "choice-a#1", "choice-a#2", "gen-b", "gen-b#1", "const"]
    for pos, judge in judges:
        assert srcs[0].index.judge_of(int(pos)) == judge and srcs[0].index.key(int(pos)) == ("t1", "alpha", 0, "r1")
    assert "agrees" in page and 'href="/s/0/decisions"' in page


def test_without_tasks_or_a_renderer_the_prompt_is_said_to_be_missing(tmp_path):
    srcs = sources(tmp_path)
    assert "Not shown: the prompt renderer is not at hand." in decision_page(0, srcs[0], 0, Query(), srcs, None)
    (tmp_path / "run" / "tasks.jsonl").unlink()
    bare = open_sources([tmp_path / "run"], Inputs())
    page = decision_page(0, bare[0], 3, Query(), bare, judge_prompt_span)
    assert "Not shown: the task (no tasks file) is not at hand." in page
    assert "no tasks file" in page  # the source's problem is said at the top too


def test_a_real_judged_run_with_a_cut_report_is_shown_as_the_judge_read_it(tmp_path, capsys):
    """`judge --out` with the tiny model at a 400-token context on a long report: the viewer finds the
    tasks and reports through the manifest, and places the cut with the judge's own tokenizer."""
    from lifesearch_local.cli import main

    run = make_view_run(tmp_path / "run")
    (tmp_path / "judge.yaml").write_text("judge:\n  id: tiny-cut\n  mode: choice\n"
                                         "  model: {backend: hf, model: tiny-llama, device: cpu, max_model_len: 400}\n")
    out = tmp_path / "judged"
    assert main(["judge", "--tasks", str(run / "tasks.jsonl"), "--reports", str(run / "reports.jsonl"), "--config",
                 str(tmp_path / "judge.yaml"), "--out", str(out), "--task-ids", "t1", "--quiet"]) == 0
    capsys.readouterr()
    srcs = open_sources([out], Inputs())
    src = srcs[0]
    assert src.problems == [] and len(src.index) == 18
    cut = [i for i in range(len(src.index)) if src.index.truncated[i] > 0 and src.index.key(i)[:3] == ("t1", "alpha", 0)]
    assert len(cut) == 3  # the long report's three rubrics
    page = decision_page(0, src, cut[0], Query(), srcs, judge_prompt_span, report_choice_group, CHOICES)
    assert "The cut is placed with the judge&#x27;s tokenizer (tiny-llama)" in page
    k = int(src.index.truncated[cut[0]])
    # the engines' own fitting, re-run on the judge's group for this report, cuts what was recorded
    assert (f"Re-run here with tiny-llama's tokenizer and context limit (400 positions), the engines' fitting cuts "
            f"{k} token(s), as recorded.") in page
    decoded = re.search(r'<pre id="decoded">([^<]*)</pre>', page).group(1)
    assert f"[… {k} tokens omitted here to fit the model&#x27;s context …]" in decoded
    head = re.search(r'<span class="report">([^<]*)</span><span class="marker">', page).group(1)
    elided = re.search(r'<span class="elided">([^<]*)</span>', page).group(1)
    tail = re.search(r'<span class="elided">[^<]*</span><span class="report">([^<]*)</span>', page).group(1)
    assert head + elided + tail == LONG_TEXT and head and tail  # a 400-token context keeps a few tokens each side
    # the kept tokens halved as the engine halves them, counted with the engine's own data tokenizer
    from transformers import AutoTokenizer

    from lifesearch_local.llm.models import resolved_path
    from serving.chat import encode_data

    tok = AutoTokenizer.from_pretrained(resolved_path("tiny-llama"))
    n = len(encode_data(tok, LONG_TEXT))
    spans = src.tokenizers.get("tiny-cut").offsets(LONG_TEXT)
    assert len(spans) == n
    assert sum(1 for _, e in spans if e <= len(head)) == (n - k + 1) // 2
    assert sum(1 for s, _ in spans if s >= len(head) + len(elided)) == (n - k) // 2
    # a recorded count the fitting does not give again is said, not passed over
    lines = (out / "judgments.jsonl").read_text().splitlines()
    line = int(src.index.line[cut[0]]) - 1
    lines[line] = lines[line].replace(f'"truncated_tokens":{k}', f'"truncated_tokens":{k + 1}')
    (out / "judgments.jsonl").write_text("\n".join(lines) + "\n")
    again = open_sources([out], Inputs())
    page = decision_page(0, again[0], cut[0], Query(), again, judge_prompt_span, report_choice_group, CHOICES)
    assert f"cuts {k} token(s), but {k + 1} are recorded" in page


def test_previous_and_next_walk_the_list_it_was_opened_from(tmp_path):
    srcs = sources(tmp_path)
    ix = srcs[0].index
    back = Query(judge="gen-b", verdict="false", per_page=5)  # 16 decisions: 94, 96, 99, 101, 104, 106, …
    page = decision_page(0, srcs[0], 104, back, srcs, judge_prompt_span)
    assert 'id="prev" href="/s/0/d/101?judge=gen-b&amp;verdict=false&amp;per_page=5"' in page
    assert 'id="next" href="/s/0/d/106?judge=gen-b&amp;verdict=false&amp;page=2&amp;per_page=5"' in page
    assert "5 of 16 in this list" in page
    first = decision_page(0, srcs[0], 94, back, srcs, judge_prompt_span)
    assert 'id="prev"' not in first and 'id="next" href="/s/0/d/96?' in first
    outside = decision_page(0, srcs[0], 0, back, srcs, judge_prompt_span)  # not in that list: only the way back
    assert 'id="prev"' not in outside and 'id="next"' not in outside and "in this list" not in outside
    assert ix.judge_of(104) == "gen-b" and ix.verdict[104] == 0
