"""Task scores from any leaderboard source: a run or `judge --out` directory, a judgments file, a published table.

Kinds, told apart by content (not by file name):
- a directory holding judgments.jsonl (a run, or `judge --out`): scored as `lifesearch score`
  scores it, one table per judge; its tasks from `--tasks`, RUN_DIR/tasks.jsonl or the manifest;
- a judgments JSONL file (lines with rubric_id and satisfied): needs `--tasks`;
- a wide CSV as DeepResearch Bench II's aggregate_scores.py writes it: `idx, language, theme,
  <system>…, avg`, one row per task and a last `avg` row (ignored); an empty cell = not scored;
  values are shares 0–1. Task ids are `drb2-<idx>`, as `lifesearch import drb2` names them; the
  theme is the domain; `agg_scores_<dimension>.csv` names the dimension (else `total`);
- a long CSV or JSONL: `agent, task_id, score` and optionally `dimension`, `domain`, `judge`.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

from lifesearch_local.analysis.leaderboard import TOTAL, ScoreTable
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.records import Judgment, Task, id_problem

DRB2_PREFIX = "drb2-"
"""Task id prefix of a wide table's idx (what `lifesearch import drb2` gives its tasks)."""
_WIDE_FIXED = ("idx", "language", "theme", "avg")
_LONG_NEEDED = {"agent", "task_id", "score"}
_DIMENSION_FILE = re.compile(r"^agg_scores_(?P<dim>[A-Za-z0-9_-]+)\.csv$")
KINDS = ("run directory", "judgments file", "wide table", "long table")


def source_kind(path: Path) -> str:
    """Which of KINDS `path` is; an InputError in one line when it is none of them."""
    if path.is_dir():
        if (path / "judgments.jsonl").is_file():
            return "run directory"
        raise InputError(str(path), None, None, "a directory without judgments.jsonl: not a run or `judge --out` directory")
    if not path.is_file():
        raise InputError(str(path), None, None, "no such file or directory")
    head = _first_line(path)
    if head.startswith("{"):
        try:
            keys = set(json.loads(head))
        except (ValueError, TypeError):
            keys = set()
        if {"rubric_id", "satisfied"} <= keys:
            return "judgments file"
        if keys >= _LONG_NEEDED:
            return "long table"
    else:
        cols = [c.strip().lower() for c in next(csv.reader([head]), [])]
        if cols[:1] == ["idx"] and [c for c in cols if c not in _WIDE_FIXED]:
            return "wide table"
        if set(cols) >= _LONG_NEEDED:
            return "long table"
    raise InputError(str(path), None, None, "not a source of task scores: expected a run directory, a judgments "
                     "JSONL (with --tasks), a DRB II wide CSV (idx, language, theme, <system>…, avg) or a long "
                     "CSV/JSONL (agent, task_id, score[, dimension])")


def _first_line(path: Path) -> str:
    with open(path, "rb") as f:
        for raw in f:
            if raw.strip():
                return raw.decode("utf-8-sig", errors="replace").strip()
    return ""


def read_source(path: str | Path, *, tasks_path: str | Path | None = None, allow_missing: bool = False,
                task_ids: set[str] | None = None) -> list[ScoreTable]:
    """The score tables of one source (see the module docstring for the kinds)."""
    path = Path(path)
    kind = source_kind(path)
    if kind == "run directory":
        return _from_run_dir(path, tasks_path, allow_missing, task_ids)
    if kind == "judgments file":
        if tasks_path is None:
            raise LifesearchError(f"{path}: a judgments file needs --tasks FILE (the tasks it was judged on)")
        return _from_judgments(path, path, Path(tasks_path), allow_missing, task_ids, _manifest_identities(path.parent))
    if kind == "wide table":
        return [_from_wide(path)]
    return _from_long(path)


# -- judgments -------------------------------------------------------------------------------
def _from_run_dir(run: Path, tasks_path: str | Path | None, allow_missing: bool,
                  task_ids: set[str] | None) -> list[ScoreTable]:
    from lifesearch_local.output.report.data import run_input  # the run's tasks file, as report.html finds it
    from lifesearch_local.rundir.manifest import read_manifest

    manifest = read_manifest(run)
    tasks = run_input(run, "tasks", Path(tasks_path) if tasks_path else None, manifest and manifest.model_dump())
    if tasks is None:
        raise LifesearchError(f"{run}: no tasks.jsonl and no tasks path recorded in its manifest; pass --tasks FILE")
    identities = {} if manifest is None else dict(manifest.fingerprints)
    return _from_judgments(run, run / "judgments.jsonl", tasks, allow_missing, task_ids, identities)


