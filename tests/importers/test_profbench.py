"""`lifesearch import profbench`: weights against ProfBench's own score, labels, located errors, round trip, agree."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.analysis.scoring import task_score
from lifesearch_local.cli import main
from lifesearch_local.errors import InputError
from lifesearch_local.importers import profbench
from lifesearch_local.records import Domain, Judgment, Label, Report
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import FIXTURES, write_jsonl

FIX = FIXTURES / "import" / "profbench.jsonl"
SYSTEMS = ("o3", "grok4", "r1-0528")  # the systems the official loader reads
SCALE = {"Critical": 4, "Major": 3, "Minor": 2, "Additional": 1}  # ProfBench's score_report_generation.py


def rows() -> list[dict]:
    return [json.loads(line) for line in FIX.read_text(encoding="utf-8").splitlines()]


def test_fixture_rows_have_the_loader_fields():
    """The fixture is only worth its name if it has every field the official loader reads."""
    for row in rows():
        assert {"task_id", "domain", "prompt", "rubrics"} <= set(row) and all(f"{s}_response" in row for s in SYSTEMS)
        for c in row["rubrics"]:
            assert {"criterion_description", "criterion_type", "criterion_weight"} <= set(c)
            assert all(f"{s}_fulfilment" in c for s in SYSTEMS)


def test_tasks_reports_labels():
    result = profbench.import_profbench(FIX)
    chem, cons = result.tasks
    assert (chem.id, chem.language, chem.domain, chem.question) == ("pb-Chem-0", "en", Domain.academic, rows()[0]["prompt"])
    assert cons.domain == Domain.company
    assert [(r.id, r.weight, r.priority, r.type, r.dimension) for r in chem.rubrics] == [
        ("R1", 1.0, "Must Have", "Objective", "Extraction (recall)"),
        ("R2", 0.75, "Must Have", "Objective", "Reasoning"),
        ("R3", 0.5, "Nice to Have", "Objective", "Reasoning"),
        ("R4", 0.25, "Nice to Have", "Subjective", "Style"),
    ]
    assert cons.rubrics[1].dimension == "Style, Reasoning" and cons.rubrics[1].type == "Subjective"
    assert [(r.task_id, r.agent) for r in result.reports[:3]] == [("pb-Chem-0", s) for s in SYSTEMS]
    assert result.reports[0].text == rows()[0]["o3_response"]
    assert len(result.labels) == 6 * 3 and {x.source for x in result.labels} == {"human"}
    assert [x.satisfied for x in result.labels if x.task_id == "pb-Chem-0" and x.rubric_id == "R1"] == [True, False, True]


def profbench_score(row: dict, system: str) -> float:
    """ProfBench's per-report score, written out from its scoring script's rule."""
    total = sum(SCALE[c["criterion_weight"]] for c in row["rubrics"])
    return sum(SCALE[c["criterion_weight"]] for c in row["rubrics"] if c[f"{system}_fulfilment"]) / total


def test_our_score_of_the_human_labels_equals_profbench_score():
    result = profbench.import_profbench(FIX)
    for task, row in zip(result.tasks, rows()):
        for s in SYSTEMS:
            met = {x.rubric_id: x.satisfied for x in result.labels if x.task_id == task.id and x.agent == s}
            assert task_score(task.rubrics, met) == pytest.approx(profbench_score(row, s), abs=1e-12)
    # and the scores differ between systems, so the check above could fail
    assert len({round(profbench_score(rows()[0], s), 6) for s in SYSTEMS}) == 3


def test_round_trip_is_exact(tmp_path):
    out = profbench.write_profbench(profbench.import_profbench(FIX), tmp_path / "out")
    back = profbench.reconstruct_rows(*profbench.load_dir(out))
    assert [json.dumps(r, ensure_ascii=False) for r in back] == FIX.read_text(encoding="utf-8").splitlines()


def test_round_trip_keeps_int_fulfilment_and_extra_keys(tmp_path):
    data = rows()
    data[0]["rubrics"][0]["o3_fulfilment"] = 0
    data[0]["rubrics"][0]["annotator_note"] = "kept"
    data[1]["extra_field"] = {"a": [1, 2]}
    path = write_jsonl(tmp_path / "pb.jsonl", data)
    result = profbench.import_profbench(path, prefix="")
    assert result.tasks[0].id == "Chem-0" and result.labels[0].satisfied is False
    out = profbench.write_profbench(result, tmp_path / "out")
    back = profbench.reconstruct_rows(*profbench.load_dir(out))
    assert [json.dumps(r, ensure_ascii=False) for r in back] == path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(("change", "line", "field", "msg"), [
    (lambda d: d[0]["rubrics"][1].update(criterion_weight="Important"), 1, "rubrics[1].criterion_weight", "unknown level 'Important'"),
    (lambda d: d[1]["rubrics"][0].pop("grok4_fulfilment"), 2, "rubrics[0].grok4_fulfilment", "missing"),
    (lambda d: d[0].pop("grok4_response"), 1, "rubrics[0].grok4_fulfilment", "a system with no response"),
    (lambda d: d[0]["rubrics"][2].update(o3_fulfilment="yes"), 1, "rubrics[2].o3_fulfilment", "expected true/false"),
    (lambda d: d[0]["rubrics"][2].update(o3_fulfilment=2), 1, "rubrics[2].o3_fulfilment", "got 2"),
    (lambda d: d[1].update(task_id="Chem-0"), 2, "task_id", "duplicate task_id 'Chem-0' (first on line 1)"),
    (lambda d: d[1].update(domain="Law JD"), 2, "domain", "no LifeSearch domain for ProfBench domain 'Law JD'"),
    (lambda d: d[0]["rubrics"][0].pop("criterion_description"), 1, "rubrics[0].criterion_description", "Field required"),
    (lambda d: d[1].update(o3_response=None), 2, "o3_response", "expected the report text"),
    (lambda d: d[1].update(rubrics=[]), 2, "rubrics", "no criteria"),
    (lambda d: d[1].update(prompt=" "), 2, "prompt", "empty question"),
    (lambda d: d[0]["rubrics"][1].update(criterion_description="\u200b"), 1, "rubrics[1].criterion_description",
     "empty criterion"),
    (lambda d: d[1].update(task_id="Chem\x00-1"), 2, "task_id", "control character U+0000"),
    (lambda d: d[0].update({"\u200b_response": "text"}), 1, "\u200b_response", "empty"),
])
def test_bad_rows_are_located(tmp_path, change, line, field, msg):
    data = rows()
    change(data)
    path = write_jsonl(tmp_path / "pb.jsonl", data)
    with pytest.raises(InputError) as exc:
        profbench.import_profbench(path)
    assert (exc.value.path, exc.value.line, exc.value.field) == (str(path), line, field) and msg in exc.value.message


def test_domain_map_override(tmp_path):
    m = tmp_path / "map.yaml"
    m.write_text("Consulting MBA: industry\nLaw JD: policy\n")
    data = rows()
    data[1]["domain"] = "Law JD"
    result = profbench.import_profbench(write_jsonl(tmp_path / "pb.jsonl", data), domain_map=m)
    assert [t.domain for t in result.tasks] == [Domain.academic, Domain.policy]


def test_cli_idempotent_and_agree(tmp_path, capsys):
    out = tmp_path / "pb"
    argv = ["import", "profbench", str(FIX), "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "imported 2 tasks, 6 rubrics, 6 reports, 18 human labels" in printed
    assert "labels satisfied: o3 4/6, grok4 3/6, r1-0528 3/6" in printed
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["import.json", "labels.jsonl", "profbench_source.jsonl", "reports.jsonl", "tasks.jsonl"]
    assert main([*argv, "--force"]) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main(["validate", str(out / "tasks.jsonl")]) == 0
    capsys.readouterr()
    # agree on the human labels works as on the sample labels: a judge that copies o3's labels and
    # says "satisfied" elsewhere agrees fully on o3 and only on the satisfied labels of the others
    labels = read_records(out / "labels.jsonl", Label)
    reports = read_records(out / "reports.jsonl", Report)
    assert {(r.task_id, r.agent) for r in reports} == {(x.task_id, x.agent) for x in labels}
    judged = [Judgment(task_id=x.task_id, agent=x.agent, rubric_id=x.rubric_id, judge="open/choice/111111",
                       satisfied=x.satisfied if x.agent == "o3" else True) for x in labels]
    jpath = tmp_path / "j.jsonl"
    jpath.write_text("".join(j.model_dump_json() + "\n" for j in judged))
    assert main(["agree", "--tasks", str(out / "tasks.jsonl"), "--judgments", str(jpath), "--labels",
                 str(out / "labels.jsonl"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    expect = (6 + sum(x.satisfied for x in labels if x.agent != "o3")) / 18
    assert res["n_labels"] == 18 and res["label_source"] == "human"
    assert res["judges"]["open/choice/111111"]["accuracy_mean"] == pytest.approx(expect)
    tasks = load_tasks(out / "tasks.jsonl")
    assert sorted({r.weight for t in tasks for r in t.rubrics}) == [0.25, 0.5, 0.75, 1.0]


@pytest.mark.slow
def test_an_open_judge_on_profbench_reports_against_the_human_labels(tmp_path, capsys):
    """Import, judge the systems' reports with an open judge (tiny, random: plumbing only), agree."""
    out = tmp_path / "pb"
    assert main(["import", "profbench", str(FIX), "--out", str(out)]) == 0
    run = tmp_path / "judge"
    assert main(["judge", "--tasks", str(out / "tasks.jsonl"), "--reports", str(out / "reports.jsonl"),
                 "--model", "tiny-llama", "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["agree", "--tasks", str(out / "tasks.jsonl"), "--judgments", str(run / "judgments.jsonl"),
                 "--labels", str(out / "labels.jsonl"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    (judge,) = res["judges"].values()
    assert res["n_labels"] == 18 and judge["n"] == 18 and judge["rank_agents"] == 3


@pytest.mark.parametrize("text, message", [
    ('{"inputs": ' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nested deeper than 64 levels"),
    ('{"inputs": {}}', r"inputs.id_prefix: missing"),
    ("[]", "inputs: missing"),
])
def test_a_damaged_import_json_is_one_located_error(tmp_path, text, message):
    out = profbench.write_profbench(profbench.import_profbench(FIX), tmp_path / "out")
    (out / "import.json").write_text(text)
    with pytest.raises(InputError, match=f"import.json: {message}"):
        profbench.load_dir(out)
