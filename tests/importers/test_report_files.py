"""Report files to text (markdown, text, HTML, PDF, DOCX) with what each lost; `lifesearch import reports`;
and the six real DeepResearch Bench II reports (all four formats) imported and judged on their tasks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.importers.report_files import Unreadable, import_reports, read_report_file
from lifesearch_local.records import Judgment, Report
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.docxgen import PICTURE, link, make_docx, para, run, table
from tests.helpers.inputs import ROOT, rubric, task, write_jsonl
from tests.helpers.pdfgen import make_pdf

DRB2_DIR = Path(os.environ.get("LIFESEARCH_DRB2_DIR") or ROOT.parent / "shared/external/deep_research_bench_2")
BODY = ("Channel state information of commodity Wi-Fi reveals who moves in a room and how they breathe. "
        "Attacks perturb the signal or listen to it; defenses randomise it or train models to resist. ") * 3
HTML = (f'<div class="answer"><h2>Findings</h2><p>Wi-Fi sensing leaks motion. {BODY}</p><img src="chart.png">'
        "<table><tr><th>Attack</th><th>Defense</th></tr><tr><td>Jamming</td><td>IRShield</td></tr></table>"
        f'<p>{BODY}</p><ul><li>See <a href="https://arxiv.org/abs/2412.03064">the survey</a>.</li></ul></div>').encode()


def write(folder: Path, name: str, data: bytes | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return p


def test_each_format_to_text_with_what_it_lost(tmp_path):
    md = write(tmp_path, "idx-1.md", "\ufeff# Report\n\nA fact ![chart](c.png) and more.\n")
    text, info = read_report_file(md, "t1", "a")
    assert text == "# Report\n\nA fact ![chart](c.png) and more.\n" and info.format == "markdown"
    assert info.images == 1 and info.lost == ["1 image(s): only their alt text and address reach the judge"]
    # a saved fragment (a chat's answer), not a page: trafilatura is given a page around it
    text, info = read_report_file(write(tmp_path, "idx-2.html", HTML), "t2", "a")
    assert "Wi-Fi sensing leaks motion." in text and "| Jamming | IRShield |" in text
    assert (info.images, info.tables) == (1, 1) and info.lost[0] == "1 image(s) dropped"
    # the closing link list went as boilerplate: said, in the share of the words a reader would see
    assert "the survey" not in text and info.lost[1].startswith("1.4% of the page's visible words not kept")
    pdf = make_pdf([["Land finance in China", "Revenue fell."], ["Second page."]], title="Land")
    text, info = read_report_file(write(tmp_path, "idx-3.pdf", pdf), "t3", "a")
    assert text.startswith("[page 1]\nLand finance in China") and "[page 2]\nSecond page." in text
    assert info.pages == 2 and info.images == 0
    assert info.lost == ["layout flattened into text lines: tables, columns and headings are not marked"]
    docx = make_docx([para(run("Trial results"), link("[1]", "rId1")), table([["a", "b"]]), para(PICTURE)],
                     links={"rId1": "https://example.org/t"})
    text, info = read_report_file(write(tmp_path, "idx-4.docx", docx), "t4", "a")
    assert text.startswith("Trial results[[1]](https://example.org/t)\n\n| a | b |")
    assert info.lost == ["1 image(s) or chart(s) dropped", "1 table(s) written as markdown rows (merged cells not spanned)"]
    assert info.chars == len(text) and info.file == str(tmp_path / "idx-4.docx")


@pytest.mark.parametrize(("name", "data", "why"), [
    ("idx-1.png", b"\x89PNG", "a .png image: our judges read text"),
    ("idx-1.doc", b"\xd0\xcf", "a legacy Word .doc"),
    ("idx-1.rtf", b"{\\rtf", "unknown report format .rtf"),
    ("idx-1.md", b"\xff\xfe bad", "not UTF-8 text at byte 0"),
    ("idx-1.pdf", b"%PDF-1.4 broken", "the PDF reader failed"),
    ("idx-1.pdf", b"<html>not a pdf</html>", "not a PDF file"),
    ("idx-1.docx", b"PK broken", "not a DOCX file"),
    ("idx-1.md", b"  \n", "no text in this markdown file"),
])
def test_a_file_without_text_is_unreadable_in_one_line(tmp_path, name, data, why):
    with pytest.raises(Unreadable, match=why) as e:
        read_report_file(write(tmp_path, name, data), "t", "a")
    assert "\n" not in str(e.value)


def test_import_reports_names_tasks_refuses_unreadable_one_line_each_and_records_losses(tmp_path, capsys):
    d = tmp_path / "agent-x"
    write(d, "idx-7.md", "report seven")
    write(d, "idx-9.html", HTML)
    write(d, "custom-task.txt", "a report named by its task id")
    write(d, "idx-8.png", b"\x89PNG")
    write(d, "idx-10.md", b"\xff bad")
    with pytest.raises(LifesearchError) as e:
        import_reports(d, "x", prefix="drb2-")
    lines = str(e.value).splitlines()
    assert lines[0].startswith("2 report file(s) cannot be read (--skip-unreadable imports the others")
    assert lines[1:] == [f"  {d / 'idx-10.md'}: not UTF-8 text at byte 0; re-encode the report as UTF-8",
                         f"  {d / 'idx-8.png'}: a .png image: our judges read text and there is no OCR here (the upstream "
                         "evaluator sends images to Gemini as attachments); transcribe it to markdown"]
    got = import_reports(d, "x", prefix="drb2-", skip_unreadable=True)
    assert [(r.task_id, r.agent) for r in got.reports] == [("custom-task", "x"), ("drb2-7", "x"), ("drb2-9", "x")]
    assert len(got.refused) == 2 and [f.format for f in got.files] == ["text", "markdown", "html"]
    with pytest.raises(InputError, match="a report of task custom-task, which is not in the tasks file tasks.jsonl"):
        import_reports(d, "x", prefix="drb2-", known={"drb2-7", "drb2-9"}, tasks_source="tasks.jsonl", skip_unreadable=True)
    out = tmp_path / "out"
    assert main(["import", "reports", "--dir", str(d), "--agent", "x", "--id-prefix", "drb2-", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 2 report file(s) cannot be read") and len(err.strip().splitlines()) == 3
    assert not out.exists()
    assert main(["import", "reports", "--dir", str(d), "--agent", "x", "--id-prefix", "drb2-", "--out", str(out),
                 "--skip-unreadable", "--max-chars", "8"]) == 0
    printed = capsys.readouterr().out
    assert "imported 3 reports of agent x; 3 cut at 8 characters" in printed
    assert "report files: 3 read (html 1, markdown 1, text 1), 2 unreadable skipped" in printed
    assert "  idx-9.html (drb2-9, " in printed and f"  skipped {d / 'idx-8.png'}: a .png image" in printed
    assert [r.text for r in read_records(out / "reports.jsonl", Report)] == ["a report", "report s", "## Findi"]
    info = json.loads((out / "import.json").read_text())
    assert info["counts"] == {"reports": 3, "refused": 2, "reports_cut": 3} and len(info["refused"]) == 2
    assert info["report_files"][2]["lost"][0] == "1 image(s) dropped" and info["report_files"][2]["task_id"] == "drb2-9"


def real_reports(tmp_path: Path) -> Path:
    src = DRB2_DIR / "reports"
    if not src.is_dir():
        pytest.skip(f"no DeepResearch Bench II reports at {src} (../shared, or LIFESEARCH_DRB2_DIR)")
    agent = tmp_path / "reports" / "web-agent"
    agent.mkdir(parents=True)
    for f in src.iterdir():
        (agent / f.name).write_bytes(f.read_bytes())
    return agent


@pytest.mark.slow
def test_the_six_real_reports_import_in_all_four_formats_and_judge_on_their_tasks(tmp_path, capsys):
    """The six DRB II reports import (md, html, pdf, docx) and judge with --task-ids."""
    folder = real_reports(tmp_path)
    out = tmp_path / "drb2"
    assert main(["import", "drb2", "--tasks", str(DRB2_DIR / "tasks_and_rubrics.jsonl"), "--reports-dir", str(folder),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "reports: web-agent 6" in printed and "report files: 6 read (docx 1, html 1, markdown 3, pdf 1)" in printed
    reports = read_records(out / "reports.jsonl", Report)
    ids = sorted(r.task_id for r in reports)
    assert ids == ["drb2-1", "drb2-16", "drb2-2", "drb2-40", "drb2-55", "drb2-62"]
    assert all(len(r.text) > 5000 for r in reports)  # whole reports, not a title or an empty extraction
    files = {Path(f["file"]).name: f for f in json.loads((out / "import.json").read_text())["report_files"]}
    assert {f["format"] for f in files.values()} == {"markdown", "html", "pdf", "docx"}
    assert files["idx-1.pdf"]["pages"] >= 1 and "layout flattened" in files["idx-1.pdf"]["lost"][-1]
    text = {r.task_id: r.text for r in reports}
    assert "土地财政" in text["drb2-1"]  # the Chinese PDF's text
    # the chat page's key points and sources: trafilatura's default (precision) took them for boilerplate
    assert "Research suggests Wi-Fi sensing" in text["drb2-40"] and "arxiv.org/html/2404.15587" in text["drb2-40"]
    assert "| --- |" in text["drb2-62"] and "](https://" in text["drb2-62"]  # the DOCX's table and cited links
    # a tiny random judge (plumbing, not a finding) on a 512-token context, which keeps this test short
    judge_yaml = tmp_path / "judge.yaml"
    judge_yaml.write_text("judge:\n  model:\n    model: tiny-llama\n    max_model_len: 512\n")
    chosen = ",".join(ids)
    run = tmp_path / "judge"
    assert main(["judge", "--tasks", str(out / "tasks.jsonl"), "--reports", str(out / "reports.jsonl"), "--config",
                 str(judge_yaml), "--out", str(run), "--task-ids", chosen, "--quiet"]) == 0
    assert "--task-ids: judging 6 of 132 tasks and their 6 of 6 reports" in capsys.readouterr().out
    judged = read_records(run / "judgments.jsonl", Judgment)
    tasks = {t["id"]: t for t in map(json.loads, (out / "tasks.jsonl").read_text().splitlines())}
    assert {j.task_id for j in judged} == set(ids) and len(judged) == sum(len(tasks[t]["rubrics"]) for t in ids)
    assert main(["score", "--tasks", str(out / "tasks.jsonl"), "--judgments", str(run / "judgments.jsonl")]) == 2
    assert "incomplete run" in capsys.readouterr().err  # 126 tasks without a judgment: refused, not scored 0
    assert main(["score", "--tasks", str(out / "tasks.jsonl"), "--judgments", str(run / "judgments.jsonl"),
                 "--task-ids", chosen, "--json"]) == 0
    agent = json.loads(capsys.readouterr().out)["agents"]["web-agent"]
    assert agent["judged"] == len(judged) and len(agent["tasks"]) == 6


def test_the_real_reports_of_another_agent_import_alone(tmp_path, capsys):
    """`import reports` on the same six files: the tasks file checks their ids."""
    folder = real_reports(tmp_path)
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"drb2-{n}", [rubric("R1", 1.0)]) for n in (1, 2, 16, 40, 55, 62)])
    out = tmp_path / "out"
    assert main(["import", "reports", "--dir", str(folder), "--agent", "web-agent", "--id-prefix", "drb2-",
                 "--tasks", str(tasks), "--out", str(out)]) == 0
    assert "imported 6 reports of agent web-agent" in capsys.readouterr().out
