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

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifesearch_local.analysis.scoring import AgentScore
from lifesearch_local.errors import IncompleteRunError, InputError, LifesearchError
from lifesearch_local.records import Judgment, Label, Report, Task
from lifesearch_local.rundir.jsonl import parse_json, read_json_file, read_records
from lifesearch_local.rundir.manifest import manifest_data

FETCH_TOOLS = {"web_fetch", "fetch"}
_TOOL_KEYS = ("tool", "name", "tool_name", "function")
_RESULT_KEYS = ("result", "observation", "output")
_FAILED_STATUS = {"error", "failed", "failure"}
CERTIFY_NAME = "certify.json"  # where `certify --out` puts its study for the report to show
CERTIFY_KEYS = ("judge", "reference", "decision", "verdict", "agreement", "agents", "bias_index", "ranking",
                "categories", "category_field", "bootstrap")


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
    config_text: str | None = None
    scores: dict[str, dict[str, AgentScore]] = field(default_factory=dict)
    score_error: str | None = None
    agreement: dict[str, dict] | None = None
    agreement_error: str | None = None
    uncertainty: dict = field(default_factory=dict)
    """judge name → stats.ScoreUncertainty (CIs and paired comparisons of its agents)."""
    agreement_stats: dict | None = None
    """agreement_stats.agreement_uncertainty: bootstrap settings and judge-vs-judge comparisons."""
    disagreements: list[dict] = field(default_factory=list)
    """disagreements.disagreements: every labelled decision a judge got wrong, most confident first."""
    fetch: dict[str, FetchStats] = field(default_factory=dict)
    reporteval: dict[str, dict[str, dict]] | None = None
    certify: dict | None = None
    """The study `lifesearch certify --out RUN_DIR/certify.json` wrote, when there is one."""
    allow_missing: bool = False
    """Whether rubrics without a judgment were counted as not satisfied (`report --allow-missing`)."""


def load_run(run_dir: Path, labels_path: Path | None = None, *, tasks_path: Path | None = None,
             reports_path: Path | None = None, allow_missing: bool = False, task_ids: set[str] | None = None) -> RunData:
    """Read tasks, reports, judgments, labels, manifest, config and trajectories; score them.

    Inputs a stage read from elsewhere (`judge --out DIR` keeps only its judgments) are found
    through `tasks_path` / `reports_path`, else the paths the manifest records under `inputs`.
    A rubric without a judgment is refused as `score` refuses it (IncompleteRunError) unless
    `allow_missing`; judgments for tasks the tasks file lacks are refused naming that file;
    `task_ids` keeps only those tasks and their records."""
    from lifesearch_local.tasks import check_known_tasks, chosen_tasks, load_tasks

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise LifesearchError(f"{run_dir}: no such run directory")
    manifest = manifest_data(run_dir)  # a damaged one is one line naming `lifesearch repair`
    tasks_file = run_input(run_dir, "tasks", tasks_path, manifest)
    if tasks_file is None and (run_dir / "judgments.jsonl").exists():
        raise LifesearchError(f"{run_dir}: no tasks.jsonl and no tasks path recorded in its manifest; pass --tasks FILE "
                              "(the tasks file the judgments were made from)")
    reports_file = run_input(run_dir, "reports", reports_path, manifest)
    data = RunData(
        run_dir=run_dir,
        tasks=load_tasks(tasks_file) if tasks_file else [],
        reports=_records(reports_file, Report) if reports_file else [],
        judgments=_records(run_dir / "judgments.jsonl", Judgment),
        manifest=manifest,
        allow_missing=allow_missing,
    )
    if tasks_file is not None:
        check_known_tasks(data.tasks, (j.task_id for j in data.judgments), tasks_file)
    if labels_path is None:
        labels_path = run_input(run_dir, "labels", None, manifest)
    if labels_path is not None:
        data.labels, data.labels_path = read_records(labels_path, Label), Path(labels_path)
    if task_ids is not None:
        data.tasks, data.reports, data.judgments, data.labels = chosen_tasks(
            data.tasks, task_ids, tasks_file or run_dir, data.reports, data.judgments, data.labels)
    if (run_dir / "config.yaml").exists():
        data.config_text = (run_dir / "config.yaml").read_text(encoding="utf-8", errors="replace")
    _score(data)
    _agree(data)
    data.fetch = fetch_stats(run_dir, data.reports)
    if (run_dir / "reporteval_summary.json").exists():  # written by `lifesearch reporteval`
        data.reporteval = _reporteval_summary(run_dir / "reporteval_summary.json")
    if (run_dir / CERTIFY_NAME).exists():  # written by `lifesearch certify --out`
        data.certify = _certify_study(run_dir / CERTIFY_NAME)
    return data


