"""DeepResearch Bench II evaluator results ↔ reference labels and judgments, exactly both ways.

The upstream `run_evaluation.py` appends one line per (graded system, task):
`{"model", "idx", "result": {"task", "scores": {dimension: {rubric text: {"score", "reason",
"evidence"}}}, "usage_summary", …}}`, or `"result": {"error": …}` when a batch failed. A score is 1
(met), 0 (not met) or -1 (met only through a blocked source). Its `aggregate_scores.py` counts
only 1 as met: -1 counts as not met (and separately in `blocked_rate`). `BLOCKED` maps -1 the same
way by default. Repeated lines of one (model, idx) are repeated gradings (the aggregator averages
them): the first is the label, every one is a judgment (judge_run 0, 1, …).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.importers.common import check_id, import_inputs, json_text, read_rows, write_import_dir
from lifesearch_local.importers.drb2 import (
    DIMENSIONS,
    NECESSITY,
    PRIORITY,
    RUBRIC_TYPE,
    Drb2Import,
    Drb2Source,
    task_counts,
)
from lifesearch_local.records import Judgment, Label, Task
from lifesearch_local.rundir.jsonl import iter_json_lines, read_records
from lifesearch_local.tasks import load_tasks

BlockedVerdict = Literal["fail", "pass", "skip"]
BLOCKED: dict[str, bool | None] = {"fail": False, "pass": True, "skip": None}
SCORES = (1, 0, -1)
Verdicts = dict[tuple[int, str, str, str], bool]  # (judge_run, task_id, agent, rubric_id) → satisfied


class Entry(BaseModel):
    """One rubric verdict of a results line, less the decision (which the label/judgment holds)."""

    model_config = ConfigDict(extra="forbid")
    rubric_id: str
    """Our id of the rubric whose text keys this verdict (the first, when a task repeats the text)."""
    blocked: bool
    """The score was -1 (met through a blocked source)."""
    rest: dict[str, Any]
    """The verdict's other keys (reason, evidence, …) verbatim, in the file's order; `score` marks
    where the score stood."""


class ResultSource(BaseModel):
    """One line of drb2_results_source.jsonl: a results line less its decisions."""

    model_config = ConfigDict(extra="forbid")
    file: str
    """Results file, as given on the command line."""
    line: int
    """Its line number."""
    task_id: str
    """Our task id of the line's idx."""
    agent: str
    """The line's `model`: the graded system, our agent."""
    judge_run: int
    """0 for the first line of this (model, idx), 1 for the next, …"""
    top: dict[str, Any]
    """The line's keys in order; `model`, `idx` and `result` hold None (rebuilt), others verbatim."""
    result: dict[str, Any]
    """`result`'s keys in order; `scores` holds None, `task` holds None when it equals the task's
    text (else verbatim), others verbatim (usage, …). A failed line's result is kept whole here."""
    scores: dict[str, list[Entry]] | None
    """Per dimension, in order, its verdicts in order; None for a failed line (`result.error`)."""


@dataclass
class ResultsImport:
    """Labels, judgments and the sources of the results lines they came from."""

    labels: list[Label] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)
    sources: list[ResultSource] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)


def _where(dim: str, text: str) -> str:
    short = text if len(text) <= 40 else text[:40] + "…"
    return f"result.scores.{dim}[{json.dumps(short, ensure_ascii=False)}]"


