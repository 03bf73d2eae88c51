"""`lifesearch leaderboard`: DRB II's published table, a run directory against `score --json`, mixed sources, outputs."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.helpers.cli import cli_out, run_cli
from tests.helpers.drb2 import published_dir
from tests.helpers.inputs import AGREE
from tests.helpers.report_runs import make_run_dir


def published(name: str = "agg_scores_total.csv"):
    path = published_dir() / name
    if not path.is_file():
        pytest.skip(f"{path} absent (../shared)")
    return path


def test_drb2_published_totals_get_intervals_and_every_pair(capsys):
    out = json.loads(cli_out(capsys, "leaderboard", str(published()), "--json", "--resamples", "2000"))
    assert len(out["agents"]) == 7 and len(out["comparisons"]) == 21 and out["notes"] == []
    for name, a in out["agents"].items():
        assert a["ci95"][0] < a["mean"] < a["ci95"][1] <= 100, name
        assert 120 <= a["n_tasks"] <= 132
    means = [a["mean"] for a in out["agents"].values()]
    assert means == sorted(means, reverse=True) and out["agents"]["OpenAI"]["mean"] == pytest.approx(45.3964, abs=1e-3)
    # a task missing for one system is left out of that system's pairs only
    n = {a: v["n_tasks"] for a, v in out["agents"].items()}
    for c in out["comparisons"]:
        assert c["n_tasks"] <= min(n[c["a"]], n[c["b"]])
    assert any(c["n_tasks"] == 132 for c in out["comparisons"]) and any(c["n_tasks"] < 132 for c in out["comparisons"])
    assert out["groups"] and all(set(g) <= set(out["agents"]) for g in out["groups"])


def test_drb2_several_dimension_files(capsys):
    files = [str(published(f"agg_scores_{d}.csv")) for d in ("total", "inforecall", "analysis", "presentation")]
    out = json.loads(cli_out(capsys, "leaderboard", *files, "--json", "--resamples", "300"))
    assert out["dimension"] == "total" and set(out["dimensions"]) == {"inforecall", "analysis", "presentation"}
    assert out["notes"] == []  # one judge (not stated), one task set: ranked together
    table = cli_out(capsys, "leaderboard", *files, "--resamples", "300", "--dimension", "analysis")
    assert "analysis [95% CI]" in table and "total [95% CI]" in table


def test_run_directory_numbers_are_score_s(tmp_path, capsys):
    """On a run directory the leaderboard's numbers are `score --json`'s (× 100: points)."""
    run = make_run_dir(tmp_path / "run", extras=False)
    lb = json.loads(cli_out(capsys, "leaderboard", str(run), "--json", "--resamples", "700", "--seed", "3"))["judges"]
    sc = json.loads(cli_out(capsys, "score", "--tasks", str(run / "tasks.jsonl"), "--judgments",
                            str(run / "judgments.jsonl"), "--json", "--resamples", "700", "--seed", "3"))["judges"]
    assert set(lb) == set(sc)
    for judge, want in sc.items():
        got = lb[judge]
        assert list(got["agents"]) == list(want["agents"])
        for a, w in want["agents"].items():
            g = got["agents"][a]
            assert g["mean"] == 100 * w["overall_mean"] and g["n_tasks"] == w["n_tasks"]
            assert g["ci95"] == (None if w["ci95"] is None else [100 * w["ci95"][0], 100 * w["ci95"][1]])
            assert g["ci95_reason"] == w["ci95_reason"]
        for g, w in zip(got["comparisons"], want["comparisons"], strict=True):
            assert (g["a"], g["b"], g["p_value"], g["p_holm"], g["n_tasks"]) == (w["a"], w["b"], w["p_value"],
                                                                                  w["p_holm"], w["n_tasks"])
            assert g["diff"] == 100 * w["diff"]
            assert g["ci95"] == (None if w["ci95"] is None else [100 * w["ci95"][0], 100 * w["ci95"][1]])


def test_sources_by_different_judges_are_not_ranked_together(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("agent,task_id,score,judge\nx,t1,0.5,j1\nx,t2,0.7,j1\ny,t1,0.2,j1\ny,t2,0.4,j1\n")
    b.write_text("agent,task_id,score,judge\nz,t1,0.9,j2\nz,t2,0.8,j2\n")
    code, out, err = run_cli(["leaderboard", str(a), str(b), "--json", "--resamples", "200"], capsys)
    assert code == 0 and "note: 2 judges (j1, j2)" in err and "ranked within each judge" in err
    doc = json.loads(out)
    assert set(doc["judges"]) == {"j1", "j2"} and list(doc["judges"]["j1"]["agents"]) == ["x", "y"]
    code, out, err = run_cli(["leaderboard", str(a), str(b), "--json", "--resamples", "200", "--allow-mixed"], capsys)
    assert code == 0 and set(json.loads(out)["agents"]) == {"x", "y", "z"} and "--allow-mixed" in err


def test_table_csv_html_and_task_ids(tmp_path, capsys):
    run = make_run_dir(tmp_path / "run", extras=False)
    base = ["leaderboard", str(run), "--resamples", "200"]
    table = cli_out(capsys, *base)
    assert "Leaderboard — judge choice-a, total" in table and "n=1" in table and "cannot tell apart" in table
    assert "not shown" not in table
    rows = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--csv"))))
    mean = next(r for r in rows if r["judge"] == "choice-a" and r["agent"] == "alpha" and r["metric"] == "mean"
                and not r["domain"])
    assert float(mean["value"]) == pytest.approx(81.25) and mean["rank"] == "1" and mean["n_tasks"] == "2"
    dom = next(r for r in rows if r["judge"] == "choice-a" and r["agent"] == "alpha" and r["domain"] == "company")
    assert dom["n_tasks"] == "1" and dom["ci_lo"] == "" and dom["ci_reason"] == "n=1: no interval"
    html = tmp_path / "lb.html"
    code, _, err = run_cli([*base, "--html", str(html), "--json"], capsys)
    assert code == 0 and html.read_text().startswith("<!DOCTYPE html>") and 'id="leaderboard-choice-a"' in html.read_text()
    one = json.loads(cli_out(capsys, *base, "--json", "--task-ids", "t1", "--seed", "1"))
    assert all(a["n_tasks"] == 1 and a["ci95"] is None for j in one["judges"].values() for a in j["agents"].values())
    ids = tmp_path / "ids.txt"
    ids.write_text("# the first task\nt1\n")
    assert json.loads(cli_out(capsys, *base, "--json", "--task-ids-file", str(ids), "--seed", "1")) == one
    code, _, err = run_cli([*base, "--task-ids", "t1,nope"], capsys)
    assert code == 2 and "nope" in err


def test_task_ids_are_the_shared_option_of_judge_score_agree_report(tmp_path, capsys):
    """The leaderboard kept its own --task-ids: a second --task-ids replaced the first (t2 only) where
    `score` takes both, and an id file's inline comment became part of the id."""
    run = make_run_dir(tmp_path / "run", extras=False)
    base = ["leaderboard", str(run), "--json", "--resamples", "200", "--seed", "1"]
    every = json.loads(cli_out(capsys, *base))
    assert {a["n_tasks"] for j in every["judges"].values() for a in j["agents"].values()} == {2}
    assert json.loads(cli_out(capsys, *base, "--task-ids", "t1", "--task-ids", "t2")) == every
    ids = tmp_path / "ids.txt"
    ids.write_text("t1  # the company task\nt2\n")
    assert json.loads(cli_out(capsys, *base, "--task-ids-file", str(ids))) == every


