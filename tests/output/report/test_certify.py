"""report.html's certify section: shown from RUN_DIR/certify.json as `certify --out` wrote it, text escaped."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.cli import main
from lifesearch_local.output.report import write_report
from tests.helpers.inputs import AGREE
from tests.helpers.report_runs import make_run_dir


def test_the_section_shows_the_study_certify_wrote(tmp_path, capsys):
    run = make_run_dir(tmp_path / "run", extras=False)
    assert "id=\"certify\"" not in write_report(run).read_text()  # no study, no section
    assert main(["certify", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
                 "--judge", "choice-a", "--labels-from-judgments", str(AGREE / "ref_judgments.jsonl"), "--label-judge",
                 "gemini-3.1-pro", "--human", str(AGREE / "labels.jsonl"), "--resamples", "500", "--json",
                 "--out", str(run / "certify.json")]) == 0
    capsys.readouterr()
    study = json.loads((run / "certify.json").read_text())
    page = write_report(run).read_text()
    section = page[page.index('id="certify"'):page.index('id="drilldown"')]
    assert "Can choice-a replace gemini-3.1-pro?" in section
    assert f'data-decision="{study["decision"]}"' in section
    assert 'id="certify-agents"' in section and 'id="certify-categories"' in section
    for agent, v in study["agents"].items():
        assert f"<td class=\"\">{agent}</td><td class=\"num\">{v['reference_score']:.1f}</td>" in section
    assert "Non-inferiority against 14 human-labelled decisions" in section and "random subset" in section


def test_the_section_escapes_what_it_shows(tmp_path):
    run = make_run_dir(tmp_path / "run", extras=False)
    study = {"judge": "<b>x</b>", "reference": "r&d", "decision": "inconclusive", "verdict": "<script>alert(1)</script>",
             "agreement": {"n": 2, "n_reports": 2, "accuracy": 0.5, "kappa": None, "ci95": {"accuracy": None, "kappa": None}},
             "bias_index": {"value": None, "ci95": None, "reason": "one agent: no spread of shifts"},
             "ranking": {"kendall_tau": None, "ci95": None, "flips": [], "reason": "1 agent(s)"},
             "agents": {"<i>a</i>": {"shift": 1.0, "ci95": None, "judge_score": 51.0, "reference_score": 50.0, "n_tasks": 1}},
             "categories": {}, "category_field": "type",
             "bootstrap": {"method": "m", "resamples": 10, "seed": 1, "unit": "u"}}
    (run / "certify.json").write_text(json.dumps(study))
    page = write_report(run).read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>x</b>" not in page and "&lt;i&gt;a&lt;/i&gt;" in page


def test_a_file_that_is_not_a_study_is_one_input_error(tmp_path):
    from lifesearch_local.errors import InputError

    run = make_run_dir(tmp_path / "run", extras=False)
    for text, where in (("[1, 2]", "a JSON object expected"), ('{"judge": "x"}', "reference"), ('{"a": NaN}', "certify.json")):
        (run / "certify.json").write_text(text)
        with pytest.raises(InputError, match=where):
            write_report(run)
