"""`lifesearch certify` (and `score --ppi`) on the sample data: two synthetic judges made from the sample labels."""

from __future__ import annotations

import json
import random

import pytest

from lifesearch_local.analysis.ppi import ppi_mean_ci
from tests.helpers.cli import run_cli
from tests.helpers.inputs import SAMPLE, write_jsonl

RESAMPLES = "1000"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """judgments.jsonl with a reference judge (the sample labels, 10% flipped) and a candidate (20% flipped, and
    biased against sample-shallow), and human labels: the sample labels of a random half of the tasks."""
    d = tmp_path_factory.mktemp("certify")
    labels = [json.loads(line) for line in (SAMPLE / "labels.jsonl").read_text().splitlines()]
    rng = random.Random(1)
    rows = []
    for judge, flip in (("ref-judge", 0.1), ("cand", 0.2)):
        for lab in labels:
            v = lab["satisfied"] != (rng.random() < flip)
            if judge == "cand" and lab["agent"] == "sample-shallow" and v and rng.random() < 0.5:
                v = False
            rows.append({**{k: lab[k] for k in ("task_id", "agent", "run", "rubric_id")}, "judge": judge,
                         "satisfied": v, "p_true": 0.8 if v else 0.2})
    tasks = sorted({lab["task_id"] for lab in labels})
    chosen = set(rng.sample(tasks, 5))
    return {"judgments": write_jsonl(d / "judgments.jsonl", rows),
            "human": write_jsonl(d / "human.jsonl", [lab for lab in labels if lab["task_id"] in chosen]),
            "dir": d}


def certify_args(files, *extra: str) -> list[str]:
    return ["certify", "--tasks", str(SAMPLE / "tasks.jsonl"), "--judgments", str(files["judgments"]), "--judge", "cand",
            "--labels-from-judgments", str(files["judgments"]), "--label-judge", "ref-judge", "--resamples", RESAMPLES,
            *extra]


def test_the_json_has_every_field_the_issue_names(files, capsys):
    code, out, err = run_cli(certify_args(files, "--human", str(files["human"]), "--json"), capsys)
    assert code == 0, err
    s = json.loads(out)
    assert s["judge"] == "cand" and s["reference"] == "ref-judge" and s["agreement"]["n"] == 342
    assert set(s["agreement"]) >= {"accuracy", "kappa", "ci95"} and set(s["agreement"]["ci95"]) == {"accuracy", "kappa"}
    assert 0 < s["agreement"]["accuracy"] < 1 and s["agreement"]["ci95"]["accuracy"][0] < s["agreement"]["accuracy"]
    assert set(s["ranking"]) >= {"kendall_tau", "ci95", "flips"}
    assert s["ranking"]["kendall_tau"] is None and "2 agent" in s["ranking"]["reason"]  # two sample agents
    assert set(s["agents"]) == {"sample-thorough", "sample-shallow"}
    for a in s["agents"].values():
        assert {"shift", "ci95", "ppi"} <= set(a) and len(a["ci95"]) == 2
        assert set(a["ppi"]) >= {"mean", "ci95", "n_labelled_tasks"} and a["ppi"]["n_labelled_tasks"] == 5
    assert s["agents"]["sample-shallow"]["shift"] < s["agents"]["sample-thorough"]["shift"]  # the planted bias
    assert set(s["bias_index"]) >= {"value", "corrected", "upper95", "equal_shifts_p_value"} and s["bias_index"]["value"] > 0
    assert 0 <= s["bias_index"]["corrected"] <= s["bias_index"]["value"] <= s["bias_index"]["upper95"]
    ni = s["non_inferiority"]
    assert ni["alpha_one_sided"] == 0.025 and isinstance(ni["reports_needed"], int) and ni["reports_needed"] > 0
    assert "superpopulation" in s["agents"]["sample-thorough"]["ppi"]["estimand"]
    assert set(s["categories"]) == {"Objective", "Subjective"}
    assert set(s["non_inferiority"]) >= {"diff", "ci95", "margin", "verdict"} and s["non_inferiority"]["margin"] == 2.0
    assert s["non_inferiority"]["verdict"] in ("non-inferior", "inferior", "inconclusive")
    assert isinstance(s["verdict"], str) and "human-labelled" in s["verdict"]
    assert "random subset" in s["ppi_note"]


