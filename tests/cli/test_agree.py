"""`lifesearch agree`: its table, JSON and CSV, label sources, and errors, on the agree fixtures."""

from __future__ import annotations

import argparse
import json

import pytest

from lifesearch_local.errors import LifesearchError
from tests.helpers.cli import cli_out, run_cli
from tests.helpers.inputs import AGREE, J, judge_inputs, write_jsonl


def test_agree_json_never_writes_bare_nan(tmp_path, capsys):
    tasks, _ = judge_inputs(tmp_path, 1)
    labels = write_jsonl(tmp_path / "labels.jsonl", [{**{k: J[k] for k in ("task_id", "agent", "run")}, "rubric_id": r,
                                                      "satisfied": True} for r in ("R0", "R1")])
    # a NaN p_true never gets in: refused at load, naming the line
    judgments = tmp_path / "judgments.jsonl"
    judgments.write_text(json.dumps({**J, "rubric_id": "R0"}) + "\n"
                         + json.dumps({**J, "rubric_id": "R1"}).replace('"p_true": 0.9', '"p_true": NaN') + "\n")
    code, out, err = run_cli(["agree", "--tasks", str(tasks), "--judgments", str(judgments), "--labels", str(labels), "--json"],
                             capsys)
    assert code == 2 and f"{judgments}:2:" in err and "Traceback" not in err, err
    # what is undefined here (kappa and AUROC with one class of labels, and every resample of them) is null
    write_jsonl(judgments, [{**J, "rubric_id": r} for r in ("R0", "R1")])
    code, out, err = run_cli(["agree", "--tasks", str(tasks), "--judgments", str(judgments), "--labels", str(labels), "--json"],
                             capsys)
    assert code == 0, err
    judge = json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c} in --json output"))["judges"]["j"]
    assert judge["kappa"] is judge["auroc"] is judge["ci95"]["kappa"] is judge["ci95"]["auroc"] is None


def cli(*argv: str) -> int:
    """Run `lifesearch agree` through its own parser, with main()'s error handling."""
    from lifesearch_local.cli import agree

    p = argparse.ArgumentParser(prog="lifesearch")
    agree.register(p.add_subparsers())
    args = p.parse_args(list(argv))
    try:
        return args.func(args)
    except LifesearchError as e:
        print(f"error: {e}")
        return 2


def test_commands_registered():
    from lifesearch_local.cli import COMMANDS, agree, report

    assert COMMANDS["agree"] is agree.register
    assert COMMANDS["report"] is report.register


def test_cli_json(agree_records, capsys):
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl")]
    assert cli(*base, "--labels", str(AGREE / "labels.jsonl"), "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_labels"] == 15 and list(out["judges"]) == ["gen-b", "choice-a", "const"]
    assert out["label_source"] == "human"
    keys = {"accuracy_mean", "self_consistency", "majority_accuracy", "kappa", "auroc", "ece", "best_threshold",
            "best_threshold_accuracy", "n", "n_runs", "ungraded", "by", "rank_spearman", "rank_kendall", "rank_agents"}  # fmt: skip
    for m in out["judges"].values():
        assert keys <= set(m)
        assert set(m["by"]) >= {"language", "type", "necessity", "priority"}
    assert out["judges"]["choice-a"]["accuracy_mean"] == pytest.approx(41 / 45)
    assert out["judges"]["choice-a"]["by"]["language"]["en"]["n"] == 9


def test_cli_table(capsys):
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl")]
    assert cli(*base, "--labels", str(AGREE / "labels.jsonl")) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows[:3]] == ["gen-b", "choice-a", "const"]
    assert "91.11" in rows[1] and "80.0" in rows[1] and "93.33" in rows[1] and "0.824" in rows[1]
    assert "Mean accuracy (%) by language" in out and "by priority" in out


def test_cli_label_source(capsys):
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl")]
    assert cli(*base, "--labels", str(AGREE / "labels.jsonl"), "--label-source", "human", "--json") == 0
    assert json.loads(capsys.readouterr().out)["n_labels"] == 15
    assert cli(*base, "--labels", str(AGREE / "labels.jsonl"), "--label-source", "gemini") == 2
    assert "no labels with source 'gemini'" in capsys.readouterr().out


def test_cli_labels_from_judgments(capsys):
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl")]
    ref = str(AGREE / "ref_judgments.jsonl")
    assert cli(*base, "--labels-from-judgments", ref, "--label-judge", "gemini-3.1-pro", "--json") == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert "1 ungraded judgment(s) skipped" in cap.err
    assert out["label_source"] == "gemini-3.1-pro"
    assert {m["n"] for m in out["judges"].values()} == {14}
    # gamma's t2 r2 is unlabelled: scored on labelled rubrics only, the constant judge ties every agent
    assert out["judges"]["const"]["rank_spearman"] is None
    assert cli(*base, "--labels-from-judgments", ref) == 2
    assert "needs --label-judge" in capsys.readouterr().out


