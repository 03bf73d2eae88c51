"""`lifesearch run` end to end with scripted models: agent phase, then judge phase, scores, report; resume."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest
import yaml

from lifesearch_local.agent.config import AgentConfig, ToolsConfig
from lifesearch_local.agent.trajectory import trajectory_name
from lifesearch_local.cli import main
from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment, Report
from lifesearch_local.run.config import RunConfig
from lifesearch_local.run.pipeline import prepare_run_dir, run_pipeline
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.lock import LOCK_FILE
from lifesearch_local.rundir.manifest import sha256_file
from lifesearch_local.web.config import SearchConfig, WebConfig
from serving.config import model_config
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.inputs import ROOT

LATER = "https://harborlane.example/news/2026-07-rate-update"


def agent_turns(req):
    n = sum(m["role"] == "assistant" for m in req.messages)
    if n == 0:
        return '<tool_call>{"name": "web_search", "arguments": {"query": "Harbor Lane certificate APY"}}</tool_call>'
    if n == 1:
        calls = [{"name": "web_fetch", "arguments": {"url": u}} for u in ("https://harborlane.example/rates/certificates",
                                                                         "https://nowhere.example/offline")]
        return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)
    return "Harbor Lane's 12-month certificate pays 4.10% APY (as of 30 June 2026)."


def config(tmp_path: Path, **kw) -> RunConfig:
    return RunConfig(
        name="pipeline-test", out=str(tmp_path / "run"), tasks=str(ROOT / "data/sample/tasks.jsonl"),
        task_ids=["sample-en-02", "sample-zh-04"],
        agents=[AgentConfig(id="scripted", model=model_config(model="agent-model"), model_retries=0,
                            tools=ToolsConfig(enabled=["web_search", "web_fetch"], offline=True))],
        web=WebConfig(mode="replay-or-live", corpus_dirs=[ROOT / "data/web"], search=SearchConfig(backend="local")),
        judge=JudgeConfig(id="j", model=model_config(model="judge-model")), **kw)


class Models:
    """open_model stand-in: scripted backends by model name, recording each phase's open and close."""

    def __init__(self, agent=agent_turns):
        self.backends = {"agent-model": ScriptedBackend(agent), "judge-model": ScriptedBackend()}
        self.events: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def __call__(self, model_cfg, ray_cfg):
        self.events.append(("open", model_cfg.model))
        try:
            yield self.backends[model_cfg.model]
        finally:
            self.events.append(("close", model_cfg.model))


def test_the_whole_pipeline_writes_a_complete_run_directory_and_resumes(tmp_path):
    models = Models()
    result = run_pipeline(config(tmp_path), open_model=models, show=False)
    run = tmp_path / "run"
    assert not result.stopped and result.report_html == run / "report.html"
    # One model at a time: the agent's engine is released before the judge's is loaded.
    assert models.events == [("open", "agent-model"), ("close", "agent-model"), ("open", "judge-model"), ("close", "judge-model")]
    assert {p.name for p in run.iterdir()} >= {"config.yaml", "manifest.json", "tasks.jsonl", "reports.jsonl", "trajectories",
                                              "judgments.jsonl", "scores.json", "report.html", "web_cache"}
    rd = RunDir(run)
    reports = rd.load("reports.jsonl", Report)
    assert sorted(r.task_id for r in reports) == ["sample-en-02", "sample-zh-04"] and all(r.iterations == 3 for r in reports)
    judgments = rd.load("judgments.jsonl", Judgment)
    assert len(judgments) == 18 + 19
    scores = json.loads((run / "scores.json").read_text())
    assert set(scores["agents"]) == {"scripted"} and scores["judge"] == "j"
    stages = rd.manifest().stages
    fetch = stages["agent/scripted"]["web"]["fetch"]
    assert fetch["corpus"] == 2 and fetch["live"] == 0 and fetch["failures"] == {"network_error": 2}
    assert stages["judge/j"]["decisions"] == 37 and stages["run"]["wall_s"] > 0
    html = (run / "report.html").read_text()
    assert "network_error" in html  # the report counts the failed fetches from the trajectories
    # The later rate page never reached the agent of a task whose cutoff is 2026-06-30.
    traj = (run / trajectory_name("sample-en-02", "scripted", 0)).read_text()
    assert LATER not in traj and '"ok":true' in traj

    again = Models()
    run_pipeline(config(tmp_path), open_model=again, show=False)
    assert again.events == []  # nothing left to do: no model is loaded
    assert len(rd.load("reports.jsonl", Report)) == 2 and len(rd.load("judgments.jsonl", Judgment)) == 37
    with pytest.raises(LifesearchError, match="different config.yaml"):
        run_pipeline(config(tmp_path, runs=2), open_model=Models(), show=False)


def test_sigterm_in_the_agent_phase_stops_before_judging_and_a_rerun_finishes(tmp_path):
    sent = []

    def preempted(req):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        return agent_turns(req)

    models = Models(agent=preempted)
    result = run_pipeline(config(tmp_path), open_model=models, show=False)
    assert result.stopped and models.events == [("open", "agent-model"), ("close", "agent-model")]
    assert not (tmp_path / "run" / "judgments.jsonl").exists()
    result = run_pipeline(config(tmp_path), open_model=Models(), show=False)
    assert not result.stopped and len(RunDir(tmp_path / "run").load("reports.jsonl", Report)) == 2


def test_task_ids_must_exist(tmp_path):
    with pytest.raises(LifesearchError, match="not-a-task"):
        run_pipeline(config(tmp_path).model_copy(update={"task_ids": ["not-a-task"]}), open_model=Models(), show=False)


