"""The judge's progress bar counts decisions as the kernel computes them, not once per report."""

from __future__ import annotations

import contextlib

import pytest
from conftest import rubric, task

pytest.importorskip("torch")

import lifesearch_local.judge.stage as judging  # noqa: E402
from lifesearch_local.judge.config import JudgeConfig  # noqa: E402
from lifesearch_local.llm.models import engine_config  # noqa: E402
from lifesearch_local.records import Report, Task  # noqa: E402
from lifesearch_local.rundir.directory import RunDir  # noqa: E402
from serving.config import model_config  # noqa: E402

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
