"""docs/compare-judges.md, run on a smaller setup: its `bash` blocks in order (a third agent, the sweep of
three judges over three agents' reports of two tasks with Table 3 against the sample labels, human labels
on a random half of the tasks, the certify study of tiny-llama against the reference judge and its report
section, `score --ppi`), in a scratch directory holding the repository's data and configs, with
`lifesearch` on PATH; the reference judge smollm2-135m (minutes of CPU on one worker) is played by the
random-weight tiny-mistral, its id replaced in the commands. The walkthrough exactly as written, with
smollm2-135m, is `python scripts/ci/compare_judges.py`. Its Gemini judge YAML is checked as a config, not
run; its `shell` blocks (downloads and a GPU) are parsed by the real CLI."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lifesearch_local.cli import build_parser
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment, Label, Report
from lifesearch_local.run.config import load_judge_configs, load_run_config
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import ROOT

DOC = ROOT / "docs" / "compare-judges.md"
pytestmark = pytest.mark.slow


def blocks(lang: str) -> list[str]:
    """The doc's fenced code blocks of one language, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.S | re.M)


def table_rows(text: str, title: str) -> dict[str, list[str]]:
    """The rows of the rich table under `title`, by first cell."""
    lines = text[text.index(title):].splitlines()
    rows = {}
    for line in lines[1:]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0]] = cells
    return rows


REFERENCE, STAND_IN = "smollm2-135m", "tiny-mistral"


def small_configs(work: Path) -> Path:
    """The repository's configs, compare_judges.yaml with the stand-in for the reference judge."""
    (work / "configs").mkdir()
    for path in (ROOT / "configs").iterdir():
        if path.name != "compare_judges.yaml":
            (work / "configs" / path.name).symlink_to(path)
    text = (ROOT / "configs/compare_judges.yaml").read_text(encoding="utf-8")
    small = work / "configs/compare_judges.yaml"
    small.write_text(text.replace(f"model: {REFERENCE},", f"model: {STAND_IN},"), encoding="utf-8")
    return small


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory) -> tuple[Path, list[str], dict[str, str]]:
    work = tmp_path_factory.mktemp("compare")
    (work / "data").symlink_to(ROOT / "data")
    ids = judge_ids(small_configs(work))
    assert ids[STAND_IN] != judge_ids()[REFERENCE]
    bin_dir = work / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "lifesearch"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lifesearch_local "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    outs = []
    for script in blocks("bash"):
        script = script.replace(judge_ids()[REFERENCE], ids[STAND_IN])
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
                           text=True, timeout=110)
        assert r.returncode == 0, f"{script}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        outs.append(r.stdout)
    return work, outs, ids


def judge_ids(config: Path = ROOT / "configs/compare_judges.yaml") -> dict[str, str]:
    """model → the judge id a compare-judges config derives for it."""
    return {j.model.model: j.id for j in load_run_config(config).all_judges()}


def test_the_doc_runs_five_steps_on_three_agents(walkthrough):
    work, outs, _ = walkthrough
    assert len(outs) == 5  # agent, sweep, human subset, certify + report, score --ppi
    reports = read_records(work / "runs/compare/agents/reports.jsonl", Report)
    assert sorted({r.agent for r in reports}) == ["sample-shallow", "sample-thorough", "tiny-qwen3-agent"]
    assert {r.task_id for r in reports} == set(TASKS) and len(reports) == 3 * len(TASKS)


TASKS = ["sample-en-01", "sample-zh-01"]


def test_table3_compares_every_judge_with_the_human_labels(walkthrough):
    work, outs, by_model = walkthrough
    ids = list(by_model.values())
    assert ids[0].startswith(f"{STAND_IN}/choice/") and len(set(ids)) == 3
    judgments = read_records(work / "runs/compare/sweep/judgments.jsonl", Judgment)
    tasks = {t.id: t for t in load_tasks(ROOT / "data/sample/tasks.jsonl")}
    rubrics = sum(1 for t in TASKS for r in tasks[t].rubrics if r.weight > 0)
    assert sorted({j.judge for j in judgments}) == sorted(ids) and len(judgments) == 3 * 3 * rubrics
    labels = 2 * rubrics  # the sample author labelled the two sample agents
    rows = table_rows(outs[1], f"Judge agreement with {labels} labels (sample-author)")
    assert set(rows) == set(ids)
    saved = json.loads((work / "runs/compare/sweep/agreement.json").read_text())
    for judge in ids:
        m = saved[judge]
        assert m["n"] == labels and rows[judge][2] == f"{100 * m['accuracy_mean']:.2f}"  # Acc% as computed
        assert rows[judge][12] == "2" and rows[judge][10] == rows[judge][11] == "—"  # two labelled agents: no ρ/τ
    warning = next(line for line in outs[1].splitlines() if line.startswith("WARNING: random weights: "))
    assert f"judge {by_model['tiny-llama']}" in warning  # said next to the table, naming each random judge


