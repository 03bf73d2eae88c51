"""The DRB files an import directory was made from, rebuilt exactly: the importer's round-trip check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lifesearch_local.errors import InputError
from lifesearch_local.importers import drb
from lifesearch_local.importers.drb import DrbCriteria, DrbCriterion, DrbQuery, DrbReport
from lifesearch_local.records import Report, Task
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks


def load_import(out: str | Path) -> tuple[dict[str, Task], list[tuple[int, drb.DrbSource]], str]:
    """The tasks of an import directory, and the DRB source line of each (with its line number)."""
    out = Path(out)
    src = str(out / "drb_source.jsonl")
    return {t.id: t for t in load_tasks(out / "tasks.jsonl")}, drb.read_drb(src, drb.DrbSource), src


def reconstruct_criteria(out: str | Path) -> list[dict[str, Any]]:
    """The DRB criteria.jsonl records an import directory was made from, exactly (key order included)."""
    tasks, sources, path = load_import(out)
    records = []
    for lineno, s in sources:
        task = tasks.get(s.task_id)
        if task is None or {r.id for r in task.rubrics} != set(s.rubrics):
            raise InputError(path, lineno, "rubrics", f"do not match the rubrics of task {s.task_id!r} in tasks.jsonl")
        crit: dict[str, list[DrbCriterion]] = {d: [] for d in s.dimensions}
        for r in task.rubrics:
            x = s.rubrics[r.id]
            crit[x.dimension].append(DrbCriterion(**x.model_dump(exclude={"dimension"})))
        rec = DrbCriteria(id=s.id, prompt=task.question, dimension_weight=s.dimension_weight, criterions=crit)
        records.append(rec.model_dump(mode="json"))
    return records


def reconstruct_queries(out: str | Path) -> list[dict[str, Any]]:
    """The DRB query.jsonl records of an import directory, exactly."""
    tasks, sources, _ = load_import(out)
    return [DrbQuery(id=s.id, topic=s.topic, language=tasks[s.task_id].language,
                     prompt=tasks[s.task_id].question).model_dump(mode="json") for _, s in sources]


def reconstruct_reports(out: str | Path) -> list[dict[str, Any]]:
    """The DRB reports records (id, prompt, article) of an import directory's reports.jsonl."""
    tasks, sources, _ = load_import(out)
    ids = {s.task_id: s.id for _, s in sources}
    return [DrbReport(id=ids[r.task_id], prompt=tasks[r.task_id].question, article=r.text).model_dump(mode="json")
            for r in read_records(Path(out) / "reports.jsonl", Report)]