def _from_judgments(source: Path, judgments_path: Path, tasks_path: Path, allow_missing: bool,
                    task_ids: set[str] | None, identities: dict) -> list[ScoreTable]:
    """One table per judge, scored as `lifesearch score` scores (the same task scores and means)."""
    from lifesearch_local.analysis.scoring import score_by_judge, split_by_judge
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    tasks: list[Task] = load_tasks(tasks_path)
    judgments = read_records(judgments_path, Judgment)
    if task_ids is not None:  # before scoring: a run judged on some tasks is complete on those
        tasks = [t for t in tasks if t.id in task_ids]
        judgments = [j for j in judgments if j.task_id in task_ids]
    try:
        by_judge = score_by_judge(tasks, judgments, allow_missing=allow_missing)
    except LifesearchError as e:
        raise LifesearchError(f"{source}: {e}") from None
    groups = split_by_judge(judgments)
    domains = {t.id: t.domain.value for t in tasks}
    out = []
    for name, rows in by_judge.items():
        judged: dict[str, set[str]] = {}
        for j in groups.get(name, ()):
            judged.setdefault(j.agent, set()).add(j.task_id)
        judge_id = groups[name][0].judge
        out.append(ScoreTable(str(source), name, TOTAL, {a: r.tasks for a, r in rows.items()}, domains, judged,
                              {a: r.overall_mean for a, r in rows.items()}, identities.get(judge_id)))
    return out


def _manifest_identities(where: Path) -> dict:
    """judge id → JudgeIdentity from the manifest in `where` ({} without one, or when it is unreadable:
    the identity only refines which judges are the same)."""
    from lifesearch_local.rundir.manifest import read_manifest

    try:
        m = read_manifest(where)
    except LifesearchError:
        return {}
    return {} if m is None else dict(m.fingerprints)


# -- published tables ------------------------------------------------------------------------
def _score(path: Path, line: int, column: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InputError(str(path), line, column, f"not a number: {text!r}") from None
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise InputError(str(path), line, column, f"{text} is not a share between 0 and 1")
    return v


def _rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        try:
            reader.fieldnames = [c.strip() for c in reader.fieldnames or []]
            return [(reader.line_num, row) for row in reader]
        except (csv.Error, UnicodeDecodeError) as e:  # a NUL byte, bytes that are not UTF-8
            raise InputError(str(path), reader.line_num + 1, None, f"not a readable CSV ({e})") from None


def _from_wide(path: Path) -> ScoreTable:
    """DRB II's aggregate_scores.py output: one row per task, one column per system."""
    rows = _rows(path)
    cols = list(rows[0][1]) if rows else []
    systems = [c for c in cols if c.lower() not in _WIDE_FIXED]
    for s in systems:
        _check_id(path, 1, "(header)", s)
    m = _DIMENSION_FILE.match(path.name)
    table = ScoreTable(str(path), None, m.group("dim") if m else TOTAL, {s: {} for s in systems})
    for line, row in rows:
        idx = (row.get("idx") or "").strip()
        if idx.lower() == "avg":
            continue  # the column means: recomputed, never read
        if not idx.isdigit():
            raise InputError(str(path), line, "idx", f"not a task number: {idx!r}")
        tid = f"{DRB2_PREFIX}{int(idx)}"
        if tid in table.domains:
            raise InputError(str(path), line, "idx", f"task {idx} appears twice")
        table.domains[tid] = (row.get("theme") or "").strip() or "(no theme)"
        for s in systems:
            cell = (row.get(s) or "").strip()
            if cell:
                table.scores[s][tid] = _score(path, line, s, cell)
    table.scores = {s: v for s, v in table.scores.items() if v}
    return table


def _from_long(path: Path) -> list[ScoreTable]:
    """One row per (agent, task[, dimension]) score; one table per judge and dimension."""
    rows = _long_rows(path)
    tables: dict[tuple[str | None, str], ScoreTable] = {}
    for line, row in rows:
        for key in _LONG_NEEDED:
            if row.get(key) is None or not str(row[key]).strip():  # a score of 0 is a score
                raise InputError(str(path), line, key, "empty")
        judge = str(row.get("judge") or "").strip() or None
        dim = str(row.get("dimension") or "").strip() or TOTAL
        t = tables.setdefault((judge, dim), ScoreTable(str(path), judge, dim, {}))
        agent, tid = str(row["agent"]).strip(), str(row["task_id"]).strip()
        for key, value in (("agent", agent), ("task_id", tid), ("judge", judge or "-")):
            _check_id(path, line, key, value)
        if tid in t.scores.setdefault(agent, {}):
            raise InputError(str(path), line, "task_id", f"a second score of {agent} on {tid}" + (
                f" ({dim})" if dim != TOTAL else ""))
        t.scores[agent][tid] = _score(path, line, "score", str(row["score"]).strip())
        if str(row.get("domain") or "").strip():
            t.domains[tid] = str(row["domain"]).strip()
    if not tables:
        raise InputError(str(path), None, None, "no scores in it")
    return list(tables.values())


def _check_id(path: Path, line: int, field: str, value: str) -> None:
    """An agent, task or judge name holds what an id may (records.id_problem: no control character),
    as every other loader of ids requires."""
    problem = id_problem(value)
    if problem:
        raise InputError(str(path), line, field, f"{value!r}: {problem}")


def _long_rows(path: Path) -> list[tuple[int, dict]]:
    if _first_line(path).startswith("{"):
        from lifesearch_local.rundir.jsonl import iter_json_lines

        return list(iter_json_lines(path))
    return [(line, row) for line, row in _rows(path)]
