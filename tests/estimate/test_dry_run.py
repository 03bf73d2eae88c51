"""The estimate's counts against what the run then does: agent runs, decisions per judge and repetition,
ReportEval records and decisions, the pending work of a resumed run; the manifest's estimate and actual."""

from __future__ import annotations

import contextlib
import json
from collections import Counter

import pytest

from lifesearch_local.agent.config import AgentConfig, ToolsConfig
from lifesearch_local.estimate.dry_run import estimate_judge, estimate_run
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment, Report
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.records import ReportEvaluation
from lifesearch_local.run.config import RunConfig
from lifesearch_local.run.pipeline import run_pipeline
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from serving.config import model_config
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.inputs import SAMPLE

REPORT = "# Title\n\n## First part\nSome text here.\n\n## Second part\nMore text.\n\n## Third part\nAnd more.\n"


class Models:
    """open_model stand-in: a scripted agent that answers at once, a scripted judge."""

    def __init__(self):
        self.backends = {"agent-model": ScriptedBackend(lambda req: REPORT), "judge-model": ScriptedBackend()}

    @contextlib.contextmanager
    def __call__(self, model_cfg, ray_cfg):
        yield self.backends[model_cfg.model]


def config(tmp_path, **kw) -> RunConfig:
    judge = JudgeConfig(id="j", model=model_config(model="judge-model"), runs=2, groups_per_call=3)
    agent = AgentConfig(id="a", model=model_config(model="agent-model"), tools=ToolsConfig(enabled=[]))
    base = {"name": "est", "out": str(tmp_path / "run"), "tasks": str(SAMPLE / "tasks.jsonl"),
            "task_ids": ["sample-en-01", "sample-en-02", "sample-zh-04"], "runs": 2, "agents": [agent], "judge": judge,
            "reporteval": ReportEvalConfig(metrics=["quality", "redundancy"], max_pairs=2)}
    return RunConfig(**{**base, **kw})


def test_the_counts_are_what_the_run_then_does(tmp_path):
    cfg = config(tmp_path)
    est = estimate_run(cfg, calibrate="never", local_only=True)
    assert not (tmp_path / "run").exists()  # an estimate creates nothing
    run_pipeline(cfg, open_model=Models(), show=False)
    rd = RunDir(tmp_path / "run")
    reports, judgments = rd.load("reports.jsonl", Report), rd.load("judgments.jsonl", Judgment)
    agent, judge = est.phases["agent/a"], est.phases["judge/j"]
    assert agent.runs == len(reports) == 6
    per_run = Counter(j.judge_run for j in judgments)
    assert judge.decisions_per_repetition == [per_run[0], per_run[1]] and judge.decisions == len(judgments)
    evals = rd.load("reporteval.jsonl", ReportEvaluation)
    assert est.phases["reporteval/j"].records == len(evals) == 12
    # unwritten reports: quality's 5 dimensions each, redundancy assumed to find no sections (said so)
    assert est.phases["reporteval/j"].decisions == 30
    assert any("not yet written" in a for a in est.phases["reporteval/j"].assumptions)
    block = json.loads((tmp_path / "run" / "manifest.json").read_text())["estimate"]
    assert block["estimate"]["phases"]["judge/j"]["decisions"] == len(judgments)
    assert block["actual"]["phases"]["judge/j"]["decisions"] == len(judgments)
    assert block["actual"]["phases"]["agent/a"]["runs"] == 6 and block["actual"]["run_seconds"] > 0


def test_reports_on_disk_give_exact_reporteval_counts_too(tmp_path):
    # existing reports (`reports:`): redundancy's sampled pairs come from their real sections
    cfg = config(tmp_path, agents=[], reports=str(SAMPLE / "reports.jsonl"))
    est = estimate_run(cfg, calibrate="never", local_only=True)
    run_pipeline(cfg, open_model=Models(), show=False)
    stages = RunDir(tmp_path / "run").manifest().stages
    re = stages["reporteval/j"]
    assert est.phases["reporteval/j"].decisions == re["quality"]["decisions"] + re["redundancy"]["decisions"] > 0
    assert est.phases["judge/j"].decisions == stages["judge/j"]["decisions"]


def test_a_resumed_run_counts_only_what_is_left(tmp_path):
    cfg = config(tmp_path)
    run_pipeline(cfg, open_model=Models(), show=False, phases=("agent",))
    est = estimate_run(cfg, calibrate="never", local_only=True)
    assert est.phases["agent/a"].runs == 0 and est.phases["agent/a"].seconds.estimate == 0  # no model loaded
    assert est.phases["judge/j"].decisions > 0
    assert est.phases["reporteval/j"].decisions > 30  # the written reports have sections: real pairs now
    run_pipeline(cfg, open_model=Models(), show=False)
    after = estimate_run(cfg, calibrate="never", local_only=True)
    assert after.phases["judge/j"].decisions == 0 and after.phases["reporteval/j"].records == 0
    assert estimate_run(cfg, calibrate="never", local_only=True, fresh=True).phases["agent/a"].runs == 6


