"""`lifesearch import drb2`: tasks and reports, the command's summary, and the real release."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.importers import drb2
from lifesearch_local.importers.drb2_results import export_from_dir, write_drb2
from lifesearch_local.records import Judgment, Label, Report
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.drb2 import REPORTS, RESULTS, TASKS, lines, rows, run_import
from tests.helpers.inputs import ROOT, write_jsonl

DRB2_DIR = Path(os.environ.get("LIFESEARCH_DRB2_DIR")
                or ROOT.parent / "shared/external/deep_research_bench_2")


# -- tasks -------------------------------------------------------------------------------------

def test_tasks_fields():
    result = drb2.import_drb2(TASKS)
    t1, t2, t3 = result.tasks
    assert [(r.id, r.dimension, r.weight, r.type, r.necessity, r.priority) for r in t1.rubrics] == [
        ("R1", "info_recall", 1.0, "Objective", "Implicit", "Must Have"),
        ("R2", "info_recall", 1.0, "Objective", "Implicit", "Must Have"),
        ("R3", "analysis", 1.0, "Objective", "Implicit", "Must Have"),
        ("R4", "analysis", 1.0, "Objective", "Implicit", "Must Have"),  # the repeated text keeps its own rubric
        ("R5", "presentation", 1.0, "Subjective", "Implicit", "Must Have"),
    ]
    raw = rows(TASKS)
    assert t1.rubrics[0].criterion == raw[0]["content"]["rubric"]["info_recall"][0]  # verbatim: the results' key
    assert (t1.id, t1.language, t1.domain.value, t1.question) == ("drb2-1", "en", "industry", raw[0]["prompt"])
    assert (t2.id, t2.language, t2.domain.value) == ("drb2-2", "zh", "academic")
    assert t1.blocked.title == raw[0]["content"]["blocked"]["title"] and t1.blocked.urls == raw[0]["content"]["blocked"]["urls"]
    assert t3.blocked is None
    assert drb2.import_drb2(TASKS, question="task").tasks[0].question == raw[0]["content"]["task"]
    counts = drb2.task_counts(result)
    assert counts["dimensions"] == {"info_recall": 4, "analysis": 4, "presentation": 2}
    assert counts["repeated_rubric_texts"] == 1 and counts["tasks_with_blocked"] == 2


@pytest.mark.parametrize("question", ["prompt", "task"])
def test_tasks_round_trip_is_exact(tmp_path, question):
    out = run_import(tmp_path / "out", "--question", question)
    tasks = load_tasks(out / "tasks.jsonl")  # what a reader of the directory gets, blocked and dimension included
    sources = [s for _, s in drb2.read_rows(out / "drb2_source.jsonl", drb2.Drb2Source)]
    assert [json.dumps(r, ensure_ascii=False) for r in drb2.reconstruct_tasks(tasks, sources)] == lines(TASKS)


# -- reports -----------------------------------------------------------------------------------

def test_reports_from_the_evaluator_layout_and_from_jsonl(tmp_path):
    result = drb2.import_drb2(TASKS, reports=[REPORTS])
    assert [(r.task_id, r.agent) for r in result.reports] == [("drb2-1", "sys-a"), ("drb2-2", "sys-a"), ("drb2-1", "sys-b")]
    assert result.reports[1].text == (REPORTS / "sys-a" / "idx-2.txt").read_text(encoding="utf-8")
    one = drb2.import_drb2(TASKS, reports=[REPORTS / "sys-b"], agent="renamed").reports
    assert [(r.task_id, r.agent) for r in one] == [("drb2-1", "renamed")]
    j = write_jsonl(tmp_path / "reports-sys-c.jsonl", [{"idx": 3, "article": "x" * 50}])
    cut = drb2.import_drb2(TASKS, reports=[j], max_chars=20)
    assert [(r.task_id, r.agent, r.text) for r in cut.reports] == [("drb2-3", "sys-c", "x" * 20)] and cut.cut_reports == 1


def test_bad_reports(tmp_path):
    d = tmp_path / "sys-x"
    d.mkdir()
    (d / "idx-9.md").write_text("report")
    with pytest.raises(InputError, match="idx: report for idx 9, which is not in the tasks file"):
        drb2.import_drb2(TASKS, reports=[d])
    (d / "idx-9.md").unlink()
    # files that give no text: refused together, one line each (report_files.py reads the rest)
    (d / "idx-1.pdf").write_bytes(b"%PDF")
    (d / "idx-2.md").write_bytes(b"\xff\xfe bad")
    (d / "idx-3.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(LifesearchError) as e:
        drb2.import_drb2(TASKS, reports=[d])
    assert str(e.value).splitlines()[1:] == [f"  {d / 'idx-3.jpg'}: a .jpg image: our judges read text and there is no "
                                             "OCR here (the upstream evaluator sends images to Gemini as attachments); "
                                             "transcribe it to markdown",
                                             f"  {d / 'idx-1.pdf'}: not a PDF file (no %PDF- header)",
                                             f"  {d / 'idx-2.md'}: not UTF-8 text at byte 0; re-encode the report as UTF-8"]
    (d / "idx-3.jpg").unlink()
    (d / "idx-3.md").write_text("readable")
    kept = drb2.import_drb2(TASKS, reports=[d], skip_unreadable=True)
    assert [r.task_id for r in kept.reports] == ["drb2-3"] and len(kept.refused) == 2  # the others recorded
    for name in ("idx-1.pdf", "idx-2.md", "idx-3.md"):
        (d / name).unlink()
    (d / "idx-1.md").write_text("a")
    (d / "idx-1.txt").write_text("b")
    with pytest.raises(InputError, match="a second report for idx 1"):
        drb2.import_drb2(TASKS, reports=[d])
    with pytest.raises(LifesearchError, match="--agent names the agent of one"):
        drb2.import_drb2(TASKS, reports=[REPORTS / "sys-a", REPORTS / "sys-b"], agent="x")
    with pytest.raises(LifesearchError, match="one folder per agent"):
        drb2.import_drb2(TASKS, reports=[REPORTS], agent="x")
    for agent in ("\u200b", "sys\x00b"):  # an empty or control-character agent name, as validate refuses it
        with pytest.raises(InputError, match="agent .*: (empty|control character)"):
            drb2.import_drb2(TASKS, reports=[REPORTS / "sys-b"], agent=agent)


def test_a_control_character_in_the_ids_is_refused_where_it_comes_from():
    with pytest.raises(InputError) as exc:
        drb2.import_drb2(TASKS, prefix="drb2\x00-")
    assert (exc.value.path, exc.value.line, exc.value.field) == (str(TASKS), 1, "id")
    assert "control character U+0000" in exc.value.message


@pytest.mark.parametrize(("change", "line", "field", "msg"), [
    (lambda d: d[1].update(idx=1), 2, "idx", "duplicate idx 1 (first on line 1)"),
    (lambda d: d[2]["content"]["rubric"].update(style=["x"]), 3, "content.rubric.style", "unknown DRB II dimension"),
    (lambda d: d[0]["content"]["rubric"]["analysis"].append("  "), 1, "content.rubric.analysis[2]", "empty rubric"),
    (lambda d: d[0].update(language="fr"), 1, "language", "Input should be 'en' or 'zh'"),
    (lambda d: d[1].update(theme="Pets"), 2, "theme", "no domain for DRB II theme(s) 'Pets'"),
    (lambda d: d[0]["content"]["blocked"].pop("urls"), 1, "content.blocked.urls", "Field required"),
    (lambda d: d[0]["content"]["rubric"]["analysis"].append("\u200b\u2060"), 1, "content.rubric.analysis[2]", "empty rubric"),
    (lambda d: d[1].update(prompt=""), 2, "prompt", "empty question"),
    (lambda d: d[1].update(prompt="\ufeff \u200c"), 2, "prompt", "empty question"),
])
def test_bad_tasks_are_located(tmp_path, change, line, field, msg):
    data = rows(TASKS)
    change(data)
    path = write_jsonl(tmp_path / "t.jsonl", data)
    with pytest.raises(InputError) as exc:
        drb2.import_drb2(path)
    assert (exc.value.line, exc.value.field) == (line, field) and msg in exc.value.message


# -- the command: summary, idempotence, agree --------------------------------------------------

def test_cli_summary_idempotent_and_force(tmp_path, capsys):
    out = run_import(tmp_path / "out")
    printed = capsys.readouterr().out
    assert "imported 3 tasks (en 2, zh 1), 10 rubrics (info_recall 4, analysis 4, presentation 2)" in printed
    assert "reports: sys-a 2, sys-b 1" in printed
    assert "results: 4 graded lines (1 failed, 1 repeats) -> 12 labels, 17 judgments of gemini" in printed
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["drb2_results_source.jsonl", "drb2_source.jsonl", "import.json", "judgments.jsonl",
                              "labels.jsonl", "reports.jsonl", "tasks.jsonl"]
    argv = ["import", "drb2", "--tasks", str(TASKS), "--reports", str(REPORTS), "--results", str(RESULTS), "--out", str(out)]
    assert main(argv) == 2 and "not empty; pass --force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # same input, same bytes
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    other = tmp_path / "runs"
    other.mkdir()
    (other / "judgments.jsonl").write_text("{}\n")
    assert main(["import", "drb2", "--tasks", str(TASKS), "--out", str(other), "--force"]) == 2
    assert "not an earlier `lifesearch import drb2` output" in capsys.readouterr().err
    assert main(["validate", str(out / "tasks.jsonl")]) == 0


def test_agree_compares_a_judge_with_the_imported_labels(tmp_path, capsys):
    out = run_import(tmp_path / "out")
    capsys.readouterr()
    labels = read_records(out / "labels.jsonl", Label)
    # a stand-in open judge that says "satisfied" to every labelled rubric of sys-a and sys-b
    judged = [Judgment(task_id=x.task_id, agent=x.agent, rubric_id=x.rubric_id, judge="open/choice/000000",
                       satisfied=True, p_true=0.9) for x in labels]
    jpath = tmp_path / "j.jsonl"
    jpath.write_text("".join(j.model_dump_json() + "\n" for j in judged))
    assert main(["agree", "--tasks", str(out / "tasks.jsonl"), "--judgments", str(jpath), "--labels",
                 str(out / "labels.jsonl"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n_labels"] == 12 and res["label_source"] == "gemini"
    yes = sum(x.satisfied for x in labels)
    assert res["judges"]["open/choice/000000"]["accuracy_mean"] == pytest.approx(yes / 12)
    # the evaluator's judgments as the reference instead: same decisions, so the same accuracy
    assert main(["agree", "--tasks", str(out / "tasks.jsonl"), "--judgments", str(jpath), "--labels-from-judgments",
                 str(out / "judgments.jsonl"), "--label-judge", "gemini", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["judges"]["open/choice/000000"]["accuracy_mean"] == pytest.approx(yes / 12)


# -- the real DeepResearch Bench II release ----------------------------------------------------

@pytest.fixture(scope="module")
def real_tasks() -> Path:
    path = DRB2_DIR / "tasks_and_rubrics.jsonl"
    if not path.is_file():
        pytest.skip(f"DeepResearch Bench II data not found at {DRB2_DIR} (set LIFESEARCH_DRB2_DIR)")
    return path


def fake_results(tasks_path: Path, seed: int = 0) -> list[dict]:
    """Results lines in the evaluator's format for every real task (one system), seeded scores."""
    rng = random.Random(seed)
    out = []
    for model in ("sys-a",):
        for t in rows(tasks_path):
            scores = {d: {text: {"score": rng.choice((1, 1, 0, -1)), "reason": f"r{i}", "evidence": ""}
                          for i, text in enumerate(texts)} for d, texts in t["content"]["rubric"].items()}
            out.append({"model": model, "idx": t["idx"], "result": {"task": t["content"]["task"], "scores": scores,
                                                                     "usage_summary": {"total_tokens": 1}}})
    return out


