"""`lifesearch import drb`: weights, phrasing, domains, bad input, writing, and the exact round trip."""

from __future__ import annotations

import itertools
import json
import os
from fractions import Fraction
from pathlib import Path

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.importers import drb
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Domain, Judgment
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from serving.config import model_config
from tests.helpers import drb_roundtrip as roundtrip
from tests.helpers.inputs import ROOT, write_jsonl

DRB_DIR = Path(os.environ.get("LIFESEARCH_DRB_DIR") or ROOT.parent / "shared/external/deep_research_bench")


def crit(name: str, weight: float, **extra) -> dict:
    return {"criterion": name, "explanation": f"Evaluates whether the report covers {name}.", "weight": weight, **extra}


def drb_files(tmp_path: Path, *, queries=None, criteria=None, reports=None) -> tuple[Path, Path, Path]:
    """Two small DRB tasks (one en, one zh) and a report for each; pass lists to replace a file's rows."""
    q = [{"id": 1, "topic": "Finance & Business", "language": "en", "prompt": "Compare two banks."},
         {"id": 2, "topic": "Health", "language": "zh", "prompt": "比较两种疗法。"}]
    c = [{"id": 1, "prompt": "Compare two banks.",
          "dimension_weight": {"readability": 0.1, "insight": 0.3, "comprehensiveness": 0.4, "instruction_following": 0.2},
          "criterions": {"comprehensiveness": [crit("coverage", 1.0)], "insight": [crit("depth", 1.0, comment="note")],
                         "instruction_following": [crit("scope", 1.0)], "readability": [crit("clarity", 1.0)]}},
         {"id": 2, "prompt": "比较两种疗法。", "dimension_weight": {"insight": 0.5, "comprehensiveness": 0.5},
          "criterions": {"comprehensiveness": [crit("覆盖", 1.0)],
                         "insight": [crit("深度", 0.55), crit("分析", 0.4), crit("细节", 0.05)]}}]
    r = [{"id": 1, "prompt": "Compare two banks.", "article": "Bank A vs bank B."},
         {"id": 2, "prompt": "比较两种疗法。", "article": "疗法甲与疗法乙。"}]
    return (write_jsonl(tmp_path / "query.jsonl", q if queries is None else queries),
            write_jsonl(tmp_path / "criteria.jsonl", c if criteria is None else criteria),
            write_jsonl(tmp_path / "reports-agent-x.jsonl", r if reports is None else reports))


# -- weights -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("e", "e_max", "w"), [
    (0.2, 0.2, 1.0),      # the task's largest criterion
    (0.11, 0.2, 0.6),     # ratio 0.55 (0.5499999999999999 in floats) rounds half up
    (0.05, 0.2, 0.3),     # ratio 0.25: half up, not Python's half-even 0.2
    (0.3, 0.4, 0.8),      # ratio 0.75 (0.7499999999999999 in floats)
    (0.0096, 0.2, 0.1),   # ratio 0.048 rounds to 0.0: floored
    (0.0, 0.2, 0.1),      # a zero DRB weight is kept at the floor, not dropped
    (0.07, 0.2, 0.4),     # ratio 0.35
    (0.139, 0.2, 0.7),    # ratio 0.695
])
def test_weight_mapping(e, e_max, w):
    assert drb.drb_weight(e, e_max) == w


def test_weight_mapping_is_monotone():
    es = [i / 1000 for i in range(0, 1001)]
    ws = [drb.drb_weight(e, 1.0) for e in es]
    assert ws == sorted(ws)
    assert set(ws) == {round(0.1 * k, 1) for k in range(1, 11)}
    assert ws[149] == 0.1 and ws[150] == 0.2 and ws[949] == 0.9 and ws[950] == 1.0


def brute_force_deviation(w, e) -> float:
    sw, se = sum(w), sum(e)
    return max(abs(sum(y * x for y, x in zip(ys, w)) / sw - sum(y * x for y, x in zip(ys, e)) / se)
               for ys in itertools.product((0, 1), repeat=len(w)))


