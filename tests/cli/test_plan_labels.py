"""`lifesearch plan-labels`: the planner's numbers through the command line, and its errors."""

from __future__ import annotations

import json

from lifesearch_local.analysis.label_budget import plan_non_inferiority, plan_ppi
from tests.helpers.cli import run_cli


def test_both_plans_as_json_match_the_library(capsys):
    code, out, err = run_cli(["plan-labels", "--judge-accuracy", "0.85", "--reference-accuracy", "0.85",
                              "--rubrics-per-report", "10", "--icc", "0.05", "--margin", "5", "--sigma", "0.2",
                              "--rho", "0.8", "--half-width", "0.03", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["non_inferiority"] == plan_non_inferiority(0.85, 0.85, margin=5.0, rubrics_per_report=10.0, icc=0.05)
    assert got["ppi"] == plan_ppi(0.2, 0.8, 0.03)
    assert got["non_inferiority"]["reports_needed"] == 117  # (1.96 + 0.84)² · 0.255 · 1.45 / 0.05² / 10 = 116.1, rounded up


def test_the_text_says_the_level_and_the_counts(capsys):
    code, out, _ = run_cli(["plan-labels", "--judge-accuracy", "0.9", "--reference-accuracy", "0.9"], capsys)
    assert code == 0 and "one-sided test at 0.025" in out and "reports of 10 rubrics" in out


def test_errors_are_one_line(capsys):
    assert "nothing to plan" in run_cli(["plan-labels"], capsys)[2]
    code, _, err = run_cli(["plan-labels", "--judge-accuracy", "0.9"], capsys)
    assert code == 2 and "go together" in err
    code, _, err = run_cli(["plan-labels", "--judge-accuracy", "0.9", "--reference-accuracy", "0.7",
                            "--discordance", "0.1"], capsys)
    assert code == 2 and "impossible" in err