def test_the_judge_estimate_counts_each_judge_and_repetition(tmp_path):
    tasks = load_tasks(SAMPLE / "tasks.jsonl")
    reports = read_records(SAMPLE / "reports.jsonl", Report)[:5]
    judges = [JudgeConfig(id="x", model=model_config(model="judge-model"), runs=3),
              JudgeConfig(id="y", model=model_config(model="judge-model"))]
    est = estimate_judge(None, tasks, reports, judges, calibrate="never", local_only=True)
    by_id = {t.id: t for t in tasks}
    one = sum(sum(r.weight > 0 for r in by_id[rep.task_id].rubrics) for rep in reports)
    assert est.phases["judge/x"].decisions_per_repetition == [one] * 3 and est.phases["judge/y"].decisions == one
    assert est.command == "judge" and est.phases["judge/x"].seconds is None  # no profile, no calibration
    assert est.total_seconds is None and est.phases["judge/x"].tokens is None  # no tokenizer for a stand-in


@pytest.mark.parametrize("kernel", ["shared", "two_stage"])
def test_tokens_are_the_kernels_own_on_real_reports(tmp_path, kernel):
    # the real tokenizer on the real prompts: the judge then computes exactly these tokens
    from lifesearch_local.judge.stage import judge_stage

    tasks = load_tasks(SAMPLE / "tasks.jsonl")
    reports = read_records(SAMPLE / "reports.jsonl", Report)[:2]
    judge = JudgeConfig(id="t", model=model_config(model="tiny-llama", device="cpu", kernel=kernel, token_budget=2000),
                        groups_per_call=1)
    est = estimate_judge(None, tasks, reports, [judge], calibrate="never", local_only=True)
    rd = RunDir(tmp_path / "out")
    stats = judge_stage(rd, tasks, reports, judge, show=False)
    assert est.phases["judge/t"].tokens == stats["forward_tokens"]
    assert est.phases["judge/t"].prompt_tokens == stats["prompt_tokens"]
    assert est.phases["judge/t"].decisions == stats["decisions"]
    assert est.memory.needed_gib > 0 and est.memory.fits is True


def test_a_busy_machine_widens_the_cpu_phases_high_ends(monkeypatch):
    from lifesearch_local.estimate.cost import PhaseEstimate, Seconds
    from lifesearch_local.estimate.dry_run import _widen_for_load
    from serving._util import threads

    monkeypatch.setattr(threads, "read_limits", lambda env=None, reserved=None: threads.CpuLimits(2, None, None))
    phases = {n: PhaseEstimate(kind="judge", model="m", seconds=Seconds(estimate=10.0, low=8.0, high=12.0))
              for n in ("judge/cpu", "judge/endpoint")}
    monkeypatch.setattr(threads, "_loadavg", lambda: "0.20 0.20 0.20 1/300 9")
    notes: list[str] = []
    assert _widen_for_load(phases, {"judge/cpu"}, notes) is None and phases["judge/cpu"].seconds.high == 12.0
    monkeypatch.setattr(threads, "_loadavg", lambda: "1.00 0.50 0.20 2/300 9")  # one hog beside 2 threads on 2 CPUs
    line = _widen_for_load(phases, {"judge/cpu"}, notes)
    assert line is not None and line.startswith("machine busy")
    assert phases["judge/cpu"].seconds.high == 24.0 and phases["judge/cpu"].seconds.estimate == 10.0
    assert phases["judge/endpoint"].seconds.high == 12.0  # computed elsewhere: this machine's load is not its
    assert notes == ["the high ends of CPU phases are widened 2× for the load now"]


def test_a_gpu_config_on_a_machine_without_one_is_priced_on_a_stated_device(tmp_path, monkeypatch):
    from lifesearch_local.estimate import cost, dry_run
    from lifesearch_local.estimate.devices import GpuAssumption
    from lifesearch_local.run.config import load_run_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # the model is nowhere here: the built-in shape
    for module in (cost, dry_run):  # as on a machine without a GPU
        monkeypatch.setattr(module, "_cuda", lambda: False)
    cfg = load_run_config("configs/single_gpu.yaml").model_copy(update={"out": str(tmp_path / "run")})
    est = estimate_run(cfg, calibrate="auto")
    assert est.device is not None and est.device["label"] == "NVIDIA H100 SXM5 80GB" and est.device["mfu"] == 0.35
    for p in est.phases.values():
        assert p.seconds is not None and 0 < p.seconds.low < p.seconds.estimate < p.seconds.high
        assert p.gpus == 1.0 and p.gpu_hours == round(p.seconds.estimate / 3600, 4) and p.tokens > 0
        assert p.basis == "analytic, on the assumed NVIDIA H100 SXM5 80GB"
    assert est.total_low_seconds < est.total_seconds < est.total_high_seconds and est.gpu_hours > 0
    assert est.memory.fits is True and est.memory.device == "NVIDIA H100 SXM5 80GB (assumed)"
    judge = est.phases["judge/qwen3-8b-choice"]
    slower = estimate_run(cfg, calibrate="auto", gpu=GpuAssumption("a10", 0.35)).phases["judge/qwen3-8b-choice"]
    assert slower.tokens == judge.tokens and slower.seconds.estimate > judge.seconds.estimate  # an A10's 125 TFLOP/s
    assert not (tmp_path / "run").exists()