def test_deviation_by_hand():
    # w = [1, 1] vs e = [0.75, 0.25]: passing only the second criterion scores 0.5 instead of 0.25
    assert drb.rounding_deviation([1.0, 1.0], [0.75, 0.25]) == pytest.approx(0.25)
    # e = [0.5, 0.275, 0.2, 0.025] → w = [1, 0.6, 0.4, 0.1]; w/Σw − e/Σe = [−1/42, 9/840, −1/105, 19/840]
    e, w = [0.5, 0.275, 0.2, 0.025], [1.0, 0.6, 0.4, 0.1]
    assert [drb.drb_weight(x, 0.5) for x in e] == w
    assert drb.rounding_deviation(w, e) == pytest.approx(float(Fraction(28, 840)), abs=1e-12)  # 1/30
    assert brute_force_deviation(w, e) == pytest.approx(1 / 30, abs=1e-12)
    assert drb.rounding_deviation([1.0, 0.5], [0.5, 0.25]) == 0.0  # exact ratios cost nothing


def test_convert_task_fields_and_weights(tmp_path):
    result = drb.import_drb(*drb_files(tmp_path)[:2])
    en, zh = result.tasks
    assert [(r.id, r.weight, r.type, r.necessity, r.priority) for r in en.rubrics] == [
        ("R1", 1.0, "Objective", "Implicit", "Must Have"),     # comprehensiveness e=0.4
        ("R2", 0.8, "Subjective", "Implicit", "Must Have"),    # insight e=0.3 → 0.75 → 0.8
        ("R3", 0.5, "Objective", "Explicit", "Must Have"),     # instruction_following e=0.2
        ("R4", 0.3, "Subjective", "Implicit", "Nice to Have"),  # readability e=0.1 → 0.25 → 0.3
    ]
    assert [r.weight for r in zh.rubrics] == [1.0, 0.6, 0.4, 0.1]
    assert [r.priority for r in zh.rubrics] == ["Must Have", "Must Have", "Nice to Have", "Nice to Have"]
    # en: w/Σw − e = [−0.04, 0.02, −0.02, 0.04]/2.6 → 0.06/2.6; zh: 1/30 (see test_deviation_by_hand)
    assert result.deviations == pytest.approx({"drb-1": 0.06 / 2.6, "drb-2": 1 / 30}, abs=1e-12)
    assert (en.id, en.language, en.domain, en.question) == ("drb-1", "en", Domain.financial, "Compare two banks.")
    assert (zh.id, zh.language, zh.domain) == ("drb-2", "zh", Domain.academic)


# -- phrasing ----------------------------------------------------------------------------------

def test_phrasing_en_and_zh():
    assert drb.phrase("Coverage of the market.", " Evaluates whether the report names the top 3 firms. ", "en") == (
        "Requirement: Coverage of the market. Pass only if the answer to this check is yes: "
        "Evaluates whether the report names the top 3 firms.")
    assert drb.phrase("数据来源与时效性说明", "评估报告是否指明了关键数据的来源。", "zh") == (
        "要求：数据来源与时效性说明。仅当以下检查的答案为“是”时通过：评估报告是否指明了关键数据的来源。")
    assert drb.phrase("覆盖度。", "评估{是否}全面。", "zh") == "要求：覆盖度。仅当以下检查的答案为“是”时通过：评估{是否}全面。"


def test_rubric_text_in_tasks(tmp_path):
    en, zh = drb.import_drb(*drb_files(tmp_path)[:2]).tasks
    assert en.rubrics[0].criterion == ("Requirement: coverage. Pass only if the answer to this check is yes: "
                                       "Evaluates whether the report covers coverage.")
    assert zh.rubrics[1].criterion == "要求：深度。仅当以下检查的答案为“是”时通过：Evaluates whether the report covers 深度."


# -- domains -----------------------------------------------------------------------------------

def test_default_domain_map():
    m = drb.DEFAULT_DOMAIN_MAP
    assert len(m) == 22
    assert m["Finance & Business"] == Domain.financial and m["Crime & Law"] == Domain.policy
    assert m["Software Development"] == m["Hardware"] == Domain.technical
    assert m["Industrial"] == m["Transportation"] == Domain.industry
    assert m["Travel"] == m["Games"] == Domain.everyday and m["Health"] == m["Religion"] == Domain.academic


def test_domain_map_override_yaml_and_json(tmp_path):
    y = tmp_path / "map.yaml"
    y.write_text("Health: Policy and government data\nPets: everyday\n")
    m = drb.load_domain_map(y)
    assert m["Health"] == Domain.policy and m["Pets"] == Domain.everyday and m["History"] == Domain.academic
    j = tmp_path / "map.json"
    j.write_text(json.dumps({"Health": "Fin."}))
    assert drb.load_domain_map(j)["Health"] == Domain.financial
    bad = tmp_path / "bad.yaml"
    bad.write_text("Health: astrology\n")
    with pytest.raises(InputError) as exc:
        drb.load_domain_map(bad)
    assert (exc.value.path, exc.value.field) == (str(bad), "Health") and "unknown domain 'astrology'" in exc.value.message


