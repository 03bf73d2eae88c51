"""What the viewer shows: run directories and judgments files found under the paths given, and their inputs.

A path is a judgments file, a run directory (it holds judgments.jsonl), or a folder of run
directories (searched two levels down). Tasks, reports and labels are found as `report` finds
them: RUN_DIR/<name>.jsonl, else the path its manifest records (refused if that file changed
since), else the file given on the command line. What cannot be read is said on the page
(`Source.problems`), not fatal: the decisions stay viewable without tasks or labels.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lifesearch_local.analysis.labels import Key, label_index
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.output.report.data import run_input
from lifesearch_local.output.view.index import DecisionIndex, build_index
from lifesearch_local.output.view.tokens import Tokenizers
from lifesearch_local.records import Judgment, Label, Report, Task
from lifesearch_local.rundir.jsonl import numbered_records, parse_json, read_records, validation_field
from lifesearch_local.rundir.manifest import manifest_data

JUDGMENTS = "judgments.jsonl"
SEARCH_DEPTH = 2


@dataclass
class Inputs:
    """Files named on the command line, used where a source has none of its own."""

    tasks: Path | None = None
    labels: Path | None = None
    label_source: str | None = None


def discover(paths: list[Path]) -> list[tuple[Path, Path | None]]:
    """(judgments file, the directory its files may be served from, or None for a file given
    alone) for every source under `paths`, in the order given; LifesearchError for a path with none."""
    out: list[tuple[Path, Path | None]] = []
    for p in paths:
        if p.is_file():
            out.append((p, None))
            continue
        if not p.is_dir():
            raise LifesearchError(f"{p}: no such file or directory")
        found = _run_dirs(p, SEARCH_DEPTH)
        if not found:
            raise LifesearchError(f"{p}: no {JUDGMENTS} in it or in its subfolders ({SEARCH_DEPTH} levels): "
                                  "pass a run directory, a folder of them, or a judgments file")
        out += [(d / JUDGMENTS, d) for d in found]
    return out


def _run_dirs(p: Path, depth: int) -> list[Path]:
    if (p / JUDGMENTS).is_file():
        return [p]
    if depth == 0:
        return []
    return [d for sub in sorted(q for q in p.iterdir() if q.is_dir() and not q.is_symlink())
            for d in _run_dirs(sub, depth - 1)]


@dataclass
class Source:
    """One judgments file and what the viewer read beside it."""

    name: str
    judgments: Path
    root: Path | None
    """The run directory whose files may be served (None for a judgments file given alone)."""
    index: DecisionIndex
    tasks: dict[str, Task] = field(default_factory=dict)
    tasks_path: Path | None = None
    reports_path: Path | None = None
    labels_path: Path | None = None
    manifest: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    """What could not be read (no tasks, conflicting labels, …), one line each, shown on its pages."""
    tokenizers: Tokenizers = field(default_factory=lambda: Tokenizers(None))
    """The judges' tokenizers, to place a report's cut exactly (loaded on first use)."""
    _reports: dict[tuple[str, str, int], tuple[int, int]] | None = None
    _board: dict[str, Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def report(self, key: tuple[str, str, int]) -> Report | None:
        """The judged report (read from its line; the offsets are found on first use)."""
        if self.reports_path is None:
            return None
        with self._lock:
            if self._reports is None:
                self._reports = _report_offsets(self.reports_path)
        at = self._reports.get(key)
        if at is None:
            return None
        with open(self.reports_path, "rb") as f:
            f.seek(at[0])
            obj = parse_json(f.readline(), str(self.reports_path), at[1])
        try:
            return Report.model_validate(obj)
        except ValidationError as e:
            where, msg = validation_field(e, Report)
            raise InputError(str(self.reports_path), at[1], where, msg) from None

    def leaderboard(self) -> dict[str, Any]:
        """Scores per judge and agent with their 95% CIs and paired comparisons, as `score` computes
        them (computed on first use): {"scores", "uncertainty"} or {"error": why not}."""
        with self._lock:
            if self._board is None:
                self._board = _leaderboard(self)
            return self._board


def _report_offsets(path: Path) -> dict[tuple[str, str, int], tuple[int, int]]:
    """(task, agent, run) → (byte offset, line number) of the first report with that key."""
    out: dict[tuple[str, str, int], tuple[int, int]] = {}
    offset = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if raw.strip() and raw.endswith(b"\n"):
                obj = parse_json(raw, str(path), lineno)
                if isinstance(obj, dict):
                    run = obj.get("run", 0)
                    key = (str(obj.get("task_id")), str(obj.get("agent")), run if isinstance(run, int) else -1)
                    out.setdefault(key, (offset, lineno))
            offset += len(raw)
    return out


def _leaderboard(src: Source) -> dict[str, Any]:
    from lifesearch_local.analysis.scoring import score_by_judge, uncertainty_by_judge

    if not src.tasks:
        return {"error": "no tasks file: the scores need the tasks' rubrics and weights (pass --tasks FILE)"}
    judgments = read_records(src.judgments, Judgment, skip_tail=True)
    tasks = list(src.tasks.values())
    try:
        scores = score_by_judge(tasks, judgments)
        return {"scores": scores, "uncertainty": uncertainty_by_judge(tasks, judgments, scores)}
    except LifesearchError as e:
        return {"error": str(e)}


def _input(run_dir: Path, name: str, given: Path | None, manifest: dict | None, problems: list[str]) -> Path | None:
    try:
        return run_input(run_dir, name, None, manifest) or given
    except LifesearchError as e:
        problems.append(str(e))
        return given


def open_source(judgments: Path, root: Path | None, inputs: Inputs, name: str) -> Source:
    """Read one source: its manifest, tasks, labels, then the index of its decisions."""
    home = judgments.parent
    problems: list[str] = []
    try:
        manifest = manifest_data(home)
    except LifesearchError as e:
        manifest = None
        problems.append(str(e))
    tasks_path = _input(home, "tasks", inputs.tasks, manifest, problems)
    tasks: dict[str, Task] = {}
    if tasks_path is not None:
        from lifesearch_local.tasks import load_tasks

        try:
            tasks = {t.id: t for t in load_tasks(tasks_path)}
        except LifesearchError as e:
            problems.append(f"tasks not used: {e}")
    else:
        problems.append("no tasks file (none in the directory or its manifest; pass --tasks FILE): no criteria, "
                        "scores or prompts")
    labels_path = _input(home, "labels", inputs.labels, manifest, problems)
    labels, sources = _labels(labels_path, inputs.label_source, problems)
    criteria = {(t.id, r.id): r.criterion for t in tasks.values() for r in t.rubrics}
    index = build_index(judgments, criteria, labels, sources)
    return Source(name=name, judgments=judgments, root=root, index=index, tasks=tasks, tasks_path=tasks_path,
                  reports_path=_input(home, "reports", None, manifest, problems), labels_path=labels_path,
                  manifest=manifest, problems=problems, tokenizers=Tokenizers(manifest))


def _labels(path: Path | None, source: str | None, problems: list[str]) -> tuple[dict[Key, bool], set[str]]:
    if path is None:
        return {}, set()
    try:
        labels = [lab for _, lab in numbered_records(path, Label)]
        return label_index(labels, source), {lab.source for lab in labels}
    except LifesearchError as e:
        problems.append(f"labels not used: {e}")
        return {}, set()


def open_sources(paths: list[Path], inputs: Inputs) -> list[Source]:
    """Every source under `paths`, named by its path as given (shortest unambiguous form)."""
    found = discover(paths)
    return [open_source(j, root, inputs, str(root if root is not None else j)) for j, root in found]