def _entries(scores: Any, task: Task, path: str, lineno: int) -> dict[str, list[tuple[list[str], int, dict[str, Any]]]]:
    """Per dimension: (rubric ids with that text, score, the verdict's other keys) in file order."""
    if not isinstance(scores, dict):
        raise InputError(path, lineno, "result.scores", "expected an object of dimensions")
    ids: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in task.rubrics:
        ids[(r.dimension or "", r.criterion)].append(r.id)
    out: dict[str, list[tuple[list[str], int, dict[str, Any]]]] = {}
    for dim, verdicts in scores.items():
        if dim not in DIMENSIONS:
            raise InputError(path, lineno, f"result.scores.{dim}", f"unknown DRB II dimension (expected one of {list(DIMENSIONS)})")
        if not isinstance(verdicts, dict):
            raise InputError(path, lineno, f"result.scores.{dim}", "expected an object keyed by rubric text")
        out[dim] = []
        for text, v in verdicts.items():
            where = _where(dim, text)
            if (dim, text) not in ids:
                raise InputError(path, lineno, where, f"not a {dim} rubric of task {task.id}")
            if not isinstance(v, dict) or "score" not in v:
                raise InputError(path, lineno, where, "expected an object with a score")
            s = v["score"]
            if isinstance(s, bool) or not isinstance(s, int) or s not in SCORES:
                raise InputError(path, lineno, f"{where}.score", f"expected 1, 0 or -1, got {s!r}")
            out[dim].append((ids[(dim, text)], s, {k: (None if k == "score" else x) for k, x in v.items()}))
    return out


def _line(obj: dict[str, Any], path: str, lineno: int, by_idx: dict[int, tuple[Task, str]]) -> tuple[str, Task, str, dict]:
    for key in ("model", "idx", "result"):
        if key not in obj:
            raise InputError(path, lineno, key, "missing (an evaluator results line has model, idx, result)")
    model, idx, result = obj["model"], obj["idx"], obj["result"]
    if not isinstance(model, str) or not model:
        raise InputError(path, lineno, "model", f"expected the graded system's name, got {model!r}")
    check_id(model, path, lineno, "model")
    if isinstance(idx, bool) or not isinstance(idx, int):
        raise InputError(path, lineno, "idx", f"expected an integer, got {idx!r}")
    if idx not in by_idx:
        raise InputError(path, lineno, "idx", f"idx {idx} is not in the tasks file")
    if not isinstance(result, dict):
        raise InputError(path, lineno, "result", "expected an object")
    task, task_text = by_idx[idx]
    return model, task, task_text, result


def convert_results(paths: list[str | Path], tasks: list[Task], sources: list[Drb2Source], *,
                    judge: str = "gemini", blocked: BlockedVerdict = "fail") -> ResultsImport:
    """Every results line as labels (first grading of each report) and judgments (all), with its source."""
    check_id(judge, "--judge-name", None, "judge")
    by_id = {t.id: t for t in tasks}
    by_idx = {s.idx: (by_id[s.task_id], s.other_text if s.question_field == "prompt" else by_id[s.task_id].question)
              for s in sources}
    out = ResultsImport()
    runs: Counter = Counter()
    for p in paths:
        for lineno, obj in iter_json_lines(p):
            model, task, task_text, result = _line(obj, str(p), lineno, by_idx)
            run = runs[(task.id, model)]  # a failed line is no grading: the next line takes its run
            top = {k: (None if k in ("model", "idx", "result") else v) for k, v in obj.items()}
            src = ResultSource(file=str(p), line=lineno, task_id=task.id, agent=model, judge_run=run, top=top,
                               result=result, scores=None)
            out.sources.append(src)
            if "scores" not in result:
                out.counts["failed_lines"] += 1
                continue
            src.result = {k: (None if k == "scores" or (k == "task" and v == task_text) else v) for k, v in result.items()}
            src.scores = {}
            for dim, items in _entries(result["scores"], task, str(p), lineno).items():
                src.scores[dim] = []
                for rubric_ids, score, rest in items:
                    src.scores[dim].append(Entry(rubric_id=rubric_ids[0], blocked=score == -1, rest=rest))
                    out.counts[f"score {score}"] += 1
                    decision = BLOCKED[blocked] if score == -1 else score == 1
                    if decision is None:
                        continue
                    for rid in rubric_ids:
                        _add(out, task.id, model, rid, run, decision, judge, rest)
            runs[(task.id, model)] += 1
            out.counts["lines"] += 1
    out.counts["repeat_lines"] = sum(n - 1 for n in runs.values())
    return out


