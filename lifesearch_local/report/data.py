"""What the HTML report shows, read from a run directory and computed; no HTML here.

Trajectories are read leniently because their step format belongs to the agent: every
JSON object in `trajectories/**/*.jsonl` is walked, and a dict whose `tool`, `name`,
`tool_name` or `function` is `web_fetch` (or `fetch`) counts as a fetch; it failed when
it or its `result` / `observation` / `output` dict has a truthy `failure` or `error`,
`ok: false`, `failed: true` or a `status` of error/failed/failure. The failure kind is
the `failure` (or its `kind`), else `error_kind`/`kind`, else "error". Unreadable lines
are counted, never fatal.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LifesearchError
from ..jsonl import read_records
from ..records import Judgment, Label, Report, Task
from ..scoring import AgentScore

FETCH_TOOLS = {"web_fetch", "fetch"}
_TOOL_KEYS = ("tool", "name", "tool_name", "function")
_RESULT_KEYS = ("result", "observation", "output")
_FAILED_STATUS = {"error", "failed", "failure"}


@dataclass
class FetchStats:
    """Fetch calls and failures (by kind) found in one agent's trajectories."""

    calls: int = 0
    failures: Counter = field(default_factory=Counter)
    unreadable_lines: int = 0


@dataclass
class RunData:
    """The records of a run directory and what the report computes from them."""

    run_dir: Path
    tasks: list[Task]
    reports: list[Report]
    judgments: list[Judgment]
    labels: list[Label] = field(default_factory=list)
    labels_path: Path | None = None
    manifest: dict[str, Any] | None = None
    manifest_error: str | None = None
    config_text: str | None = None
    scores: dict[str, dict[str, AgentScore]] = field(default_factory=dict)
    score_error: str | None = None
    agreement: dict[str, dict] | None = None
    agreement_error: str | None = None
    fetch: dict[str, FetchStats] = field(default_factory=dict)
    reporteval: dict[str, dict[str, dict]] | None = None


def load_run(run_dir: Path, labels_path: Path | None = None) -> RunData:
    """Read tasks, reports, judgments, labels, manifest, config and trajectories; score them."""
    from ..tasks import load_tasks

    run_dir = Path(run_dir)
    if not (run_dir / "tasks.jsonl").exists():
        raise LifesearchError(f"{run_dir}: no tasks.jsonl; is this a run directory?")
    data = RunData(
        run_dir=run_dir,
        tasks=load_tasks(run_dir / "tasks.jsonl"),
        reports=_records(run_dir / "reports.jsonl", Report),
        judgments=_records(run_dir / "judgments.jsonl", Judgment),
    )
    if labels_path is None and (run_dir / "labels.jsonl").exists():
        labels_path = run_dir / "labels.jsonl"
    if labels_path is not None:
        data.labels, data.labels_path = read_records(labels_path, Label), Path(labels_path)
    _load_manifest(data)
    if (run_dir / "config.yaml").exists():
        data.config_text = (run_dir / "config.yaml").read_text(encoding="utf-8", errors="replace")
    _score(data)
    _agree(data)
    data.fetch = fetch_stats(run_dir, data.reports)
    if (run_dir / "reporteval_summary.json").exists():  # written by `lifesearch reporteval`
        data.reporteval = json.loads((run_dir / "reporteval_summary.json").read_text(encoding="utf-8"))
    return data


def _records(path: Path, model: type) -> list:
    return read_records(path, model) if path.exists() else []


def _load_manifest(data: RunData) -> None:
    p = data.run_dir / "manifest.json"
    if not p.exists():
        return
    try:
        data.manifest = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        data.manifest_error = f"{p}: {e}"


def _score(data: RunData) -> None:
    from ..scoring import score_by_judge

    if not data.judgments:
        return
    try:
        # A partial run still gets a report: unjudged rubrics count as unsatisfied and are shown as missing.
        data.scores = score_by_judge(data.tasks, data.judgments, allow_missing=True, reports=data.reports)
    except LifesearchError as e:
        data.score_error = str(e)


def _agree(data: RunData) -> None:
    from ..agreement import agreement
    from ..labels import label_index

    if not data.labels or not data.judgments:
        return
    try:
        sources = {lab.source for lab in data.labels}
        data.agreement = agreement(data.tasks, data.judgments, label_index(data.labels), exclude=sources)
    except LifesearchError as e:
        data.agreement_error = str(e)


# -- trajectories ----------------------------------------------------------------------
def fetch_stats(run_dir: Path, reports: list[Report]) -> dict[str, FetchStats]:
    """agent → fetch calls and failures in `trajectories/` (empty when the folder is absent)."""
    root = run_dir / "trajectories"
    if not root.is_dir():
        return {}
    owner = {str(Path(r.trajectory)): r.agent for r in reports if r.trajectory}
    out: dict[str, FetchStats] = {}
    for path in sorted(root.rglob("*.jsonl")):
        agent = owner.get(str(path.relative_to(run_dir)))
        for line in path.read_bytes().splitlines():
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                out.setdefault(agent or "(unattributed)", FetchStats()).unreadable_lines += 1
                continue
            who = agent or (obj.get("agent") if isinstance(obj, dict) else None) or "(unattributed)"
            stats = out.setdefault(str(who), FetchStats())
            for call in fetch_calls(obj):
                stats.calls += 1
                kind = fetch_failure(call)
                if kind:
                    stats.failures[kind] += 1
    return out


def fetch_calls(obj: Any, depth: int = 0) -> list[dict]:
    """The fetch tool calls/results anywhere inside one step record."""
    if depth > 8:
        return []
    if isinstance(obj, dict):
        if any(obj.get(k) in FETCH_TOOLS for k in _TOOL_KEYS):
            return [obj]
        return [c for v in obj.values() for c in fetch_calls(v, depth + 1)]
    if isinstance(obj, list):
        return [c for v in obj for c in fetch_calls(v, depth + 1)]
    return []


def fetch_failure(call: dict) -> str | None:
    """The failure kind of one fetch call, or None when it succeeded."""
    for d in [call, *[call[k] for k in _RESULT_KEYS if isinstance(call.get(k), dict)]]:
        failure = d.get("failure")
        if isinstance(failure, dict):
            return str(failure.get("kind") or "error")
        if failure:
            return str(failure)
        if d.get("error") or d.get("ok") is False or d.get("failed") is True or d.get("status") in _FAILED_STATUS:
            return str(d.get("error_kind") or d.get("kind") or "error")
    return None
