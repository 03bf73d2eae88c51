"""Judge ids say what judged: `<model name>/<mode>/<hash of the verdict-changing settings>`,
different for different judges (two local directories both named `hf` included), the same for
the same settings, kept as written when given, and shown in the score and agreement tables."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from lifesearch_local.cli import main
from lifesearch_local.judge.config import JudgeConfig, model_name
from lifesearch_local.records import Judgment
from lifesearch_local.run.config import load_judge_configs
from lifesearch_local.rundir.jsonl import read_records
from serving.config import HFConfig, VLLMConfig, model_config
from tests.helpers.inputs import ROOT

ID = re.compile(r"^[A-Za-z0-9._-]+/(choice|generate)/[0-9a-f]{6}$")


def judge(model: str, **kw) -> JudgeConfig:
    fields = set(HFConfig.model_fields) | set(VLLMConfig.model_fields)
    model_kw = {k: kw.pop(k) for k in list(kw) if k in fields}
    return JudgeConfig(model=model_config(model=model, **model_kw), **kw)


def test_derived_ids_name_the_model_and_mode_and_tell_configs_apart(tmp_path, monkeypatch):
    a, b = tmp_path / "a" / "hf", tmp_path / "b" / "hf"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    ja, jb = judge(str(a)), judge(str(b))
    assert ja.id.startswith("a-hf/choice/") and jb.id.startswith("b-hf/choice/") and ja.id != jb.id
    assert ID.match(ja.id) and ja.derived
    monkeypatch.chdir(tmp_path)  # the same directory named relatively is the same judge
    assert judge("a/hf").id == ja.id
    assert judge("Qwen/Qwen3-8B").id.startswith("Qwen3-8B/choice/")
    snap = "/cache/hub/models--Qwen--Qwen3-8B/snapshots/" + "0" * 40
    assert model_name(snap) == "Qwen3-8B"
    base = judge("smollm2-135m")
    assert base.id == judge("smollm2-135m").id and base.id.startswith("smollm2-135m/choice/")
    # where and how fast it runs, and settings the mode ignores, keep the id ...
    same = [judge("smollm2-135m", device="cpu", kernel="two_stage", token_budget=512, runs=3, groups_per_call=1),
            judge("smollm2-135m", max_tokens=64, temperature=0.7, retries=0),  # generate-only settings
            base.updated(model={"device": "cuda"}, runs=5)]
    assert {j.id for j in same} == {base.id}
    # ... anything that can change a verdict gives another one
    other = [judge("smollm2-135m", seed=1), judge("smollm2-135m", dtype="bfloat16"), judge("smollm2-135m", threshold=0.6),
             judge("smollm2-135m", chat_template_kwargs={"enable_thinking": False}), judge("smollm2-135m", backend="vllm"),
             judge("smollm2-135m", mode="generate"), judge("tiny-llama")]
    ids = [j.id for j in other]
    assert len(set(ids)) == len(ids) and base.id not in ids
    assert base.updated(mode="generate").id == judge("smollm2-135m", mode="generate").id
    assert judge("smollm2-135m", mode="generate").id.startswith("smollm2-135m/generate/")
    assert judge("smollm2-135m", mode="generate", temperature=0.7).id != judge("smollm2-135m", mode="generate").id


def test_a_given_id_is_kept_and_yaml_without_one_derives_it(tmp_path):
    given = judge("tiny-llama", id="tiny-llama-choice")
    assert given.id == "tiny-llama-choice" and not given.derived
    assert given.updated(mode="generate").id == "tiny-llama-choice"  # existing configs keep their ids
    y = tmp_path / "j.yaml"
    y.write_text("judges:\n  - model: {model: tiny-llama}\n  - id: mine\n    model: {model: tiny-llama}\n"
                 "  - {mode: generate, model: {model: tiny-llama}}\n")
    ids = [j.id for j in load_judge_configs(y)]
    assert ids == [judge("tiny-llama").id, "mine", judge("tiny-llama", mode="generate").id]


@pytest.fixture(scope="module")
def short_reports(tmp_path_factory) -> Path:
    """One short sample report (sample-en-01's shallow one): keeps each judge run quick."""
    reports = tmp_path_factory.mktemp("reports") / "reports.jsonl"
    lines = (ROOT / "data/sample/reports.jsonl").read_text(encoding="utf-8").splitlines()
    reports.write_text(next(x for x in lines if '"sample-shallow"' in x) + "\n", encoding="utf-8")
    return reports


@pytest.fixture(scope="module")
def two_local_judges(tmp_path_factory, short_reports) -> tuple[Path, list[str]]:
    """The bug report's case: two local model directories both named `hf` judge the same reports."""
    from lifesearch_local.llm.models import tiny_model_dir

    root, reports = tmp_path_factory.mktemp("ids"), short_reports
    dirs = [root / "llama" / "hf", root / "qwen2" / "hf"]
    for d in dirs:  # the same weights twice: only the directories differ
        shutil.copytree(tiny_model_dir("tiny-llama"), d)
    for d in dirs:
        assert main(["judge", "--tasks", str(ROOT / "data/sample/tasks.jsonl"), "--reports", str(reports), "--model",
                     str(d), "--limit", "1", "--out", str(root / "run"), "--quiet"]) == 0
    return root / "run", [judge(str(d)).id for d in dirs]


def test_two_local_judges_get_their_own_ids_in_judgments_and_tables(two_local_judges, capsys, root, monkeypatch):
    monkeypatch.chdir(root)
    run, ids = two_local_judges
    assert ids[0].startswith("llama-hf/choice/") and ids[1].startswith("qwen2-hf/choice/")
    judgments = read_records(run / "judgments.jsonl", Judgment)
    assert {j.judge for j in judgments} == set(ids)
    capsys.readouterr()
    assert main(["score", "--tasks", "data/sample/tasks.jsonl", "--judgments", str(run / "judgments.jsonl"),
                 "--limit", "1"]) == 0
    out = capsys.readouterr().out
    for i in ids:
        assert f"LifeSearch scores — judge {i}" in out
    assert main(["agree", "--tasks", "data/sample/tasks.jsonl", "--judgments", str(run / "judgments.jsonl"),
                 "--labels-from-judgments", str(run / "judgments.jsonl"), "--label-judge", ids[1]]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│ ")]
    assert any(r.split("│")[1].strip() == ids[0] for r in rows)  # the Table 3 row names the judge
    assert "qwen2-hf/choice" in out and "hf-choice" not in out
