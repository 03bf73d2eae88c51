"""The judge stage: choice and generate modes, resume, empty reports, edited rubrics, progress."""

from __future__ import annotations

import contextlib
import math
import signal
from pathlib import Path

import pytest

import lifesearch_local.judge.stage as judging
from lifesearch_local.analysis.scoring import score_by_judge
from lifesearch_local.cli import main
from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.rubric import PREFILL
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.llm.models import engine_config
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import ConfigChanged
from serving.config import model_config
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.inputs import rubric, task, write_jsonl
from tests.helpers.judging import REPORTS, TASKS, judge_config, tiny_inputs, two_rubric_inputs
from tests.helpers.terminal import Terminal


def test_choice_mode_records_p_true_and_threshold(tmp_path):
    backend = ScriptedBackend(p_true_fn=lambda key, i, req: {0: 0.8, 1: 0.49}[i])
    cfg = JudgeConfig(id="j", threshold=0.5)
    rd = RunDir(tmp_path)
    stats = judge_stage(rd, TASKS, REPORTS, cfg, backend, show=False)
    js = rd.load("judgments.jsonl", Judgment)
    assert stats["decisions"] == len(js) == 2 * 2 + 2 * 1  # R3 has zero weight: not judged
    by = {(j.task_id, j.agent, j.rubric_id): j for j in js}
    assert by[("en1", "good", "R1")].p_true == pytest.approx(0.8) and by[("en1", "good", "R1")].satisfied
    assert by[("en1", "good", "R2")].satisfied is False and by[("en1", "good", "R2")].p_true == pytest.approx(0.49)
    req = backend.choice_calls[0][0].requests[0]
    assert req.prefill == PREFILL == '{"satisfied": ' and req.messages[0]["role"] == "user"
    assert all(j.prompt_hash and j.judge == "j" for j in js)
    m = rd.manifest()
    assert "prompts/judge_en" in m.hashes and m.stages["judge/j"]["decisions"] == 6


def test_generate_mode_retries_then_ungraded(tmp_path):
    # R1 of every report answers garbage once then valid JSON; everything else stays garbage.
    seen: dict[str, int] = {}

    def reply(req):
        key = req.messages[0]["content"]
        seen[key] = seen.get(key, 0) + 1
        if "state R1." in key and seen[key] == 2:
            return '{"satisfied": true, "reason": "found"}'
        return "I think it is fine."

    backend = ScriptedBackend(reply)
    cfg = JudgeConfig(id="g", mode="generate", retries=2)
    rd = RunDir(tmp_path)
    judge_stage(rd, TASKS[:1], REPORTS[:2], cfg, backend, show=False)
    js = {(j.agent, j.rubric_id): j for j in rd.load("judgments.jsonl", Judgment)}
    assert js[("good", "R1")].satisfied is True and js[("good", "R1")].reason == "found"
    assert js[("good", "R2")].satisfied is None and "ungraded" in js[("good", "R2")].reason
    assert js[("good", "R2")].raw == "I think it is fine."
    assert len(backend.generate_calls) == 3  # one try + two retries, then stop
    assert max(seen.values()) == 3
    assert [len(c) for c in backend.generate_calls] == [4, 4, 2]  # retries only what failed


def test_resume_judges_only_what_is_missing(tmp_path):
    rd = RunDir(tmp_path)
    cfg = JudgeConfig(id="j", groups_per_call=1)

    class Boom(ScriptedBackend):
        def score_choices(self, groups, choices):
            if len(self.choice_calls) == 2:
                raise KeyboardInterrupt  # a kill after two reports were written
            return super().score_choices(groups, choices)

    with pytest.raises(KeyboardInterrupt):
        judge_stage(rd, TASKS, REPORTS, cfg, Boom(), show=False)
    assert len(rd.load("judgments.jsonl", Judgment)) == 4  # two en1 reports × 2 rubrics
    again = ScriptedBackend()
    judge_stage(rd, TASKS, REPORTS, cfg, again, show=False)
    js = rd.load("judgments.jsonl", Judgment)
    assert len(js) == len({j.key for j in js}) == 6
    assert sum(len(g.requests) for call in again.choice_calls for g in call) == 2  # only the zh1 reports
    judge_stage(rd, TASKS, REPORTS, cfg, None, show=False)  # nothing left: no model is even loaded


def test_unknown_task_in_reports_is_an_error(tmp_path):
    with pytest.raises(LifesearchError, match="not in the tasks file: zz"):
        judge_stage(RunDir(tmp_path), TASKS, [Report(task_id="zz", agent="a", text="t")], JudgeConfig(id="j"),
                    ScriptedBackend(), show=False)


def test_judge_runs_repeat(tmp_path):
    rd = RunDir(tmp_path)
    judge_stage(rd, TASKS, REPORTS, JudgeConfig(id="j", runs=3), ScriptedBackend(), show=False)
    js = rd.load("judgments.jsonl", Judgment)
    assert sorted({j.judge_run for j in js}) == [0, 1, 2] and len(js) == 18