def test_the_ppi_of_an_agent_is_ppi_mean_ci_on_its_task_scores(files, capsys):
    code, out, err = run_cli(["score", "--tasks", str(SAMPLE / "tasks.jsonl"), "--judgments", str(files["judgments"]),
                              "--judge", "cand", "--ppi", "--labels", str(files["human"]), "--json"], capsys)
    assert code == 0, err
    s = json.loads(out)
    row = s["agents"]["sample-thorough"]
    human = {json.loads(x)["task_id"] for x in files["human"].read_text().splitlines()}
    # recompute from the human-label task scores: the share of weight the labels satisfy
    tasks = {json.loads(x)["id"]: json.loads(x) for x in (SAMPLE / "tasks.jsonl").read_text().splitlines()}
    labels = [json.loads(x) for x in files["human"].read_text().splitlines() if '"sample-thorough"' in x]
    y = {}
    for t in sorted(human):
        w = {r["id"]: r["weight"] for r in tasks[t]["rubrics"]}
        y[t] = sum(w[lab["rubric_id"]] for lab in labels if lab["task_id"] == t and lab["satisfied"]) / sum(w.values())
    f = row["tasks"]
    expect = ppi_mean_ci([y[t] for t in sorted(human)], [f[t] for t in sorted(human)],
                         [f[t] for t in f if t not in human])
    assert row["ppi"]["mean"] == pytest.approx(expect.mean) and row["ppi"]["lambda"] == pytest.approx(expect.lam)
    assert row["ppi"]["ci95"] is None and "needs 30" in row["ppi"]["ci95_reason"]  # 5 labelled tasks: too few for one
    assert "random subset" in s["ppi_note"]


def test_score_ppi_needs_labels_and_prints_a_table(files, capsys):
    base = ["score", "--tasks", str(SAMPLE / "tasks.jsonl"), "--judgments", str(files["judgments"]), "--judge", "cand"]
    code, _, err = run_cli([*base, "--ppi"], capsys)
    assert code == 2 and "--ppi and --labels H go together" in err
    code, out, err = run_cli([*base, "--ppi", "--labels", str(files["human"])], capsys)
    assert code == 0 and "Prediction-powered scores — judge cand" in out and "random subset" in out
    code, out, _ = run_cli([*base, "--ppi", "--labels", str(files["human"]), "--csv"], capsys)
    assert sum(1 for line in out.splitlines() if line.startswith("cand,") and ",ppi," in line) == 2
    assert sum(1 for line in out.splitlines() if line.startswith("cand,") and ",labels_only," in line) == 2
    code, out, _ = run_cli([*base, "--ppi", "--labels", str(files["human"])], capsys)
    assert "Estimand: superpopulation" in out and "Labels only [95% CI]" in out


def test_score_ppi_for_these_tasks(files, capsys):
    base = ["score", "--tasks", str(SAMPLE / "tasks.jsonl"), "--judgments", str(files["judgments"]), "--judge", "cand"]
    code, _, err = run_cli([*base, "--finite-population"], capsys)
    assert code == 2 and "--finite-population goes with --ppi" in err
    code, out, err = run_cli([*base, "--ppi", "--labels", str(files["human"]), "--finite-population", "--json"], capsys)
    assert code == 0, err
    ppi = json.loads(out)["agents"]["sample-thorough"]["ppi"]
    assert ppi["estimand"].startswith("these tasks") and "labels_only_ci95" in ppi and ppi["level"] == 0.95