def test_cli_reference_judge_excluded(tmp_path, capsys):
    both = tmp_path / "both.jsonl"
    both.write_text((AGREE / "judgments.jsonl").read_text() + (AGREE / "ref_judgments.jsonl").read_text())
    args = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(both)]
    assert cli(*args, "--labels-from-judgments", str(both), "--label-judge", "gemini-3.1-pro", "--json") == 0
    assert "gemini-3.1-pro" not in json.loads(capsys.readouterr().out)["judges"]


def test_cli_missing_judgments_error(tmp_path, capsys):
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"task_id":"t2","agent":"omega","run":0,"rubric_id":"r1","satisfied":true}\n')
    args = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl")]
    assert cli(*args, "--labels", str(labels)) == 2
    assert "have no judgment by judge" in capsys.readouterr().out


def test_rank_columns_with_two_agents_show_the_count_and_a_dash(tmp_path, capsys):
    # Drop one of the fixture's three agents: two agents always rank ρ = τ = ±1, which says nothing.
    for name in ("judgments", "labels"):
        rows = [x for x in (AGREE / f"{name}.jsonl").read_text().splitlines() if '"agent": "gamma"' not in x]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(rows) + "\n")
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(tmp_path / "judgments.jsonl"),
            "--labels", str(tmp_path / "labels.jsonl")]
    assert cli(*base, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    for m in out["judges"].values():
        assert m["rank_agents"] == 2 and m["rank_spearman"] is None and m["rank_kendall"] is None
    assert cli(*base) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("│ choice-a"))
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[-5:-2] == ["—", "—", "2"]  # ρ, τ, Agents


def test_agree_json_csv_and_disagreements(capsys):
    import csv
    import io

    from lifesearch_local.output.csv_rows import AGREE_COLUMNS, DISAGREEMENT_COLUMNS

    base = ("agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--labels", str(AGREE / "labels.jsonl"), "--resamples", "1000")
    out = json.loads(cli_out(capsys, *base, "--json"))
    for judge, m in out["judges"].items():
        assert set(m["ci95"]) >= {"accuracy_mean", "kappa", "auroc", "majority_accuracy", "ece"}, judge
        lo, hi = m["ci95"]["accuracy_mean"]
        assert lo <= m["accuracy_mean"] <= hi and m["n_reports"] == 6
    assert out["bootstrap"]["resamples"] == 1000
    vs = {(c["a"], c["b"]): c for c in out["judge_vs_judge"]}
    assert vs[("choice-a", "const")]["mcnemar"] == {**vs[("choice-a", "const")]["mcnemar"], "b": 7, "c": 0}
    assert vs[("choice-a", "const")]["mcnemar"]["p_value"] == pytest.approx(2 / 2**7)
    rows = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--csv"))))
    assert tuple(rows[0]) == AGREE_COLUMNS and {"diff_accuracy_mean", "diff_kappa"} <= {r["metric"] for r in rows}
    dis = json.loads(cli_out(capsys, *base, "--disagreements", "--json"))
    conf = [d["confidence"] for d in dis["disagreements"]]
    known = [c for c in conf if c is not None]
    assert known == sorted(known, reverse=True) and conf[: len(known)] == known  # confident mistakes first
    assert all(d["verdict"] != d["label"] for d in dis["disagreements"])
    # every wrong decision is listed: accuracy × decisions = right ones
    wrong = sum(round((1 - m["accuracy_mean"]) * m["n"] * m["n_runs"]) for m in out["judges"].values())
    assert dis["n_disagreements"] == wrong == len(dis["disagreements"])
    drows = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--disagreements", "--csv"))))
    assert tuple(drows[0]) == DISAGREEMENT_COLUMNS and len(drows) == wrong


def test_agree_csv_and_disagreements_csv_neutralise_formula_cells(tmp_path, capsys):
    """`agree --csv` and `agree --disagreements --csv` wrote judge ids, agent names and reasons that start
    with = + - @ verbatim: they now start with a quote; numbers are left alone."""
    import csv
    import io

    tasks, _ = judge_inputs(tmp_path, 1)
    judge, agent = "=cmd|' /C calc'!A0", "@agent"
    rows = [{**J, "agent": agent, "judge": judge, "rubric_id": r, "satisfied": r == "R0", "p_true": 0.8 if r == "R0" else 0.3,
             "reason": "-2+3 looked fine"} for r in ("R0", "R1")]
    judgments = write_jsonl(tmp_path / "judgments.jsonl", rows)
    labels = write_jsonl(tmp_path / "labels.jsonl", [{"task_id": "t0", "agent": agent, "run": 0, "rubric_id": r,
                                                      "satisfied": False} for r in ("R0", "R1")])
    base = ("agree", "--tasks", str(tasks), "--judgments", str(judgments), "--labels", str(labels), "--resamples", "50")
    summary = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--csv"))))
    assert summary and {r["judge"] for r in summary} == {"'" + judge}
    listed = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--disagreements", "--csv"))))
    assert [(r["judge"], r["agent"], r["reason"]) for r in listed] == [("'" + judge, "'" + agent, "'-2+3 looked fine")]
    assert listed[0]["p_true"] == "0.8"