def run_input(run_dir: Path, name: str, given: Path | None, manifest: dict | None) -> Path | None:
    """An input file of a run: as given, else the run's own or the one its manifest records
    (`rundir.directory.recorded_input`)."""
    from lifesearch_local.rundir.directory import recorded_input

    if given is not None:
        return Path(given)
    return recorded_input(run_dir, name, manifest, why=f"pass --{name} FILE to use it anyway")


def _reporteval_summary(path: Path) -> dict[str, dict[str, dict]]:
    """{judge: {agent: {metric: {field: number}}}} as `reporteval.aggregate.summarize` writes it;
    anything else is one InputError naming the file and the field."""
    from pydantic import TypeAdapter, ValidationError

    from lifesearch_local.rundir.jsonl import validation_field

    try:
        return TypeAdapter(dict[str, dict[str, dict[str, dict[str, float | None]]]]).validate_python(read_json_file(path))
    except ValidationError as e:
        where, msg = validation_field(e)
        raise InputError(str(path), None, where, msg) from None


def _certify_study(path: Path) -> dict:
    """The study `certify --out` wrote (a JSON object), read through the bounded JSON reader."""
    got = read_json_file(path)
    if not isinstance(got, dict):
        raise InputError(str(path), None, None, f"a JSON object expected (the certify study), got {type(got).__name__}")
    missing = [k for k in CERTIFY_KEYS if k not in got]
    if missing:
        raise InputError(str(path), None, missing[0], "missing: not a study `certify --out` wrote")
    return got


def _records(path: Path, model: type) -> list:
    return read_records(path, model) if path.exists() else []


def _score(data: RunData) -> None:
    from lifesearch_local.analysis.scoring import score_by_judge, uncertainty_by_judge

    if not data.judgments:
        return
    try:
        # As `score`: unjudged rubrics counting as unsatisfied would read as the agents' failures
        # (a partial judge run scored 0 everywhere), so that takes --allow-missing, and the page says how many.
        data.scores = score_by_judge(data.tasks, data.judgments, allow_missing=data.allow_missing, reports=data.reports)
        data.uncertainty = uncertainty_by_judge(data.tasks, data.judgments, data.scores)
    except IncompleteRunError as e:
        raise IncompleteRunError(f"{data.run_dir}: {e}") from None
    except LifesearchError as e:
        data.score_error = str(e)


def _agree(data: RunData) -> None:
    from lifesearch_local.analysis.agreement import agreement
    from lifesearch_local.analysis.agreement_ci import agreement_uncertainty
    from lifesearch_local.analysis.disagreements import disagreements
    from lifesearch_local.analysis.labels import label_index

    if not data.labels or not data.judgments:
        return
    try:
        sources = {lab.source for lab in data.labels}
        labels = label_index(data.labels)
        data.agreement = agreement(data.tasks, data.judgments, labels, exclude=sources)
        data.agreement_stats = agreement_uncertainty(data.tasks, data.judgments, labels, data.agreement)
        data.disagreements = disagreements(data.tasks, data.judgments, labels, exclude=sources)
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
                obj = parse_json(line, str(path), None)
            except InputError:
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