def _add(out: ResultsImport, task_id: str, agent: str, rid: str, run: int, decision: bool, judge: str,
         rest: dict[str, Any]) -> None:
    reason = rest.get("reason")
    raw = json.dumps({k: v for k, v in rest.items() if k != "score"}, ensure_ascii=False)
    out.judgments.append(Judgment(task_id=task_id, agent=agent, run=0, rubric_id=rid, judge=judge, judge_run=run,
                                  satisfied=decision, reason=reason if isinstance(reason, str) else None, raw=raw))
    if run == 0:
        out.labels.append(Label(task_id=task_id, agent=agent, run=0, rubric_id=rid, satisfied=decision, source=judge))


def verdicts_from_labels(labels: list[Label]) -> Verdicts:
    """The decisions of labels, as first gradings (judge_run 0)."""
    return {(0, x.task_id, x.agent, x.rubric_id): x.satisfied for x in labels}


def verdicts_from_judgments(judgments: list[Judgment], judge: str) -> Verdicts:
    """The decisions of one judge's judgments, by judge_run (ungraded ones left out)."""
    return {(j.judge_run, j.task_id, j.agent, j.rubric_id): j.satisfied for j in judgments
            if j.judge == judge and j.satisfied is not None}


def _score(e: Entry, src: ResultSource, verdicts: Verdicts, blocked: BlockedVerdict) -> int:
    got = verdicts.get((src.judge_run, src.task_id, src.agent, e.rubric_id))
    if e.blocked:
        if got is not None and got != BLOCKED[blocked]:
            raise LifesearchError(f"{src.file}:{src.line}: rubric {e.rubric_id}: scored -1 upstream, but the decision "
                                  f"is {got} (blocked verdict {blocked!r} maps -1 to {BLOCKED[blocked]})")
        return -1
    if got is None:
        raise LifesearchError(f"{src.file}:{src.line}: no decision for task {src.task_id}, agent {src.agent}, "
                              f"run {src.judge_run}, rubric {e.rubric_id}")
    return 1 if got else 0


def export_results(tasks: list[Task], sources: list[Drb2Source], results: list[ResultSource], verdicts: Verdicts,
                   blocked: BlockedVerdict = "fail") -> list[tuple[str, dict[str, Any]]]:
    """(file, line object) of each results line, rebuilt from the decisions in `verdicts` (1 when
    satisfied, 0 when not, -1 where the source says so) and the rest from the source records."""
    by_id = {t.id: t for t in tasks}
    idx = {s.task_id: s for s in sources}
    out = []
    for src in results:
        task, s = by_id[src.task_id], idx[src.task_id]
        text = {r.id: r.criterion for r in task.rubrics}
        result = dict(src.result)
        if src.scores is not None:
            result["scores"] = {dim: {text[e.rubric_id]: {k: (_score(e, src, verdicts, blocked) if k == "score" else v)
                                                          for k, v in e.rest.items()} for e in entries}
                                for dim, entries in src.scores.items()}
            if "task" in result and result["task"] is None:
                result["task"] = s.other_text if s.question_field == "prompt" else task.question
        fill = {"model": src.agent, "idx": s.idx, "result": result}
        out.append((src.file, {k: fill.get(k, v) for k, v in src.top.items()}))
    return out


def results_counts(r: ResultsImport, tasks: list[Task]) -> dict[str, Any]:
    """Counts for import.json: lines, failed and repeated lines, scores, labels per agent, coverage."""
    n_rubrics = {t.id: len(t.rubrics) for t in tasks}
    graded = Counter((x.task_id, x.agent) for x in r.labels)
    return {
        "lines": r.counts["lines"], "failed_lines": r.counts["failed_lines"], "repeat_lines": r.counts["repeat_lines"],
        "scores": {str(s): r.counts[f"score {s}"] for s in SCORES},
        "labels": len(r.labels), "judgments": len(r.judgments),
        "labels_by_agent": dict(sorted(Counter(x.agent for x in r.labels).items())),
        "reports_graded": len(graded),
        "rubrics_without_label": sum(n_rubrics[t] - n for (t, _), n in graded.items()),
    }