def test_the_terminal_study_ends_with_the_verdict(files, capsys):
    code, out, err = run_cli(certify_args(files, "--human", str(files["human"]), "--margin", "5"), capsys)
    assert code == 0, err
    assert "certify: can cand replace ref-judge?" in out and "Bias Index" in out and "By rubric type" in out
    assert "non-inferiority against" in out and "margin −5" in out
    assert "verdict (" in out.split("By rubric type")[1]  # last, under the tables


def test_csv_and_out(files, capsys):
    target = files["dir"] / "certify.json"
    code, out, err = run_cli(certify_args(files, "--csv", "--out", str(target)), capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "section,group,name,metric,value,ci_lo,ci_hi,n,note"
    assert any(line.startswith("bias_index,") for line in lines) and lines[-1].startswith("verdict,")
    saved = json.loads(target.read_text())
    assert "non_inferiority" not in saved and saved["decision"] in ("equivalent-scores", "different-scores", "inconclusive")
    assert "no human labels" in saved["verdict"]


def test_categories_by_another_field_and_the_candidate_found_alone(files, capsys):
    args = [a for a in certify_args(files, "--category-field", "language", "--json") if a not in ("--judge", "cand")]
    code, out, err = run_cli(args, capsys)  # the file's other judge is the reference: cand is the only candidate
    assert code == 0, err
    s = json.loads(out)
    assert s["judge"] == "cand" and set(s["categories"]) == {"en", "zh"} and s["category_field"] == "language"


def test_errors_are_one_line(files, capsys):
    code, _, err = run_cli(["certify", "--tasks", str(SAMPLE / "tasks.jsonl"), "--judgments", str(files["judgments"]),
                            "--labels", str(SAMPLE / "labels.jsonl")], capsys)
    assert code == 2 and "2 judges in the judgments (ref-judge, cand): pick one with --judge" in err
    code, _, err = run_cli(certify_args(files, "--judge", "nobody"), capsys)
    assert code == 2 and "no judgments by judge 'nobody'" in err


def test_the_one_sided_level_is_an_option_and_stated(files, capsys):
    code, out, err = run_cli(certify_args(files, "--human", str(files["human"]), "--alpha", "0.05", "--json"), capsys)
    assert code == 0, err
    ni = json.loads(out)["non_inferiority"]
    assert ni["alpha_one_sided"] == 0.05 and ni["one_sided_bounds"][0] > ni["ci95"][0]  # 90% two-sided: narrower
    assert "one-sided test at 0.05" in json.loads(out)["verdict"]
    with pytest.raises(SystemExit) as exit_:
        run_cli(certify_args(files, "--alpha", "0.7"), capsys)
    assert exit_.value.code == 2 and "a one-sided level between 0 and 0.5" in capsys.readouterr().err


def test_edge_messages(files, capsys, tmp_path):
    ref_only = write_jsonl(tmp_path / "ref.jsonl", [json.loads(line) for line in files["judgments"].read_text().splitlines()
                                                    if '"ref-judge"' in line])
    code, _, err = run_cli(["certify", "--tasks", str(SAMPLE / "tasks.jsonl"), "--judgments", str(ref_only),
                            "--labels-from-judgments", str(ref_only), "--label-judge", "ref-judge"], capsys)
    assert code == 2 and "the same judge" in err and "0 judges" not in err
    code, _, err = run_cli([a if a != "cand" else "ref-judge" for a in certify_args(files)], capsys)
    assert code == 2 and "the same judge" in err
    # human labels that are the reference's own verdicts: a warning that the comparison is circular
    ref_labels = write_jsonl(tmp_path / "circular.jsonl", [
        {k: r[k] for k in ("task_id", "agent", "run", "rubric_id", "satisfied")}
        for r in map(json.loads, ref_only.read_text().splitlines())])
    code, out, err = run_cli(certify_args(files, "--human", str(ref_labels), "--json"), capsys)
    assert code == 0 and "circular" in err and "circular" in json.loads(out)["warnings"][0]
    stray = write_jsonl(tmp_path / "stray.jsonl", [{"task_id": "no-such-task", "agent": "sample-shallow", "run": 0,
                                                    "rubric_id": "R1", "satisfied": True}])
    code, _, err = run_cli(certify_args(files, "--human", str(stray)), capsys)
    assert code == 2 and "no-such-task" in err and "not in the tasks file" in err and "unknown rubric" not in err


def test_fingerprints_from_the_manifest_are_compared(files, capsys, tmp_path):
    judgments = tmp_path / "judgments.jsonl"
    judgments.write_text(files["judgments"].read_text())
    fp = {"engine": "hf", "weights_hash": "aaaa", "kernel_form": "shared"}
    (tmp_path / "manifest.json").write_text(json.dumps({"fingerprints": {
        "cand": {"judge": "cand", **fp}, "ref-judge": {"judge": "ref-judge", **fp, "weights_hash": "bbbb"}}}))
    args = certify_args(files, "--json")
    args = [str(judgments) if a == str(files["judgments"]) else a for a in args]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert json.loads(out)["fingerprints"]["differences"] == ["weights_hash: 'aaaa' != 'bbbb'"]


def test_against_imported_drb2_gemini_verdicts_by_dimension(tmp_path, capsys):
    from tests.helpers.drb2 import rows, run_import

    out = run_import(tmp_path / "drb2")  # invented fixtures: Gemini's verdicts become labels with source gemini
    capsys.readouterr()
    labels = rows(out / "labels.jsonl")
    cand = [{**{k: lab[k] for k in ("task_id", "agent", "run", "rubric_id")}, "judge": "open",
             "satisfied": lab["satisfied"] if i % 4 else not lab["satisfied"]} for i, lab in enumerate(labels)]
    judgments = write_jsonl(tmp_path / "judgments.jsonl", cand)
    code, text, err = run_cli(["certify", "--tasks", str(out / "tasks.jsonl"), "--judgments", str(judgments),
                               "--labels", str(out / "labels.jsonl"), "--label-source", "gemini",
                               "--category-field", "dimension", "--json", "--resamples", "500"], capsys)
    assert code == 0, err
    s = json.loads(text)
    assert s["judge"] == "open" and s["reference"] == "gemini" and s["agreement"]["n"] == len(labels)
    assert s["agreement"]["accuracy"] == pytest.approx(1 - len(range(0, len(labels), 4)) / len(labels))  # every 4th flipped
    dims = {r["dimension"] for t in rows(out / "tasks.jsonl") for r in t["rubrics"]}
    assert s["category_field"] == "dimension" and set(s["categories"]) <= dims and len(s["categories"]) >= 2
    assert sum(c["n"] for c in s["categories"].values()) == len(labels)


def test_out_never_follows_a_link_and_a_full_disk_is_one_line(files, capsys, tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "study.json"
    link.symlink_to(victim)
    code, _, err = run_cli(certify_args(files, "--out", str(link)), capsys)
    assert code == 2 and "is a symbolic link" in err and len(err.strip().splitlines()) == 1
    assert victim.read_text() == "keep me\n" and link.is_symlink()
    code, _, err = run_cli(certify_args(files, "--out", str(tmp_path / "no" / "such" / "study.json")), capsys)
    assert code == 2 and "cannot be written (No such file or directory)" in err and "Traceback" not in err

    import errno
    import os

    from lifesearch_local.rundir import files as writer

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer.os, "write", full)
    target = tmp_path / "full" / "study.json"
    target.parent.mkdir()
    code, _, err = run_cli(certify_args(files, "--out", str(target)), capsys)
    monkeypatch.undo()
    assert code == 1 and err.strip().splitlines() == [f"error: {target}: no space left on device; free some space and "
                                                      "rerun the same command (what was written before is kept)"]
    assert os.listdir(target.parent) == []  # no 0-byte study, no temporary