def test_unknown_topic_names_topics_and_flag(tmp_path):
    q = [{"id": 1, "topic": "Pets", "language": "en", "prompt": "Compare two banks."},
         {"id": 2, "topic": "Gardening", "language": "zh", "prompt": "比较两种疗法。"}]
    qp, cp, _ = drb_files(tmp_path, queries=q)
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp)
    assert (exc.value.line, exc.value.field) == (1, "topic")
    assert "'Pets', 'Gardening'" in exc.value.message and "--domain-map FILE" in exc.value.message
    m = tmp_path / "map.yaml"
    m.write_text("Pets: everyday\nGardening: everyday\n")
    assert [t.domain for t in drb.import_drb(qp, cp, domain_map=m).tasks] == [Domain.everyday] * 2


# -- bad input ---------------------------------------------------------------------------------

def test_criteria_prompt_mismatch(tmp_path):
    qp, cp, _ = drb_files(tmp_path)
    rows = [json.loads(line) for line in cp.read_text().splitlines()]
    rows[1]["prompt"] = "something else"
    write_jsonl(cp, rows)
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp)
    assert str(exc.value) == f"{cp}:2: prompt: differs from the prompt of id 2 at {qp}:2"


def test_ids_missing_on_either_side(tmp_path):
    qp, cp, _ = drb_files(tmp_path)
    queries = [json.loads(line) for line in qp.read_text().splitlines()]
    write_jsonl(qp, queries[:1])
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp)
    assert str(exc.value) == f"{cp}:2: id: id 2 is not in {qp}"
    write_jsonl(qp, [*queries, {"id": 3, "topic": "Travel", "language": "en", "prompt": "Where?"}])
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp)
    assert str(exc.value) == f"{qp}:3: id: id 3 has no record in {cp}"


@pytest.mark.parametrize(("change", "field", "msg"), [
    (lambda c: c["criterions"].update(style=[crit("x", 1.0)]), "criterions.style", "unknown DRB dimension"),
    (lambda c: c["dimension_weight"].pop("readability"), "dimension_weight", "no weight for dimension 'readability'"),
    (lambda c: c["criterions"]["insight"][0].update(weight="0.5"), "criterions.insight[0].weight", "finite number"),
    (lambda c: c.update(extra=1), "extra", "Extra inputs are not permitted"),
    (lambda c: c["criterions"]["insight"][0].update(criterion="\u200b \ufeff"), "criterions.insight[0].criterion",
     "empty criterion"),
])
def test_bad_criteria_records(tmp_path, change, field, msg):
    qp, cp, _ = drb_files(tmp_path)
    rows = [json.loads(line) for line in cp.read_text().splitlines()]
    change(rows[0])
    write_jsonl(cp, rows)
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp)
    assert (exc.value.line, exc.value.field) == (1, field) and msg in exc.value.message


@pytest.mark.parametrize(("prompt", "qid", "field", "msg"), [
    ("", 1, "prompt", "empty question"),
    ("\u200b\u200d", 1, "prompt", "empty question"),
    ("Compare two banks.", "1\x00", "id", "control character U+0000"),
    ("Compare two banks.", "1\r=1+1", "id", "control character U+000D"),
])
def test_what_validate_refuses_is_refused_at_import(tmp_path, prompt, qid, field, msg):
    """An empty or invisible question and control characters in an id are refused where they stand
    (file:line: field), as `lifesearch validate` refuses them in a tasks file."""
    q = [{"id": qid, "topic": "Finance & Business", "language": "en", "prompt": prompt}]
    c = [{"id": qid, "prompt": prompt, "dimension_weight": {"insight": 1.0}, "criterions": {"insight": [crit("depth", 1.0)]}}]
    qp, cp, _ = drb_files(tmp_path, queries=q, criteria=c)
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp)
    assert (exc.value.path, exc.value.line, exc.value.field) == (str(qp), 1, field) and msg in exc.value.message


@pytest.mark.parametrize("agent", [" ", "\u200b", "a\x00b", "x\x85"])
def test_an_empty_or_control_agent_name_is_refused(tmp_path, agent):
    qp, cp, rp = drb_files(tmp_path)
    with pytest.raises(InputError, match="agent .*: (empty|control character)"):
        drb.import_drb(qp, cp, rp, agent=agent)