def test_a_judgments_file_needs_its_tasks(capsys):
    code, _, err = run_cli(["leaderboard", str(AGREE / "judgments.jsonl")], capsys)
    assert code == 2 and "needs --tasks" in err and "Traceback" not in err
    out = json.loads(cli_out(capsys, "leaderboard", str(AGREE / "judgments.jsonl"), "--tasks", str(AGREE / "tasks.jsonl"),
                             "--json", "--resamples", "100"))
    assert "choice-a" in out["judges"]


def test_an_unknown_source_is_one_line(tmp_path, capsys):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    code, out, err = run_cli(["leaderboard", str(p)], capsys)
    assert code == 2 and err.count("\n") == 1 and "not a source of task scores" in err


@pytest.mark.parametrize("argv", [["--help"], ["leaderboard", "--help"]])
def test_help_prints(argv, capsys):
    """A bare % in a help string made `lifesearch --help` end in a traceback."""
    with pytest.raises(SystemExit) as e:
        run_cli(argv, capsys)
    out = capsys.readouterr().out
    assert e.value.code == 0 and "leaderboard" in out and "95%" in out and "95%%" not in out


def test_a_private_file_given_as_task_ids_is_never_printed(tmp_path, capsys):
    """`--task-ids-file /etc/shadow` printed five shadow lines as "id(s) in no source"."""
    run = make_run_dir(tmp_path / "run", extras=False)
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$saltsalt$hashhash:19000:0:99999:7:::\nt1\n")
    code, out, err = run_cli(["leaderboard", str(run), "--resamples", "50", "--task-ids-file", str(secret)], capsys)
    assert code == 2 and err.strip().splitlines() == [f"error: --task-ids: 1 id(s) in no source: {secret}:1"]
    assert "hashhash" not in out + err and "19000" not in out + err
    html = tmp_path / "missing" / "lb.html"
    code, _, err = run_cli(["leaderboard", str(run), "--resamples", "50", "--html", str(html)], capsys)
    assert code == 2 and err.strip().splitlines()[-1] == f"error: {html}: cannot be written (No such file or directory); choose another path"


