"""Task loader: the paper's spellings accepted, every bad input named by file:line:field."""

from __future__ import annotations

import pytest

from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.records import Domain, Report
from lifesearch_local.tasks import check_known_tasks, chosen_tasks, load_tasks, parse_domain, summarize
from tests.helpers.inputs import rubric, task, write_jsonl


def test_accepts_paper_spellings_case_insensitively(tmp_path):
    rows = [
        task("a", [rubric("R1", 0.5, type="OBJECTIVE", necessity="implicit", priority="must_have"),
                   rubric("R2", "0.3", type="subjective", necessity="EXPLICIT", priority="Nice to Have"),
                   rubric("R3", 1, priority="MUST HAVE"), rubric("R4", 0.2, priority="nice-to-have")],
             language="English", domain="Technical tools and developer resources", as_of="2026-07-20"),
        task("b", [rubric("R1", 1.0)], language="中文", domain="Company & competitor"),
    ]
    tasks = load_tasks(write_jsonl(tmp_path / "t.jsonl", rows))
    a, b = tasks
    assert [r.priority for r in a.rubrics] == ["Must Have", "Nice to Have", "Must Have", "Nice to Have"]
    assert [r.type for r in a.rubrics[:2]] == ["Objective", "Subjective"]
    assert [r.necessity for r in a.rubrics[:2]] == ["Implicit", "Explicit"]
    assert a.rubrics[1].weight == 0.3 and a.language == "en" and a.domain is Domain.technical
    assert str(a.as_of) == "2026-07-20"
    assert b.language == "zh" and b.domain is Domain.company
    assert summarize(tasks).startswith("2 tasks, 5 rubrics; languages: en 1, zh 1")


def test_rubric_ids_default_to_paper_numbering(tmp_path):
    r = [rubric("x", 0.5), rubric("y", 0.5)]
    for x in r:
        del x["id"]
    (t,) = load_tasks(write_jsonl(tmp_path / "t.jsonl", [task("a", r)]))
    assert [x.id for x in t.rubrics] == ["R1", "R2"]


SPELLINGS = {"comp.": Domain.company, "ACADEMIC": Domain.academic, "Financial markets": Domain.financial,
             "policy, regulation and government data": Domain.policy, "Industry news & trends": Domain.industry,
             "everyday facts": Domain.everyday, "tech.": Domain.technical}


@pytest.mark.parametrize("domain", list(SPELLINGS))
def test_domain_spellings(domain):
    assert parse_domain(domain) is SPELLINGS[domain]


BAD = [
    # (rows or raw line 2, expected line, field, message fragment)
    ("malformed", 2, None, "malformed JSON"),
    ("domain", 2, "domain", "unknown domain 'gardening'"),
    ("language", 2, "language", "unknown language 'fr'"),
    ("weight_hi", 2, "rubrics[1].weight", "outside [0, 1]"),
    ("weight_neg", 2, "rubrics[0].weight", "outside [0, 1]"),
    ("weight_nan", 2, "rubrics[0].weight", "not a number"),
    ("dup_task", 2, "id", "duplicate task id 'a' (first on line 1)"),
    ("dup_rubric", 2, "rubrics[1].id", "duplicate rubric id 'R1'"),
    ("zero_weight", 2, "rubrics", "zero total rubric weight"),
    ("priority", 2, "rubrics[0].priority", "unknown value 'Critical'"),
    ("no_question", 2, "question", "Field required"),
    ("bad_date", 2, "as_of", "date"),
    ("no_rubrics", 2, "rubrics", "non-empty list"),
    ("not_object", 2, None, "expected a JSON object"),
    ("weight_true", 2, "rubrics[0].weight", "expected a number, got true"),
    ("weight_false", 2, "rubrics[0].weight", "expected a number, got false"),
    ("surrogate_question", 2, "question", "lone surrogate \\ud800"),
    ("surrogate_id", 2, "id", "lone surrogate \\udfff"),
    ("surrogate_criterion", 2, "rubrics[0].criterion", "lone surrogate \\ud800"),
    ("surrogate_raw_bytes", 2, "question", "lone surrogate \\ud800"),
    ("deep_nesting", 2, None, "nested deeper than"),
    ("deep_field", 2, "extra", "nested deeper than"),
    # what `validate` refuses, and the importers with it
    ("cr_in_id", 2, "id", "control character U+000D at character 0"),
    ("nul_in_id", 2, "id", "control character U+0000"),
    ("c1_in_rubric_id", 2, "rubrics[0].id", "control character U+0085"),
    ("del_in_rubric_id", 2, "rubrics[0].id", "control character U+007F"),
    ("empty_question", 2, "question", "empty"),
    ("invisible_question", 2, "question", "empty"),
    ("invisible_criterion", 2, "rubrics[0].criterion", "empty"),
    ("blank_id", 2, "id", "empty"),
]
_B = '{"id": "b", "language": "en", "domain": "company", '
_R = '"rubrics": [{"id": "R1", "criterion": "%s", "type": "Objective", "necessity": "Explicit", "priority": "Must Have", "weight": 0.5}]'
RAW = {
    "malformed": '{"id": "b", "rubrics": [',
    "not_object": "[1, 2]",
    "surrogate_question": _B + '"question": "Why\\ud800?", ' + _R % "c" + "}",
    "surrogate_id": '{"id": "b\\udfff", "language": "en", "domain": "company", "question": "q", ' + _R % "c" + "}",
    "surrogate_criterion": _B + '"question": "q", ' + _R % "c\\ud800" + "}",
    "deep_nesting": "[" * 100_000 + "]" * 100_000,
    "deep_field": _B + '"question": "q", "extra": ' + "[" * 500 + "]" * 500 + ", " + _R % "c" + "}",
}


