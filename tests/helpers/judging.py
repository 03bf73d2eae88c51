"""Small tasks, reports and judge settings for the judge stage and the resume guard."""

from __future__ import annotations

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Report, Task
from serving.config import model_config
from tests.helpers.inputs import rubric, task


def two_rubric_inputs(n: int = 3) -> tuple[list[Task], list[Report]]:
    """n tasks (t0, t1, ...) with two rubrics each, and one report on each."""
    tasks = [Task.model_validate(task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(2)])) for i in range(n)]
    return tasks, [Report(task_id=f"t{i}", agent="a", text=f"Report on t{i}.") for i in range(n)]


def tiny_inputs(n_tasks: int = 2, texts: list[str] | None = None) -> tuple[list[Task], list[Report]]:
    """n tasks with three rubrics each, and one report on each (`texts`: the reports' texts)."""
    tasks = [Task.model_validate(task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(3)])) for i in range(n_tasks)]
    texts = texts or [f"Report on t{i}: the facts." for i in range(n_tasks)]
    return tasks, [Report(task_id=f"t{i}", agent="a", text=t) for i, t in enumerate(texts)]


def judge_config(model: str = "tiny-llama", jid: str = "j", **kw) -> JudgeConfig:
    """A judge under a given id on a model by name (`model_kw`: more model settings)."""
    return JudgeConfig(id=jid, model=model_config(model=model, **kw.pop("model_kw", {})), **kw)


# An English task (one rubric of zero weight) and a Chinese one, each with a good and a bad agent's report.
TASKS = [
    Task.model_validate(task("en1", [rubric("R1", 0.5), rubric("R2", 1.0), rubric("R3", 0.0)], question="Q {answer}?")),
    Task.model_validate(task("zh1", [rubric("R1", 0.7, criterion="回复应给出人口。")], language="zh", domain="policy")),
]
REPORTS = [Report(task_id=t.id, agent=a, run=0, text=f"report of {a} for {t.id}") for t in TASKS for a in ("good", "bad")]
