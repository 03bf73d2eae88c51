"""The resume guard's refusals of what an earlier version wrote: one line, naming a fresh directory."""

from __future__ import annotations

import json

import pytest
from conftest import rubric, task, write_jsonl
from doubles import ScriptedBackend

from lifesearch_local.cli import main
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import ConfigChanged
from serving.config import HFConfig


def _inputs() -> tuple[list[Task], list[Report]]:
    tasks = [Task.model_validate(task("t0", [rubric("R0", 0.5), rubric("R1", 0.5)]))]
    return tasks, [Report(task_id="t0", agent="a", text="Report on t0.")]


def test_a_stage_config_recorded_with_settings_this_version_lacks_is_refused(tmp_path, capsys):
    rd, (tasks, reports) = RunDir(tmp_path), _inputs()
    cfg = JudgeConfig(id="j", model=HFConfig(model="tiny-llama"))
    judge_stage(rd, tasks, reports, cfg, ScriptedBackend(), show=False)
    manifest = json.loads(rd.file("manifest.json").read_text())
    manifest["stage_configs"]["judge/j"]["model"]["kv_cache_gib"] = None  # the flat model block of an earlier version
    rd.file("manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigChanged, match=r"another version of lifesearch.*model\.kv_cache_gib.*fresh directory"):
        judge_stage(rd, tasks, reports, cfg, ScriptedBackend(), show=False)
    # --force-config adds to them anyway, and says so
    assert judge_stage(rd, tasks, reports, cfg, ScriptedBackend(), show=False, force_config=True)["decisions"] == 0
    assert "--force-config: judge/j" in capsys.readouterr().err


def test_another_backend_is_a_config_change_not_another_version(tmp_path):
    rd, (tasks, reports) = RunDir(tmp_path), _inputs()
    judge_stage(rd, tasks, reports, JudgeConfig(id="j", model=HFConfig(model="tiny-llama")), ScriptedBackend(), show=False)
    vllm = JudgeConfig.model_validate({"id": "j", "model": {"backend": "vllm", "model": "tiny-llama"}})
    with pytest.raises(ConfigChanged, match="give the new config its own id") as e:
        judge_stage(rd, tasks, reports, vllm, ScriptedBackend(), show=False)
    assert "another version" not in str(e.value)


def test_judgments_without_a_settings_hash_are_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task("t0", [rubric("R0", 0.5), rubric("R1", 0.5)])])
    reports = write_jsonl(tmp_path / "reports.jsonl", [{"task_id": "t0", "agent": "a", "text": "Report on t0."}])
    old = Judgment(task_id="t0", agent="a", rubric_id="R0", judge="j", satisfied=True)  # no settings: an earlier version's
    (out / "judgments.jsonl").write_text(old.model_dump_json() + "\n")
    args = ["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "tiny-llama", "--id", "j",
            "--out", str(out), "--quiet"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "1 record(s) without a settings hash" in err and "fresh directory" in err
    assert (out / "judgments.jsonl").read_text().count("\n") == 1  # nothing added