# -- the whole import: write, summarize, read back ----------------------------------------------

SOURCE_FILE, RESULTS_SOURCE_FILE = "drb2_source.jsonl", "drb2_results_source.jsonl"


def import_results(result: Drb2Import, paths: list[str | Path], *, judge: str = "gemini",
                   blocked: BlockedVerdict = "fail") -> ResultsImport:
    """The results files of an import, against its tasks; records the choices in `result.inputs`."""
    result.inputs.update(results=[str(p) for p in paths], judge=judge, blocked_verdict=blocked)
    return convert_results(paths, result.tasks, result.sources, judge=judge, blocked=blocked)


def summary(result: Drb2Import, results: ResultsImport | None = None) -> dict[str, Any]:
    """The import.json record: inputs, field rules, domain map, counts (tasks, reports, results)."""
    info: dict[str, Any] = {
        "inputs": result.inputs,
        "field_rules": {"weight": 1.0, "type": RUBRIC_TYPE, "necessity": NECESSITY, "priority": PRIORITY,
                        "dimension": "the DRB II dimension", "criterion": "the DRB II rubric text, verbatim"},
        "blocked_verdict": {"fail": "-1 -> not satisfied (as aggregate_scores.py counts it)",
                            "pass": "-1 -> satisfied", "skip": "-1 -> no label"},
        "domain_map": {k: v.value for k, v in result.domain_map.items()},
        "counts": task_counts(result),
    }
    if result.report_files or result.refused:  # what each report file lost on the way to text, and those refused
        info["report_files"] = [f.model_dump() for f in result.report_files]
        info["refused"] = result.refused
    if results is not None:
        info["results"] = results_counts(results, result.tasks)
        agents = set(info["results"]["labels_by_agent"])
        info["results"]["agents_without_reports"] = sorted(agents - set(info["counts"]["reports"])) if result.reports else None
    return info


def write_drb2(result: Drb2Import, results: ResultsImport | None, out: str | Path, *, force: bool = False) -> Path:
    """tasks, drb2_source, reports, labels, judgments, drb2_results_source and import.json, atomically."""
    files: dict[str, Any] = {"tasks.jsonl": result.tasks, SOURCE_FILE: result.sources}
    if result.reports:
        files["reports.jsonl"] = result.reports
    if results is not None:
        files.update({"labels.jsonl": results.labels, "judgments.jsonl": results.judgments,
                      RESULTS_SOURCE_FILE: results.sources})
    files["import.json"] = json_text(summary(result, results))
    return write_import_dir(out, files, source_file=SOURCE_FILE, command="lifesearch import drb2", force=force)


def export_from_dir(out: str | Path, *, use: Literal["labels", "judgments"] = "labels",
                    judge: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The evaluator's results lines rebuilt from an import directory's labels (first gradings) or
    judgments (every grading; `judge` defaults to the import's judge name): the way back."""
    out = Path(out)
    info = import_inputs(out, "judge", "blocked_verdict")
    tasks = load_tasks(out / "tasks.jsonl")
    sources = [s for _, s in read_rows(out / SOURCE_FILE, Drb2Source)]
    results = [s for _, s in read_rows(out / RESULTS_SOURCE_FILE, ResultSource)]
    if use == "labels":
        results = [s for s in results if s.judge_run == 0]
        verdicts = verdicts_from_labels(read_records(out / "labels.jsonl", Label))
    else:
        verdicts = verdicts_from_judgments(read_records(out / "judgments.jsonl", Judgment), judge or info["judge"])
    return export_results(tasks, sources, results, verdicts, info["blocked_verdict"])