class SignalsWithCall(ScriptedBackend):
    """Delivers SIGTERM, through the handler the stage installed, while answering call number `at`."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def score_choices(self, groups, choices):
        out = super().score_choices(groups, choices)
        if len(self.choice_calls) == self.at:
            handler = signal.getsignal(signal.SIGTERM)
            if not callable(handler):
                pytest.skip("the stage installs no SIGTERM handler outside the main thread")
            handler(signal.SIGTERM, None)
        return out


def test_a_signal_during_the_last_report_leaves_a_finished_stage_not_a_stopped_one(tmp_path):
    """SIGTERM while the last report is judged: every record is then written, so the stage is finished,
    not `stopped_early`, which makes `judge` say "rerun the same command to finish"."""
    rd = RunDir(tmp_path)
    stats = judge_stage(rd, TASKS, REPORTS, JudgeConfig(id="j", groups_per_call=1), SignalsWithCall(len(REPORTS)),
                        show=False)
    assert stats["decisions"] == len(rd.load("judgments.jsonl", Judgment)) == 6
    assert stats["stopped_early"] is False and rd.manifest().stages["judge/j"]["stopped_early"] is False


def test_a_signal_before_a_judge_run_begins_stops_the_stage_there(tmp_path):
    """With the first of two judge runs written when SIGTERM comes, the second is not begun: stopped, with work left."""
    rd = RunDir(tmp_path)
    stats = judge_stage(rd, TASKS, REPORTS, JudgeConfig(id="j", runs=2, groups_per_call=1),
                        SignalsWithCall(len(REPORTS)), show=False)
    assert stats["stopped_early"] is True
    assert {j.judge_run for j in rd.load("judgments.jsonl", Judgment)} == {0} and stats["decisions"] == 6


# -- a rubric edited after judging ----------------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [("criterion", "Names the CEO."), ("priority", "Nice to Have"), ("question", "Other?")])
def test_verdicts_on_an_edited_rubric_are_refused_not_kept(tmp_path, field, value):
    rd = RunDir(tmp_path / "run")
    tasks, reports = two_rubric_inputs(2)
    judge_stage(rd, tasks, reports, judge_config("tiny-llama", "X"), ScriptedBackend(), show=False)
    edited = [t.model_copy(deep=True) for t in tasks]
    if field == "question":
        edited[1].question = value
    else:
        setattr(edited[1].rubrics[0], field, value)
    with pytest.raises(ConfigChanged, match=r"changed since they were judged \(t1/R0"):
        judge_stage(rd, edited, reports, judge_config("tiny-llama", "X"), ScriptedBackend(), show=False)
    # a weight is not in what the judge reads: its verdicts stand, scoring uses the new weight
    reweighted = [t.model_copy(deep=True) for t in tasks]
    reweighted[1].rubrics[0].weight = 0.9
    assert judge_stage(rd, reweighted, reports, judge_config("tiny-llama", "X"), ScriptedBackend(), show=False)["decisions"] == 0


# -- judgments saved as they exist -----------------------------------------------------------------------------

class Streaming(ScriptedBackend):
    """Yields report by report, recording how many judgment lines were on disk as each report started."""

    def __init__(self, path: Path):
        super().__init__()
        self.path, self.seen = path, []

    def _lines(self) -> int:
        return self.path.read_text().count("\n") if self.path.exists() else 0

    def score_choices(self, groups, choices):
        self.seen.append(self._lines())
        return super().score_choices(groups, choices)

    def iter_score_choices(self, groups, choices):
        for i, g in enumerate(groups):
            yield [i], self.score_choices([g], choices)


def test_each_reports_judgments_are_appended_as_soon_as_they_exist(tmp_path):
    rd = RunDir(tmp_path)
    tasks, reports = tiny_inputs(4)
    backend = Streaming(rd.file("judgments.jsonl"))
    judge_stage(rd, tasks, reports, judge_config(), backend, show=False)  # groups_per_call 8: one call
    assert backend.seen == [0, 3, 6, 9]  # report k starts with the k reports before it saved


# -- empty reports -------------------------------------------------------------------------------------------

def test_an_empty_report_is_not_judged_and_scores_zero(tmp_path):
    rd = RunDir(tmp_path)
    tasks, reports = tiny_inputs(3, ["A full report.", "", " \n\t "])
    backend = ScriptedBackend(p_true_fn=lambda key, i, req: 0.99)
    judge_stage(rd, tasks, reports, judge_config(), backend, show=False)
    sent = [g.key for call in backend.choice_calls for g in call]
    assert sent == ["t0|a|0"]
    got = rd.load("judgments.jsonl", Judgment)
    empty = [j for j in got if j.task_id in ("t1", "t2")]
    assert len(empty) == 6 and all(j.satisfied is False and j.reason == "empty report" and j.p_true is None
                                   and j.raw is None for j in empty)
    score = score_by_judge(tasks, got)["j"]["a"]  # eq. 1: t0 satisfied everywhere, the empty ones 0
    assert score.tasks == {"t0": 1.0, "t1": 0.0, "t2": 0.0} and math.isclose(score.overall_mean, 1 / 3)


@pytest.mark.parametrize("text", ["\u200b\u200b\u200b", "\u200b \ufeff\u2060\u200d\n", "\u3000\u00a0"])
def test_a_report_of_zero_width_spaces_is_not_judged(tmp_path, text):
    tasks = [Task.model_validate(task("t0", [rubric("R0", 0.5)]))]
    backend = ScriptedBackend(p_true_fn=lambda *a: 0.99)
    judge_stage(RunDir(tmp_path / "run"), tasks, [Report(task_id="t0", agent="a", text=text)],
                JudgeConfig(id="j", model=model_config(model="tiny-llama")), backend, show=False)
    assert backend.choice_calls == []
    (j,) = RunDir(tmp_path / "run").load("judgments.jsonl", Judgment)
    assert j.satisfied is False and j.reason == "empty report"


# -- the progress bar ---------------------------------------------------------------------------------------

def test_a_resumed_judge_says_how_many_decisions_were_already_made(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the whole bar on one line, nothing elided
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(4)]) for i in range(3)])
    reports = write_jsonl(tmp_path / "reports.jsonl", [{"task_id": f"t{i}", "agent": "a", "run": 0, "text": "Report."}
                                                       for i in range(3)])
    monkeypatch.setattr("lifesearch_local.runtime.skeleton.default_open",
                        lambda model, ray, name: contextlib.nullcontext(ScriptedBackend()))
    model = tmp_path / "judge-model"
    model.mkdir()
    argv = ["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", str(model), "--out", str(tmp_path / "run")]
    assert main([*argv, "--limit", "1", "--quiet"]) == 0  # 4 decisions, then "killed"
    monkeypatch.setattr("sys.stderr", err := Terminal())
    assert main(argv) == 0
    assert "(4 already done)" in err.getvalue() and "12/12" in err.getvalue()


N_RUBRICS = 6


class SpyBar:
    def __init__(self, log: list):
        self.log, self.done = log, 0

    def advance(self, n: int = 1, **_: float) -> None:
        self.done += n
        self.log.append(("bar", self.done))

    def advance_to(self, done: int) -> None:
        if done > self.done:
            self.advance(done - self.done)


@pytest.mark.parametrize("kernel", ["two_stage", "shared", "single"])
def test_one_report_moves_the_bar_decision_by_decision(tmp_path, monkeypatch, kernel):
    pytest.importorskip("torch")
    from serving.engines.hf import HFEngine

    log: list = []

    @contextlib.contextmanager
    def spy(total, **kw):
        log.append(("total", total))
        yield SpyBar(log)

    monkeypatch.setattr(judging, "progress_bar", spy)
    rd = RunDir(tmp_path / "run")
    append = rd.append
    monkeypatch.setattr(rd, "append", lambda name, recs: (log.append(("append", len(recs))), append(name, recs)))
    t = Task.model_validate(task("t1", [rubric(f"R{k}", 1.0, criterion=f"The response should state fact {k}.")
                                        for k in range(N_RUBRICS)]))
    report = Report(task_id="t1", agent="a", run=0, text="A report. " * 40)
    # a token budget of one suffix per pass: the kernel finishes the report's decisions one by one
    cfg = JudgeConfig(id="j", model=model_config(model="tiny-llama", device="cpu", kernel=kernel, token_budget=64))
    backend = HFEngine(engine_config(cfg.model))
    stats = judging.judge_stage(rd, [t], [report], cfg, backend, show=False)
    assert stats["decisions"] == N_RUBRICS
    first_append = log.index(("append", N_RUBRICS))
    assert [e for e in log[:first_append] if e[0] == "bar"] == [("bar", k) for k in range(1, N_RUBRICS + 1)]
    assert log[-1] == ("append", N_RUBRICS) or log[-1] == ("bar", N_RUBRICS)


def test_engine_start_up_is_reported_apart_from_the_steady_rate(tmp_path):
    """The rate once the engine is up: decisions over the wall time less the engine's start-up."""
    import time

    backend = ScriptedBackend(p_true_fn=lambda key, i, req: 0.7)

    @contextlib.contextmanager
    def slow_open(model, ray):
        time.sleep(0.3)  # a model load
        yield backend

    stats = judge_stage(RunDir(tmp_path), TASKS, REPORTS, JudgeConfig(id="j"), show=False, open_model=slow_open)
    assert stats["decisions"] == 6 and stats["engine_start_s"] >= 0.3
    steady = stats["decisions"] / (stats["wall_s"] - stats["engine_start_s"])
    assert stats["steady_decisions_per_s"] == pytest.approx(steady, rel=0.01)
    assert stats["steady_decisions_per_s"] > stats["decisions_per_s"]