def test_cli_chance_baseline_beside_each_judge_and_the_run_majority_named_as_such(capsys):
    """Found in use: no chance baseline, and "Maj%" (majority over judge runs) read as the majority-class rate."""
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--labels", str(AGREE / "labels.jsonl")]
    assert cli(*base) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("┃ Judge"))
    cols = [c.strip() for c in header.split("┃")[1:-1]]
    assert cols[:6] == ["Judge", "Runs", "Acc%", "Chance%", "SC%", "RunMaj%"] and "Maj%" not in cols
    table3 = out[:out.index("└")]
    rows = {r.split("│")[1].strip(): [c.strip() for c in r.split("│")[1:-1]] for r in table3.splitlines() if r.startswith("│")}
    # 8 of the 15 labels are "not satisfied": always answering that is right 53.33% of the time
    assert {rows[j][3] for j in ("gen-b", "choice-a", "const")} == {"53.33"}
    assert "κ's chance baseline is 0" in " ".join(out.split()) and "majority vote over judge runs" in " ".join(out.split())
    assert cli(*base, "--json") == 0
    assert json.loads(capsys.readouterr().out)["judges"]["const"]["chance_accuracy"] == pytest.approx(8 / 15)
    assert cli(*base, "--csv") == 0
    assert "const,,all,chance_accuracy,0.5333333333333333," in capsys.readouterr().out


def test_cli_a_judgments_file_as_labels_names_the_option_that_takes_it(capsys):
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl")]
    ref = AGREE / "ref_judgments.jsonl"
    assert cli(*base, "--labels", str(ref)) == 2
    out = capsys.readouterr().out
    assert "Extra inputs are not permitted" not in out
    assert f"holds judgments (judge 'gemini-3.1-pro'), not labels: use it as the reference with --labels-from-judgments {ref}" in out


def test_cli_judgments_of_tasks_the_tasks_file_lacks_name_that_file(tmp_path, capsys):
    """Found in use: this was an error about the labels and --label-source."""
    one = tmp_path / "tasks.jsonl"
    one.write_text((AGREE / "tasks.jsonl").read_text().splitlines()[0] + "\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(line + "\n" for line in (AGREE / "labels.jsonl").read_text().splitlines() if '"t1"' in line))
    assert cli("agree", "--tasks", str(one), "--judgments", str(AGREE / "judgments.jsonl"), "--labels", str(labels)) == 2
    out = capsys.readouterr().out
    assert f"task(s) not in the tasks file {one}: t2; pass the tasks file" in out and "--label-source" not in out


def test_cli_task_ids_keep_those_tasks_their_judgments_and_labels(tmp_path, capsys):
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--labels", str(AGREE / "labels.jsonl"), "--json"]
    assert cli(*base, "--task-ids", "t1") == 0
    got = json.loads(capsys.readouterr().out)
    assert got["n_labels"] == 9 and {m["n"] for m in got["judges"].values()} == {9}
    assert set(got["judges"]["choice-a"]["by"]["language"]) == {"en"}  # t2 is the Chinese task


def test_one_report_gives_no_zero_width_interval(tmp_path, capsys):
    """Found in review: on one labelled report `agree` printed `[21.4, 21.4]`; one report resamples to
    itself, so there is no interval, and the table, JSON and CSV say why."""
    import csv
    import io

    labels = write_jsonl(tmp_path / "labels.jsonl", [r for r in map(json.loads, (AGREE / "labels.jsonl").read_text().splitlines())
                                                     if (r["task_id"], r["agent"], r["run"]) == ("t1", "alpha", 0)])
    base = ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--labels", str(labels), "--resamples", "200"]
    judge = json.loads(cli_out(capsys, *base, "--json"))["judges"]["choice-a"]
    assert judge["n_reports"] == 1 and judge["accuracy_mean"] is not None
    assert judge["ci95"]["accuracy_mean"] is None and judge["ci95_reason"]["accuracy_mean"] == "n=1: no interval"
    table = cli_out(capsys, *base)
    assert "n=1: no interval" in table
    rows = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--csv"))))
    acc = next(r for r in rows if r["judge"] == "choice-a" and r["metric"] == "accuracy_mean" and r["group"] == "all")
    assert acc["ci_lo"] == "" and acc["ci_reason"] == "n=1: no interval"