def test_repetitions_with_nothing_done_are_counted_not_enumerated(tmp_path):
    from lifesearch_local.estimate.plan import judge_plan
    from lifesearch_local.estimate.work import Arch, Shape

    tasks = load_tasks(SAMPLE / "tasks.jsonl")
    reports = read_records(SAMPLE / "reports.jsonl", Report)[:3]
    arch = Arch(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=1000, tied=True)
    shape = Shape(tokenizer=None, arch=arch, limit=None, device="cuda", form="two_stage")
    one = judge_plan(JudgeConfig(id="x", model=model_config(model="m")), tasks, reports, set(), shape)
    # repetition 1 half done: it is planned on its own; the other 998 are the first one's work again
    j = one.calls[0][0]
    done = {("x", 1, reports[0].task_id, reports[0].agent, reports[0].run, r.id)
            for r in next(t for t in tasks if t.id == reports[0].task_id).rubrics}
    many = judge_plan(JudgeConfig(id="x", model=model_config(model="m"), runs=1000), tasks, reports, done, shape)
    assert len(many.calls) == 2 * len(one.calls) and many.repeats[: len(one.calls)] == [999] * len(one.calls)
    assert many.per_repetition[0] == many.per_repetition[2] == many.per_repetition[999] == one.decisions
    assert many.per_repetition[1] < one.decisions and many.decisions == 999 * one.decisions + many.per_repetition[1]
    assert sum(n * u.flops for call, n in many.weighted() for u in call) > 999 * j.flops


def test_more_agent_runs_than_an_estimate_plans_are_refused_in_one_line(tmp_path, monkeypatch):
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.estimate import dry_run

    monkeypatch.setattr(dry_run, "MAX_AGENT_RUNS", 50)
    cfg = RunConfig(name="x", out=str(tmp_path / "run"), tasks=str(SAMPLE / "tasks.jsonl"), runs=6,
                    agents=[AgentConfig(id="a", model=model_config(model="tiny-qwen3"))])
    with pytest.raises(LifesearchError, match=r"^estimate: 10 task\(s\) × 6 run\(s\) × 1 agent\(s\) = 60 agent runs, "
                                              r"more than the 50 an estimate plans; lower `runs` or select tasks$"):
        estimate_run(cfg, calibrate="never")


def test_a_recorded_estimate_goes_in_first_and_what_the_block_took_beside_it_last(tmp_path):
    # a block that raises records no actual figures; an estimate that cannot be made records nothing,
    # and the work it describes still runs
    from lifesearch_local.estimate.dry_run import recorded_estimate

    tasks = load_tasks(SAMPLE / "tasks.jsonl")
    reports = read_records(SAMPLE / "reports.jsonl", Report)[:5]
    judges = [JudgeConfig(id="x", model=model_config(model="judge-model"))]
    by_id = {t.id: t for t in tasks}
    decisions = sum(sum(r.weight > 0 for r in by_id[rep.task_id].rubrics) for rep in reports)

    def manifest(rd: RunDir) -> dict:
        p = rd.file("manifest.json")
        return json.loads(p.read_text()) if p.exists() else {}

    def made(rd: RunDir):
        return lambda: estimate_judge(rd, tasks, reports, judges, calibrate="never", local_only=True)

    rd = RunDir(tmp_path / "done")
    with recorded_estimate(rd, "judge", made(rd)) as took:
        block = manifest(rd)["estimate"]
        assert block["actual"] is None and block["estimate"]["phases"]["judge/x"]["decisions"] == decisions
        took["judge/x"] = {"decisions": 7, "wall_s": 1.5}
    actual = manifest(rd)["estimate"]["actual"]
    assert actual["phases"]["judge/x"] == {"seconds": 1.5, "decisions": 7, "runs": None, "tokens": None}
    assert "run_seconds" in actual

    failed = RunDir(tmp_path / "failed")
    with pytest.raises(RuntimeError, match="stage failed"), recorded_estimate(failed, "judge", made(failed)) as took:
        took["judge/x"] = {"decisions": 3, "wall_s": 0.5}
        raise RuntimeError("stage failed")
    assert manifest(failed)["estimate"]["actual"] is None

    def cannot() -> None:
        raise ValueError("no profile")

    ran, none = [], RunDir(tmp_path / "none")
    with recorded_estimate(none, "judge", cannot) as took:  # type: ignore[arg-type]
        ran.append(True)
    assert ran == [True] and "estimate" not in manifest(none)