def test_sigterm_while_a_model_loads_stops_before_its_phase(tmp_path):
    class SlowLoad(Models):
        @contextlib.contextmanager
        def __call__(self, model_cfg, ray_cfg):
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while "loading"
            with super().__call__(model_cfg, ray_cfg) as backend:
                yield backend

    models = SlowLoad()
    result = run_pipeline(config(tmp_path), open_model=models, show=False)
    assert result.stopped and models.events == [("open", "agent-model"), ("close", "agent-model")]
    assert not (tmp_path / "run" / "reports.jsonl").exists() and models.backends["agent-model"].generate_calls == []


def test_a_run_may_resume_without_ray_but_not_with_other_settings(tmp_path):
    from serving.config import RayConfig

    run_pipeline(config(tmp_path, ray=RayConfig(replicas=2)), open_model=Models(), show=False)
    again = Models()
    run_pipeline(config(tmp_path), open_model=again, show=False)  # same work, in-process now
    assert again.events == []
    changed = config(tmp_path)
    changed.agents[0].max_iterations = 7
    with pytest.raises(LifesearchError, match="different config.yaml"):
        run_pipeline(changed, open_model=Models(), show=False)


def _config(tmp_path) -> RunConfig:
    return RunConfig(out=str(tmp_path / "run"), tasks=str(ROOT / "data/sample/tasks.jsonl"),
                     judge={"id": "j", "model": {"model": "tiny-llama"}})


def test_a_config_yaml_of_an_earlier_version_is_refused_in_one_line(tmp_path, capsys):
    cfg = _config(tmp_path)
    prepare_run_dir(cfg)
    path = tmp_path / "run" / "config.yaml"
    old = yaml.safe_load(path.read_text())
    old["judge"]["model"]["tensor_parallel_size"] = 1  # one flat model block held every backend's fields
    path.write_text(yaml.safe_dump(old))
    with pytest.raises(LifesearchError, match=r"config.yaml does not load in this version.*judge\.model\.tensor_parallel_size.*--fresh"):
        prepare_run_dir(cfg)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    capsys.readouterr()
    assert main(["run", "--config", str(tmp_path / "run.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "--fresh" in err, err


SAMPLE = ROOT / "data" / "sample"


def judge_only(tmp_path: Path) -> RunConfig:
    """The sample reports judged by a scripted judge: no agent, labels given."""
    return RunConfig(name="open-run", out=str(tmp_path / "run"), tasks=str(SAMPLE / "tasks.jsonl"),
                     task_ids=["sample-en-02"], reports=str(SAMPLE / "reports.jsonl"), labels=str(SAMPLE / "labels.jsonl"),
                     judge=JudgeConfig(id="j", model=model_config(model="judge-model")))


@contextlib.contextmanager
def scripted(model_cfg, ray_cfg):
    yield ScriptedBackend()


@contextlib.contextmanager
def broken_k(model_cfg, ray_cfg):
    """Judge model `k-model` fails to load; the others are scripted."""
    if model_cfg.model == "k-model":
        raise RuntimeError("the judge model did not load")
    yield ScriptedBackend()


def test_the_run_directory_is_locked_as_the_command_and_its_sources_are_hashed(tmp_path):
    cfg = judge_only(tmp_path)
    result = run_pipeline(cfg, command="demo", open_model=scripted, show=False)
    run = Path(result.run_dir)
    manifest = json.loads((run / "manifest.json").read_text())
    for name, src in (("tasks_source", cfg.tasks), ("reports_source", cfg.reports), ("labels_source", cfg.labels)):
        assert manifest["hashes"][name] == sha256_file(src)
        assert manifest["inputs"][name] == str(Path(src).resolve())
    assert manifest["hashes"]["tasks"] == sha256_file(run / "tasks.jsonl")  # the run's own copy, filtered
    assert json.loads((run / LOCK_FILE).read_text())["command"] == "demo"
    assert result.scores and (run / "judgments.jsonl").is_file()


def test_a_first_run_that_fails_leaves_no_directory_unless_it_wrote_work(tmp_path):
    cfg = judge_only(tmp_path).model_copy(update={"judge": JudgeConfig(id="k", model=model_config(model="k-model"))})
    with pytest.raises(RuntimeError, match="did not load"):
        run_pipeline(cfg, open_model=broken_k, show=False)
    assert not Path(cfg.out_dir()).exists()  # a rerun must not take a half-written directory for progress
    cfg = cfg.model_copy(update={"judge": JudgeConfig(id="j", model=model_config(model="judge-model")),
                                 "judges": [JudgeConfig(id="k", model=model_config(model="k-model"))]})
    with pytest.raises(RuntimeError, match="did not load"):  # judge j wrote its judgments, then k failed
        run_pipeline(cfg, open_model=broken_k, show=False)
    assert (Path(cfg.out_dir()) / "judgments.jsonl").is_file()


def test_labels_of_other_tasks_are_left_out_and_damaged_lines_kept_for_the_loader(tmp_path):
    from lifesearch_local.run.pipeline import _copy_labels

    deep, not_utf8 = b"[" * 100_000 + b"]" * 100_000 + b"\n", b'{"task_id": "t1", "x": "\xff"}\n'
    src = tmp_path / "labels.jsonl"
    src.write_bytes(b'{"task_id": "t1"}\n{"task_id": "t2"}\n' + deep + not_utf8)
    _copy_labels(src, tmp_path / "copy.jsonl", {"t1"})
    assert (tmp_path / "copy.jsonl").read_bytes() == b'{"task_id": "t1"}\n' + deep + not_utf8