def test_bad_reports(tmp_path):
    qp, cp, rp = drb_files(tmp_path)
    write_jsonl(rp, [{"id": 2, "prompt": "比较两种疗法。", "article": "a"}, {"id": 9, "prompt": "p", "article": "b"}])
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp, rp)
    assert str(exc.value) == f"{rp}:2: id: report for id 9, which is not in the task files"
    write_jsonl(rp, [{"id": 1, "prompt": "Compare two firms.", "article": "a"}])
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp, rp)
    assert (exc.value.line, exc.value.field) == (1, "prompt")
    write_jsonl(rp, [{"id": 1, "prompt": "Compare two banks.", "article": "a"}] * 2)
    with pytest.raises(InputError) as exc:
        drb.import_drb(qp, cp, rp)
    assert str(exc.value) == f"{rp}:2: id: duplicate id '1' (first on line 1)"


# -- writing, the CLI and validate -------------------------------------------------------------

def test_cli_writes_a_valid_directory_and_refuses_to_overwrite(tmp_path, capsys):
    qp, cp, rp = drb_files(tmp_path)
    out = tmp_path / "out"
    argv = ["import", "drb", "--queries", str(qp), "--criteria", str(cp), "--reports", str(rp), "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "imported 2 tasks (en 1, zh 1), 8 rubrics, 2 reports of agent agent-x" in printed
    assert f"max {1 / 30:.4f} (drb-2), mean {(1 / 30 + 0.06 / 2.6) / 2:.4f}" in printed
    assert sorted(p.name for p in out.iterdir()) == ["drb_source.jsonl", "import.json", "reports.jsonl", "tasks.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp dir left
    info = json.loads((out / "import.json").read_text())
    assert info["counts"]["weights"] == {"0.1": 1, "0.3": 1, "0.4": 1, "0.5": 1, "0.6": 1, "0.8": 1, "1.0": 2}
    assert info["rounding_deviation"]["max"] == round(1 / 30, 6) and info["counts"]["criterion_notes_kept"] == {"comment": 1}
    assert main(["validate", str(out / "tasks.jsonl")]) == 0
    assert "2 tasks, 8 rubrics; languages: en 1, zh 1; domains: academic 1, financial 1" in capsys.readouterr().out
    assert main(argv) == 2
    assert "not empty; pass --force" in capsys.readouterr().err
    assert main([*argv, "--agent", "renamed", "--force"]) == 0
    assert json.loads((out / "reports.jsonl").read_text().splitlines()[0])["agent"] == "renamed"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_force_replaces_only_an_earlier_import(tmp_path, capsys):
    qp, cp, rp = drb_files(tmp_path)
    foreign = tmp_path / "runs"
    (foreign / "j1").mkdir(parents=True)
    (foreign / "j1" / "judgments.jsonl").write_text("{}\n")
    argv = ["import", "drb", "--queries", str(qp), "--criteria", str(cp), "--out", str(foreign), "--force"]
    assert main(argv) == 2
    assert "not an earlier `lifesearch import drb` output" in capsys.readouterr().err
    assert (foreign / "j1" / "judgments.jsonl").read_text() == "{}\n"  # untouched


def test_round_trip_on_small_files(tmp_path):
    qp, cp, rp = drb_files(tmp_path)
    out = drb.write_import(drb.import_drb(qp, cp, rp), tmp_path / "out")
    assert [t.id for t in load_tasks(out / "tasks.jsonl")] == ["drb-1", "drb-2"]
    for got, path in ((roundtrip.reconstruct_criteria(out), cp), (roundtrip.reconstruct_queries(out), qp),
                      (roundtrip.reconstruct_reports(out), rp)):
        assert [json.dumps(r, ensure_ascii=False) for r in got] == path.read_text(encoding="utf-8").splitlines()


def test_agent_name_from_file_name():
    assert drb.agent_from_path("/x/reports-claude-3-7-sonnet.jsonl") == "claude-3-7-sonnet"
    assert drb.agent_from_path("my_agent.jsonl") == "my_agent"
    with pytest.raises(LifesearchError, match="--agent"):
        drb.agent_from_path("reports-.jsonl")


# -- the real DeepResearch Bench release -------------------------------------------------------

@pytest.fixture(scope="module")
def real_import(tmp_path_factory) -> Path:
    if not (DRB_DIR / "criteria.jsonl").is_file():
        pytest.skip(f"DeepResearch Bench data not found at {DRB_DIR} (set LIFESEARCH_DRB_DIR)")
    out = tmp_path_factory.mktemp("drb") / "out"
    assert main(["import", "drb", "--queries", str(DRB_DIR / "query.jsonl"), "--criteria", str(DRB_DIR / "criteria.jsonl"),
                 "--reports", str(DRB_DIR / "reports-claude-3-7-sonnet.jsonl"), "--out", str(out)]) == 0
    return out


def raw_lines(name: str) -> list[str]:
    return (DRB_DIR / name).read_text(encoding="utf-8").splitlines()


def test_real_round_trip_is_exact(real_import):
    criteria = roundtrip.reconstruct_criteria(real_import)
    assert len(criteria) == 100
    assert criteria == [json.loads(line) for line in raw_lines("criteria.jsonl")]
    # byte for byte too: key order, float spellings and the annotators' extra notes all come back
    assert [json.dumps(r, ensure_ascii=False) for r in criteria] == raw_lines("criteria.jsonl")
    assert [json.dumps(r, ensure_ascii=False) for r in roundtrip.reconstruct_queries(real_import)] == raw_lines("query.jsonl")
    reports = roundtrip.reconstruct_reports(real_import)
    originals = [json.loads(line) for line in raw_lines("reports-claude-3-7-sonnet.jsonl")]
    assert len(reports) == 100 and [r["article"] for r in reports] == [o["article"] for o in originals]
    assert reports == originals


def test_real_import_is_valid_and_consistent(real_import, capsys):
    assert main(["validate", str(real_import / "tasks.jsonl")]) == 0
    assert "100 tasks, 2517 rubrics; languages: en 50, zh 50" in capsys.readouterr().out
    tasks = load_tasks(real_import / "tasks.jsonl")
    info = json.loads((real_import / "import.json").read_text())
    assert info["counts"]["tasks"] == 100 and info["counts"]["reports"] == 100
    assert all(max(r.weight for r in t.rubrics) == 1.0 and min(r.weight for r in t.rubrics) >= 0.1 for t in tasks)
    sources = {s.task_id: s for _, s in drb.read_drb(real_import / "drb_source.jsonl", drb.DrbSource)}
    devs = []
    for t in tasks:
        s = sources[t.id]
        e = [s.dimension_weight[s.rubrics[r.id].dimension] * s.rubrics[r.id].weight for r in t.rubrics]
        assert sum(e) == pytest.approx(1.0)
        devs.append(drb.rounding_deviation([r.weight for r in t.rubrics], e))
    assert info["rounding_deviation"]["max"] == round(max(devs), 6)
    assert info["rounding_deviation"]["mean"] == round(sum(devs) / 100, 6)


@pytest.mark.slow
def test_tiny_judge_and_score_on_the_real_import(real_import, tmp_path, capsys):
    """`judge --limit 1` on a real DRB report completes on CPU, a rerun has nothing left, and
    `score --limit 1` scores exactly the judged task."""
    run = tmp_path / "judge"
    argv = ["judge", "--tasks", str(real_import / "tasks.jsonl"), "--reports", str(real_import / "reports.jsonl"),
            "--model", "tiny-llama", "--out", str(run), "--limit", "1", "--quiet"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in (run / "judgments.jsonl").read_text().splitlines()]
    first = load_tasks(real_import / "tasks.jsonl")[0]
    assert {r["task_id"] for r in rows} == {first.id} and sorted(r["rubric_id"] for r in rows) == sorted(
        r.id for r in first.rubrics)
    assert all(0.0 <= r["p_true"] <= 1.0 for r in rows)
    assert main(argv) == 0
    assert "0 decisions" in capsys.readouterr().out
    assert len((run / "judgments.jsonl").read_text().splitlines()) == len(rows)
    assert main(["score", "--tasks", str(real_import / "tasks.jsonl"), "--judgments", str(run / "judgments.jsonl"),
                 "--limit", "1", "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)["agents"]["claude-3-7-sonnet"]
    passed = sum(r.weight for r in first.rubrics if next(x for x in rows if x["rubric_id"] == r.id)["satisfied"])
    assert scored["overall_mean"] == pytest.approx(passed / first.total_weight)


JUDGE = JudgeConfig(model=model_config(model="smollm2-135m")).id  # smollm2-135m/choice/<hash>
TINY_JUDGE = JudgeConfig(model=model_config(model="tiny-llama")).id


# The task whose report is shortest in SmolLM2's tokens (2.2k; the Chinese reports run past its
# 8k context in this tokenizer). Only its Must Have rubrics (7 of 28) are judged: each rubric
# costs a ~330-token suffix, which dominates on CPU.
DRB_TASKS = ("drb-56",)


def _must_have(line: str) -> str:
    task = json.loads(line)
    task["rubrics"] = [r for r in task["rubrics"] if r["priority"] == "Must Have"]
    return json.dumps(task, ensure_ascii=False)


@pytest.fixture(scope="module")
def drb_task(smollm2_path, tmp_path_factory) -> Path:
    if not (DRB_DIR / "criteria.jsonl").is_file():
        pytest.skip(f"DeepResearch Bench data not found at {DRB_DIR} (set LIFESEARCH_DRB_DIR)")
    out = tmp_path_factory.mktemp("drb-real")
    assert main(["import", "drb", "--queries", str(DRB_DIR / "query.jsonl"), "--criteria", str(DRB_DIR / "criteria.jsonl"),
                 "--reports", str(DRB_DIR / "reports-claude-3-7-sonnet.jsonl"), "--out", str(out / "import")]) == 0
    for name in ("tasks.jsonl", "reports.jsonl"):
        lines = (out / "import" / name).read_text(encoding="utf-8").splitlines()
        keep = [x for x in lines if json.loads(x).get("task_id" if name == "reports.jsonl" else "id") in DRB_TASKS]
        if name == "tasks.jsonl":
            keep = [_must_have(x) for x in keep]
        (out / name).write_text("\n".join(keep) + "\n", encoding="utf-8")
    return out


@pytest.mark.slow
def test_judge_score_agree_on_a_drb_task(drb_task, capsys):
    tasks = load_tasks(drb_task / "tasks.jsonl")
    assert sorted(t.id for t in tasks) == sorted(DRB_TASKS) and [len(t.rubrics) for t in tasks] == [7]
    base = ["judge", "--tasks", str(drb_task / "tasks.jsonl"), "--reports", str(drb_task / "reports.jsonl"), "--quiet"]
    assert main([*base, "--model", "smollm2-135m", "--out", str(drb_task / "real")]) == 0
    # DRB publishes no per-criterion labels: the reference is a random-weight judge, a chance baseline.
    assert main([*base, "--model", "tiny-llama", "--out", str(drb_task / "tiny")]) == 0
    capsys.readouterr()
    judgments = read_records(drb_task / "real" / "judgments.jsonl", Judgment)
    assert sorted((j.task_id, j.rubric_id) for j in judgments) == sorted(
        (t.id, r.id) for t in tasks for r in t.rubrics if r.weight > 0)
    assert all(j.judge == JUDGE and 0.0 < j.p_true < 1.0 for j in judgments)

    assert main(["score", "--tasks", str(drb_task / "tasks.jsonl"), "--judgments", str(drb_task / "real" / "judgments.jsonl"),
                 "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)["agents"]["claude-3-7-sonnet"]
    by = {(j.task_id, j.rubric_id): j.satisfied for j in judgments}
    expect = [sum(r.weight for r in t.rubrics if by.get((t.id, r.id))) / t.total_weight for t in tasks]
    assert scored["overall_mean"] == pytest.approx(sum(expect) / len(expect))

    assert main(["agree", "--tasks", str(drb_task / "tasks.jsonl"), "--judgments", str(drb_task / "real" / "judgments.jsonl"),
                 "--labels-from-judgments", str(drb_task / "tiny" / "judgments.jsonl"), "--label-judge", TINY_JUDGE,
                 "--json"]) == 0
    agree = json.loads(capsys.readouterr().out)
    m = agree["judges"][JUDGE]
    assert m["n"] == len(judgments) and agree["n_labels"] == len(judgments)
    with capsys.disabled():
        ps = [j.p_true for j in judgments]
        print(f"\nDRB {', '.join(DRB_TASKS)}: {JUDGE} score {100 * scored['overall_mean']:.1f}%, p_true "
              f"{min(ps):.3f}..{max(ps):.3f}; agreement with a random judge (tiny-llama): accuracy "
              f"{m['accuracy_mean']}, kappa {m['kappa']}, AUROC {m.get('auroc')}, n {m['n']}")