def test_the_human_labels_are_the_sample_labels_of_a_random_half(walkthrough):
    work, outs, _ = walkthrough
    human = read_records(work / "runs/compare/human.jsonl", Label)
    drawn = sorted({lab.task_id for lab in human})
    assert len(drawn) == 1 and set(drawn) <= set(TASKS) and outs[2].strip() == f"human labels on {', '.join(drawn)}"
    everything = [lab for lab in read_records(ROOT / "data/sample/labels.jsonl", Label) if lab.task_id in drawn]
    assert human == everything


def test_certify_studies_the_candidate_against_the_reference_with_the_humans(walkthrough):
    work, outs, ids = walkthrough
    doc_ids = judge_ids()
    (cmd,) = [b for b in blocks("bash") if "lifesearch certify" in b]
    assert f"--judge {doc_ids['tiny-llama']}" in cmd and f"--label-judge {doc_ids[REFERENCE]}" in cmd  # the doc's ids
    study = json.loads((work / "runs/compare/sweep/certify.json").read_text())
    assert study["judge"] == ids["tiny-llama"] and study["reference"] == ids[STAND_IN]
    assert set(study["agents"]) == {"sample-shallow", "sample-thorough", "tiny-qwen3-agent"}
    assert study["ranking"]["n_agents"] == 3 and "kendall_tau" in study["ranking"]
    assert study["non_inferiority"]["n"] == len(read_records(work / "runs/compare/human.jsonl", Label))
    assert study["non_inferiority"]["verdict"] == study["decision"]
    for agent in ("sample-shallow", "sample-thorough"):
        assert study["agents"][agent]["ppi"]["n_labelled_tasks"] == 1
    assert study["agents"]["tiny-qwen3-agent"]["ppi"]["n_labelled_tasks"] == 0  # nobody labelled its reports
    assert f"verdict ({study['decision']})" in outs[3] and "random subset" in outs[3]
    # the sweep recorded both judges' fingerprints: same engine, dtype, prompts and kernel, other weights
    assert [d.split(":")[0] for d in study["fingerprints"]["differences"]] == ["weights_hash"]
    assert "fingerprints: two different judges (their fingerprints differ in weights_hash)" in outs[3]
    page = (work / "runs/compare/sweep/report.html").read_text()
    assert 'id="certify"' in page and f'data-decision="{study["decision"]}"' in page
    # (that the doc quotes the decision its own run makes is checked by scripts/ci/compare_judges.py)


def test_score_ppi_corrects_the_reference_judge(walkthrough):
    work, outs, ids = walkthrough
    assert f"Prediction-powered scores — judge {ids[STAND_IN]}" in outs[4]
    assert "random subset" in outs[4]


def test_the_gemini_judge_of_the_doc_is_a_valid_config_with_the_id_it_names(tmp_path):
    (yaml_text,) = blocks("yaml")
    path = tmp_path / "judge_gemini.yaml"
    path.write_text(yaml_text)
    (gemini,) = load_judge_configs(path)
    assert gemini.model.backend == "openai" and gemini.model.api_key_env == "GEMINI_API_KEY"
    assert gemini.model.base_url.startswith("https://") and gemini.mode == "generate"
    (sh,) = blocks("sh")
    assert f"--label-judge {gemini.id}" in sh and "--config configs/judge_gemini.yaml" in sh
    # the endpoint's address and key are where it runs, not what judges: same id pointed elsewhere
    local = gemini.updated(model={"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "OTHER"})
    assert local.id == gemini.id and isinstance(local, JudgeConfig)


def test_the_real_data_route_of_compare_judges_parses(tmp_path):
    """docs/compare-judges.md's `shell` blocks (they need downloads and a GPU, so they are not run):
    every `lifesearch` line parses with the real CLI and the judge YAML is a valid vLLM judge config."""
    doc = (ROOT / "docs" / "compare-judges.md").read_text(encoding="utf-8")
    shell = re.findall(r"^```shell\n(.*?)^```$", doc, flags=re.S | re.M)
    # `shell`, not bash/sh/yaml: the tests above run the walkthrough's 5 bash blocks
    # and checks its one sh and one yaml block
    assert len(shell) == 2 and len(re.findall(r"^```(?:bash|sh|yaml)\n", doc, flags=re.M)) == 7
    commands = [c for block in shell for c in block.replace("\\\n", " ").splitlines() if c.startswith("lifesearch ")]
    assert [shlex.split(c)[1] for c in commands] == ["import", "judge", "certify", "import", "judge", "judge", "certify"]
    for c in commands:
        build_parser().parse_args(shlex.split(c)[1:])  # SystemExit on an unknown flag or a missing one
    (yaml_text,) = re.findall(r"<<'END'\n(.*?)^END$", shell[0], flags=re.S | re.M)
    (tmp_path / "judge.yaml").write_text(yaml_text)
    (judge,) = load_judge_configs(tmp_path / "judge.yaml")
    assert judge.id == "qwen3-8b-choice" and judge.model.backend == "vllm" and judge.mode == "choice"