def test_real_release_imports_validates_and_round_trips(real_tasks, tmp_path, capsys):
    results = write_jsonl(tmp_path / "result.jsonl", fake_results(real_tasks))
    out = tmp_path / "out"
    assert main(["import", "drb2", "--tasks", str(real_tasks), "--results", str(results), "--out", str(out)]) == 0
    assert "imported 132 tasks (en 66, zh 66), 9415 rubrics (info_recall 6983, analysis 1686, presentation 746)" in (
        capsys.readouterr().out)
    assert main(["validate", str(out / "tasks.jsonl")]) == 0
    assert "132 tasks, 9415 rubrics; languages: en 66, zh 66" in capsys.readouterr().out
    tasks = load_tasks(out / "tasks.jsonl")
    assert sum(t.language == "zh" for t in tasks) == 66 and sum(len(t.rubrics) for t in tasks) == 9415
    assert all(r.weight == 1.0 and r.dimension in drb2.DIMENSIONS for t in tasks for r in t.rubrics)
    assert sum(t.blocked is not None for t in tasks) == 131  # idx 124 has none
    sources = [s for _, s in drb2.read_rows(out / "drb2_source.jsonl", drb2.Drb2Source)]
    assert [json.dumps(r, ensure_ascii=False) for r in drb2.reconstruct_tasks(tasks, sources)] == lines(real_tasks)
    # idx 116 repeats 6 analysis rubric texts: the results key them once, the labels cover both rubrics
    info = json.loads((out / "import.json").read_text())
    assert info["counts"]["repeated_rubric_texts"] == 6
    assert info["results"]["rubrics_without_label"] == 0 and info["results"]["labels"] == 9415
    assert [json.dumps(o, ensure_ascii=False) for _, o in export_from_dir(out)] == lines(results)


