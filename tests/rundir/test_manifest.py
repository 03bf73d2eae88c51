"""The manifest and the resume guard: merged updates, located damage, other settings refused on resume."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import ConfigChanged
from serving.config import HFConfig
from tests.helpers.cli import cli_process, judge_sample_args, run_cli
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.inputs import judge_inputs, rubric, task, write_jsonl
from tests.helpers.judging import judge_config, tiny_inputs, two_rubric_inputs
from tests.helpers.report_runs import make_run_dir

# -- a damaged or lost manifest -------------------------------------------------------------------------------

def test_a_deeply_nested_manifest_is_a_clear_error_in_judge_and_set_aside_by_repair(tmp_path, capsys):
    tasks, reports = judge_inputs(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text('{"stages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run_cli(["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "tiny-llama",
                            "--out", str(out), "--quiet"], capsys)
    assert code == 2 and "manifest.json" in err and "nested" in err and "Traceback" not in err, err
    code, stdout, err = run_cli(["repair", str(out)], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert not (out / "manifest.json").exists() and list(out.glob("manifest.json.corrupt-*"))


@pytest.mark.parametrize("how", ["repair", "deleted"])
def test_resume_with_other_settings_after_the_manifest_is_lost_is_refused(tmp_path, capsys, how):
    rd = RunDir(tmp_path / "run")
    tasks, reports = two_rubric_inputs()
    judge_stage(rd, tasks[:1], reports[:1], judge_config("tiny-llama", "X"), ScriptedBackend(), show=False)
    if how == "repair":
        rd.file("manifest.json").write_text("{broken")
        assert main(["repair", str(rd.path)]) == 0
    else:
        rd.file("manifest.json").unlink()
    assert not rd.file("manifest.json").exists()
    before = rd.file("judgments.jsonl").read_bytes()
    with pytest.raises(ConfigChanged, match="as the records themselves say"):
        judge_stage(rd, tasks[:2], reports[:2], judge_config("tiny-qwen3", "X"), ScriptedBackend(), show=False)
    assert rd.file("judgments.jsonl").read_bytes() == before
    # the same settings resume; --force-config mixes them, once, and says so
    assert judge_stage(rd, tasks[:2], reports[:2], judge_config("tiny-llama", "X"), ScriptedBackend(), show=False)["decisions"] == 2
    stats = judge_stage(rd, tasks, reports, judge_config("tiny-qwen3", "X"), ScriptedBackend(), show=False, force_config=True)
    assert stats["decisions"] == 2 and "--force-config" in capsys.readouterr().err
    assert judge_stage(rd, tasks, reports, judge_config("tiny-qwen3", "X"), ScriptedBackend(), show=False)["decisions"] == 0


def test_manifest_merges(tmp_path):
    rd = RunDir(tmp_path)
    m = rd.update_manifest(hashes={"tasks": "abc"}, seeds={"judge": 1})
    assert m.package_version and m.python
    rd.update_manifest(hashes={"prompts/judge_en": "def"}, stage=("judge", {"decisions": 10}))
    rd.update_manifest(stage=("judge", {"wall_s": 2.0}))
    data = json.loads(rd.file("manifest.json").read_text())
    assert data["hashes"] == {"tasks": "abc", "prompts/judge_en": "def"}
    assert data["seeds"] == {"judge": 1}
    assert data["stages"]["judge"] == {"decisions": 10, "wall_s": 2.0}
    assert data["created"] <= data["updated"]


def test_the_nodes_of_a_resumed_stage_add_up_over_its_invocations(tmp_path):
    """A stage stopped and resumed: its records came from both invocations' nodes, so `nodes`
    adds up node by node and `replicas_lost` keeps every loss; other figures are the latest."""
    rd = RunDir(tmp_path)
    head, worker = {"hostname": "head", "ip": "10.0.0.1"}, {"hostname": "worker", "ip": "10.0.0.2"}
    lost = {"replica": "judge-1", **worker, "error": "ActorDiedError: node died"}
    rd.update_manifest(stage=("judge", {"decisions": 30, "replicas_lost": [lost], "nodes": [
        {**head, "replicas": 1, "records": 20, "failures": 0}, {**worker, "replicas": 1, "records": 10, "failures": 1}]}))
    rd.update_manifest(stage=("judge", {"decisions": 12, "replicas_lost": [], "nodes": [
        {**head, "replicas": 2, "records": 12, "failures": 0}]}))
    stage = json.loads(rd.file("manifest.json").read_text())["stages"]["judge"]
    assert stage == {"decisions": 12, "replicas_lost": [lost], "nodes": [
        {**head, "replicas": 3, "records": 32, "failures": 0}, {**worker, "replicas": 1, "records": 10, "failures": 1}]}


def test_another_model_under_the_same_judge_id_is_refused(tmp_path, capsys):
    rd = RunDir(tmp_path)
    tasks, reports = tiny_inputs()
    judge_stage(rd, tasks, reports, judge_config("tiny-llama"), ScriptedBackend(), show=False)
    before = rd.file("judgments.jsonl").read_bytes()
    with pytest.raises(ConfigChanged, match=r"judge/j has records made with another config \(hash (\w+), now (\w+): "
                       r'model.model "tiny-llama" -> "tiny-qwen2"\).*--force-config'):
        judge_stage(rd, tasks, reports, judge_config("tiny-qwen2"), ScriptedBackend(), show=False)
    assert rd.manifest().stage_configs["judge/j"]["model"]["model"] == "tiny-llama"  # not rewritten
    # where and how fast it runs is not what it computes
    stats = judge_stage(rd, tasks, reports, judge_config("tiny-llama", groups_per_call=3, model_kw={"device": "cpu"}),
                        ScriptedBackend(), show=False)
    assert stats["decisions"] == 0 and rd.file("judgments.jsonl").read_bytes() == before
    # more reports under the old id with the new model only when asked, and said
    more_tasks, more = tiny_inputs(3)
    stats = judge_stage(rd, more_tasks, more, judge_config("tiny-qwen2"), ScriptedBackend(), show=False, force_config=True)
    assert stats["decisions"] == 3 and "--force-config: judge/j" in capsys.readouterr().err
    assert rd.manifest().stage_configs["judge/j"]["model"]["model"] == "tiny-qwen2"
    # a new id is a new judge
    assert judge_stage(rd, tasks, reports, judge_config("tiny-mistral", "k"), ScriptedBackend(), show=False)["decisions"] == 6


def test_judge_cli_refuses_another_model_under_the_same_id(tmp_path):
    out = tmp_path / "run"
    first = cli_process(judge_sample_args(out, "--model", "tiny-llama", "--id", "j"))
    assert first.returncode == 0, first.stderr
    again = cli_process(judge_sample_args(out, "--model", "tiny-qwen2", "--id", "j"))
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "judge/j has records made with another config (hash" in again.stderr
    assert 'model.model "tiny-llama" -> "tiny-qwen2"' in again.stderr
    assert json.loads((out / "manifest.json").read_text())["stages"]["judge/j"]["model"] == "tiny-llama"


@pytest.mark.parametrize(("text", "where"), [
    ('{"package_version": "0.1",\n "python": "3.11", oops}', r"manifest.json:2: malformed JSON"),
    ('{"package_version": 1, "python": "3", "created": "x", "updated": "y"}', r"manifest.json: package_version: "),
    ("[1, 2]", r"manifest.json: expected a JSON object, got list"),
])
def test_a_damaged_manifest_is_a_located_error(tmp_path, capsys, text, where):
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text(text)
    with pytest.raises(InputError, match=where):
        RunDir(out).manifest()
    assert main(judge_sample_args(out, "--model", "tiny-llama")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json" in err and f"lifesearch repair {out}" in err


DAMAGED = {"deep": ('{"stages": ' + "[" * 100_000 + "]" * 100_000 + "}").encode(),
           "huge integer": b'{"stages": {"judge/j": {"decisions": ' + b"9" * 5000 + b"}}}",
           "not UTF-8": b'{"git_sha": "\xff"}'}
READERS = {"score": lambda run: ["score", "--tasks", str(run / "tasks.jsonl"), "--judgments", str(run / "judgments.jsonl")],
           "agree": lambda run: ["agree", "--tasks", str(run / "tasks.jsonl"), "--judgments", str(run / "judgments.jsonl"),
                                 "--labels", str(run / "labels.jsonl")],
           "agree --disagreements": lambda run: ["agree", "--tasks", str(run / "tasks.jsonl"), "--judgments",
                                                 str(run / "judgments.jsonl"), "--labels", str(run / "labels.jsonl"),
                                                 "--disagreements"],
           "report": lambda run: ["report", str(run)]}


@pytest.mark.parametrize("damage", list(DAMAGED))
@pytest.mark.parametrize("command", list(READERS))
def test_commands_reading_a_damaged_manifest_beside_the_judgments_say_so_in_one_line(tmp_path, capsys, command, damage):
    run = make_run_dir(tmp_path / "run")
    (run / "manifest.json").write_bytes(DAMAGED[damage])
    code, out, err = run_cli(READERS[command](run), capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{run / 'manifest.json'}" in err and f"lifesearch repair {run}" in err and "Traceback" not in err


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