@pytest.mark.parametrize("case,line,field,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_file_line_field(tmp_path, case, line, field, fragment):
    good = task("a", [rubric("R1", 0.5)])
    second = {
        "domain": task("b", [rubric("R1", 0.5)], domain="gardening"),
        "language": task("b", [rubric("R1", 0.5)], language="fr"),
        "weight_hi": task("b", [rubric("R1", 0.5), rubric("R2", 1.5)]),
        "weight_neg": task("b", [rubric("R1", -0.1)]),
        "weight_nan": task("b", [rubric("R1", "heavy")]),
        "weight_true": task("b", [rubric("R1", True)]),
        "weight_false": task("b", [rubric("R1", False)]),
        "dup_task": task("a", [rubric("R1", 0.5)]),
        "dup_rubric": task("b", [rubric("R1", 0.5), rubric("R1", 0.2)]),
        "zero_weight": task("b", [rubric("R1", 0.0), rubric("R2", 0.0)]),
        "priority": task("b", [rubric("R1", 0.5, priority="Critical")]),
        "no_question": {k: v for k, v in task("b", [rubric("R1", 0.5)]).items() if k != "question"},
        "bad_date": task("b", [rubric("R1", 0.5)], as_of="last tuesday"),
        "no_rubrics": task("b", []),
        "cr_in_id": task("\r=1+1", [rubric("R1", 0.5)]),
        "nul_in_id": task("b\x00", [rubric("R1", 0.5)]),
        "c1_in_rubric_id": task("b", [rubric("R\x851", 0.5)]),
        "del_in_rubric_id": task("b", [rubric("R1\x7f", 0.5)]),
        "empty_question": task("b", [rubric("R1", 0.5)], question=""),
        "invisible_question": task("b", [rubric("R1", 0.5)], question="\u200b\u200d\ufeff "),
        "invisible_criterion": task("b", [rubric("R1", 0.5, criterion="\u2060\u200b")]),
        "blank_id": task(" ", [rubric("R1", 0.5)]),
    }.get(case, good)
    raw = {2: RAW[case]} if case in RAW else None
    path = write_jsonl(tmp_path / "tasks.jsonl", [good, second], raw)
    if case == "surrogate_raw_bytes":  # a lone surrogate written as raw (CESU-8) bytes: json.loads passes it through
        cesu = (_B + '"question": "Why?", ' + _R % "c" + "}").encode().replace(b"Why?", b"Why\xed\xa0\x80")
        path.write_bytes(path.read_bytes().split(b"\n")[0] + b"\n" + cesu + b"\n")
    with pytest.raises(InputError) as e:
        load_tasks(path)
    assert e.value.line == line and e.value.field == field
    assert fragment in str(e.value)
    assert str(e.value).startswith(f"{path}:{line}: ")


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_tasks(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no tasks"):
        load_tasks(tmp_path / "empty.jsonl")


def test_chosen_tasks_keep_file_order_and_their_records_and_refuse_an_unknown_id(tmp_path):
    path = write_jsonl(tmp_path / "tasks.jsonl", [task(t, [rubric("R1", 1.0)]) for t in ("a", "b", "c")])
    tasks = load_tasks(path)
    reports = [Report(task_id=t, agent="x", text="r") for t in ("c", "a", "b")]
    kept, mine = chosen_tasks(tasks, {"c", "a"}, path, reports)
    assert [t.id for t in kept] == ["a", "c"] and [r.task_id for r in mine] == ["c", "a"]
    assert chosen_tasks(tasks, None, path, reports) == (tasks, reports)
    with pytest.raises(LifesearchError, match=rf"--task-ids: 2 id\(s\) not in the tasks file {path}: A, d$"):
        chosen_tasks(tasks, {"a", "A", "d"}, path)


def test_records_of_tasks_the_tasks_file_lacks_name_the_file(tmp_path):
    path = write_jsonl(tmp_path / "tasks.jsonl", [task("a", [rubric("R1", 1.0)])])
    tasks = load_tasks(path)
    check_known_tasks(tasks, ["a", "a"], path)
    with pytest.raises(LifesearchError) as e:
        check_known_tasks(tasks, ["a", "b", "b", *[f"z{i}" for i in range(6)]], path, "label")
    assert str(e.value).startswith(f"8 label(s) are for 7 task(s) not in the tasks file {path}: b, z0, z1, z2, z3, … (2 more)")