def test_real_release_with_reports_and_question_task(real_tasks, tmp_path):
    d = tmp_path / "report" / "my-agent"
    d.mkdir(parents=True)
    (d / "idx-116.md").write_text("report for 116")
    result = drb2.import_drb2(real_tasks, reports=[tmp_path / "report"], question="task")
    assert [(r.task_id, r.agent) for r in result.reports] == [("drb2-116", "my-agent")]
    raw = {r["idx"]: r for r in rows(real_tasks)}
    assert {t.id: t.question for t in result.tasks}["drb2-116"] == raw[116]["content"]["task"]
    write_drb2(result, None, tmp_path / "out")
    assert read_records(tmp_path / "out" / "reports.jsonl", Report)[0].text == "report for 116"
    shutil.rmtree(tmp_path / "report")


@pytest.mark.slow
def test_an_open_judge_on_the_imported_reports_against_the_imported_labels(tmp_path, capsys):
    """The docs' real-data route on the fixtures: import, judge the same reports with an open judge
    (a tiny random one here: plumbing, not a finding), agree with the evaluator's labels."""
    out = run_import(tmp_path / "out")
    run = tmp_path / "judge"
    assert main(["judge", "--tasks", str(out / "tasks.jsonl"), "--reports", str(out / "reports.jsonl"),
                 "--model", "tiny-llama", "--out", str(run), "--quiet"]) == 0
    judged = read_records(run / "judgments.jsonl", Judgment)
    assert len(judged) == 12 and all(0.0 <= j.p_true <= 1.0 for j in judged)  # 5 + 5 + 2 rubrics of 3 reports
    capsys.readouterr()
    assert main(["agree", "--tasks", str(out / "tasks.jsonl"), "--judgments", str(run / "judgments.jsonl"),
                 "--labels", str(out / "labels.jsonl"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    (judge,) = res["judges"].values()
    assert res["n_labels"] == 12 and judge["n"] == 12