def test_300_systems_under_a_3_gib_address_space_answer(tmp_path):
    """A 7 KB table of 300 systems × 3 tasks once tried to hold every pair's 10,000 resamples (3.3 GiB):
    under a 3 GiB address-space limit it must answer, exit 0 or 2 with one line, never a traceback."""
    import random
    import subprocess
    import sys

    rng = random.Random(1)
    wide = tmp_path / "wide300.csv"
    wide.write_text("idx,language,theme," + ",".join(f"sys{k}" for k in range(300)) + ",avg\n" + "".join(
        f"{i},en,Finance," + ",".join(f"{rng.random():.3f}" for _ in range(300)) + ",0.5\n" for i in (1, 2, 3)))
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
            "from lifesearch_local.cli import main; sys.exit(main(sys.argv[1:]))")
    res = subprocess.run([sys.executable, "-c", code, "leaderboard", str(wide), "--csv"], capture_output=True,
                         text=True, timeout=110)
    assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr[-2000:]
    if res.returncode == 0:
        rows = list(csv.DictReader(io.StringIO(res.stdout)))
        assert sum(r["metric"] == "diff" for r in rows) == 300 * 299 // 2
    else:
        assert res.stderr.count("\n") == 1


def test_a_run_with_cut_reports_shows_them_in_every_leaderboard_output(tmp_path, capsys):
    """From a run directory, the leaderboard says which agents' reports the judge cut, as `score` does."""
    run = make_run_dir(tmp_path / "run", extras=False)
    rows = [json.loads(line) for line in (run / "judgments.jsonl").read_text().splitlines()]
    for r in rows:
        if r["agent"] == "alpha" and r["task_id"] == "t1" and r.get("judge_run", 0) == 0:
            r["truncated_tokens"] = 10
    (run / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ("leaderboard", str(run), "--resamples", "100")
    table = cli_out(capsys, *argv)
    assert "Reports cut (median seen)" in table and "note: WARNING: reports cut" in table
    out = json.loads(cli_out(capsys, *argv, "--json"))["judges"]
    cut = {j: {a: v["truncation"]["reports_cut"] for a, v in e["agents"].items()} for j, e in out.items()}
    assert cut["choice-a"]["alpha"] >= 1 and cut["choice-a"]["beta"] == 0
    rows = list(csv.DictReader(io.StringIO(cli_out(capsys, *argv, "--csv"))))
    assert any(r["agent"] == "alpha" and r["metric"] == "reports_cut" and r["value"] != "0" for r in rows)
    html = tmp_path / "lb.html"
    cli_out(capsys, *argv, "--html", str(html))
    assert "Reports cut (median seen)" in html.read_text()


def test_lower_is_better_and_the_blocked_file(capsys):
    """--lower-is-better ranks the lowest first; DRB II's blocked file is ranked so without it."""
    blocked = json.loads(cli_out(capsys, "leaderboard", str(published("agg_scores_blocked.csv")), "--json",
                                 "--resamples", "200"))
    means = [a["mean"] for a in blocked["agents"].values()]
    assert blocked["dimension"] == "blocked" and blocked["better"] == "lower" and means == sorted(means)
    total = json.loads(cli_out(capsys, "leaderboard", str(published()), "--json", "--resamples", "200",
                               "--lower-is-better"))
    assert list(total["agents"])[0] == "tongyi" and total["better"] == "lower"
    table = cli_out(capsys, "leaderboard", str(published()), "--resamples", "2000", "--lower-is-better")
    pair = [line for line in table.splitlines() if "│ tongyi" in line and "│ OpenAI" in line]
    assert "lower is better" in " ".join(table.split()) and pair and "A better" in pair[0]  # tongyi's lower: better
