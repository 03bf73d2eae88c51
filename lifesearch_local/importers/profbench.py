"""ProfBench (NVIDIA) → LifeSearch tasks, one report per graded system, and its human labels.

A ProfBench row (the fields its official loader reads): `task_id`, `domain`, `prompt`, `rubrics`
[{`criterion_description`, `criterion_weight`, `criterion_type`, `<system>_fulfilment`}] and
`<system>_response` (the release grades o3, grok4 and r1-0528). Weight rule: ProfBench's own score
(`score_report_generation.py`) weighs a criterion by its level, Critical 4, Major 3, Minor 2,
Additional 1, and scores Σ scale·met / Σ scale per report; our w = scale / 4 (1.0, 0.75, 0.5,
0.25) gives the same score exactly, since a per-task factor cancels in Σw·y/Σw. Every other key is
kept verbatim in `profbench_source.jsonl`, so `reconstruct_rows` gives back the original rows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from lifesearch_local.errors import InputError
from lifesearch_local.importers.common import (
    check_id,
    check_text,
    import_inputs,
    json_text,
    located,
    read_rows,
    unique_by,
    write_import_dir,
)
from lifesearch_local.importers.drb import load_domain_map
from lifesearch_local.records import Domain, Label, Report, Rubric, Task
from lifesearch_local.rundir.jsonl import iter_json_lines

LEVEL_SCALE = {"Critical": 4, "Major": 3, "Minor": 2, "Additional": 1}  # score_report_generation.py
TOP_SCALE = max(LEVEL_SCALE.values())
MUST_HAVE = ("Critical", "Major")
SUBJECTIVE_TYPES = ("Style",)
DEFAULT_DOMAIN_MAP: dict[str, Domain] = {
    "Physics PhD": Domain.academic, "Chemistry PhD": Domain.academic,
    "Finance MBA": Domain.financial, "Consulting MBA": Domain.company,
}
SOURCE_FILE = "profbench_source.jsonl"
RESPONSE, FULFILMENT = "_response", "_fulfilment"


class ProfCriterion(BaseModel):
    """One criterion of a ProfBench row; `<system>_fulfilment` keys and any others are extras."""

    model_config = ConfigDict(extra="allow")
    criterion_description: str
    criterion_weight: str
    criterion_type: str | list[str]


class ProfRow(BaseModel):
    """One ProfBench task; `<system>_response` keys and any others (filepaths, …) are extras."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    domain: str
    prompt: str
    rubrics: list[ProfCriterion]


class ProfSource(BaseModel):
    """One line of profbench_source.jsonl: the row less what tasks, reports and labels hold."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    """Our task id (prefix + ProfBench task_id)."""
    row: dict[str, Any]
    """The row's keys in order; task_id, prompt, rubrics and the responses hold None (rebuilt),
    every other key its value verbatim."""
    criteria: dict[str, dict[str, Any]]
    """Rubric id → the criterion's keys in order; the description and fulfilments hold None, other
    keys (weight, type, …) verbatim."""
    int_fulfilment: list[str] = []
    """`<rubric id>/<system>` of fulfilments written as 0/1 rather than false/true."""


@dataclass
class ProfImport:
    """The converted files, before they are written."""

    tasks: list[Task] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    sources: list[ProfSource] = field(default_factory=list)
    domain_map: dict[str, Domain] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)


def systems_of(row: ProfRow) -> list[str]:
    """The graded systems of a row: `<name>` of each `<name>_response` key, in the row's order."""
    return [k.removesuffix(RESPONSE) for k in row.model_extra or {} if k.endswith(RESPONSE)]


def _fulfilment(value: Any, path: str, lineno: int, where: str) -> tuple[bool, bool]:
    """(decision, written as an int) of one fulfilment; anything but a bool or 0/1 is an error."""
    if isinstance(value, bool):
        return value, False
    if isinstance(value, int) and value in (0, 1):
        return bool(value), True
    raise InputError(path, lineno, where, f"expected true/false (or 1/0), got {value!r}")


def _check(row: ProfRow, systems: list[str], path: str, lineno: int) -> None:
    extra = row.model_extra or {}
    if not systems:
        raise InputError(path, lineno, "(record)", "no <system>_response field (the release has o3, grok4, r1-0528)")
    for s in systems:
        if not isinstance(extra[s + RESPONSE], str):
            raise InputError(path, lineno, s + RESPONSE, f"expected the report text, got {type(extra[s + RESPONSE]).__name__}")
    check_text(row.prompt, path, lineno, "prompt", "question")
    for s in systems:
        check_id(s, path, lineno, s + RESPONSE)
    if not row.rubrics:
        raise InputError(path, lineno, "rubrics", "no criteria")
    for i, c in enumerate(row.rubrics):
        check_text(c.criterion_description, path, lineno, f"rubrics[{i}].criterion_description", "criterion")
        if c.criterion_weight not in LEVEL_SCALE:
            raise InputError(path, lineno, f"rubrics[{i}].criterion_weight",
                             f"unknown level {c.criterion_weight!r} (expected one of {list(LEVEL_SCALE)})")
        keys = set(c.model_extra or {})
        for s in systems:
            if s + FULFILMENT not in keys:
                raise InputError(path, lineno, f"rubrics[{i}].{s}{FULFILMENT}", f"missing: system {s!r} has a response")
        for k in keys:
            if k.endswith(FULFILMENT) and k.removesuffix(FULFILMENT) not in systems:
                raise InputError(path, lineno, f"rubrics[{i}].{k}", "a fulfilment of a system with no response")


def _rubric(i: int, c: ProfCriterion) -> Rubric:
    types = [c.criterion_type] if isinstance(c.criterion_type, str) else c.criterion_type
    return Rubric(id=f"R{i}", criterion=c.criterion_description,
                  type="Subjective" if any(t in SUBJECTIVE_TYPES for t in types) else "Objective",
                  necessity="Implicit", priority="Must Have" if c.criterion_weight in MUST_HAVE else "Nice to Have",
                  weight=LEVEL_SCALE[c.criterion_weight] / TOP_SCALE, dimension=", ".join(types))


def convert_row(raw: dict[str, Any], row: ProfRow, domain: Domain, path: str, lineno: int,
                prefix: str = "pb-") -> tuple[Task, list[Report], list[Label], ProfSource]:
    """One ProfBench row (`raw`: as read, for its key order; `row`: validated) as our task, its
    reports (one per system, run 0), human labels and source."""
    systems = systems_of(row)
    check_id(f"{prefix}{row.task_id}", path, lineno, "task_id")
    _check(row, systems, path, lineno)
    rubrics = [_rubric(i, c) for i, c in enumerate(row.rubrics, start=1)]
    task = Task(id=f"{prefix}{row.task_id}", language="en", domain=domain, question=row.prompt, rubrics=rubrics)
    extra = row.model_extra or {}
    reports = [Report(task_id=task.id, agent=s, run=0, text=extra[s + RESPONSE]) for s in systems]
    labels, ints, criteria = [], [], {}
    for i, (r, c) in enumerate(zip(rubrics, row.rubrics)):
        for s in systems:
            yes, as_int = _fulfilment((c.model_extra or {})[s + FULFILMENT], path, lineno, f"rubrics[{i}].{s}{FULFILMENT}")
            labels.append(Label(task_id=task.id, agent=s, run=0, rubric_id=r.id, satisfied=yes, source="human"))
            if as_int:
                ints.append(f"{r.id}/{s}")
        criteria[r.id] = {k: None if k == "criterion_description" or k.endswith(FULFILMENT) else v
                          for k, v in raw["rubrics"][i].items()}
    derived = {"task_id", "prompt", "rubrics", *(s + RESPONSE for s in systems)}
    top = {k: None if k in derived else v for k, v in raw.items()}
    return task, reports, labels, ProfSource(task_id=task.id, row=top, criteria=criteria, int_fulfilment=ints)


def import_profbench(path: str | Path, *, domain_map: str | Path | None = None, prefix: str = "pb-") -> ProfImport:
    """Every row of a ProfBench JSONL file (task ids unique, domains mapped)."""
    rows = read_rows(path, ProfRow)
    raws = dict(iter_json_lines(path))  # pydantic puts declared fields before extras: keep the file's order
    unique_by(rows, lambda r: r.task_id, path, "task_id")
    mapping = load_domain_map(domain_map, base=DEFAULT_DOMAIN_MAP)
    out = ProfImport(domain_map=mapping, inputs={"file": str(path), "id_prefix": prefix,
                                                 "domain_map": None if domain_map is None else str(domain_map)})
    for lineno, row in rows:
        if row.domain not in mapping:
            raise InputError(str(path), lineno, "domain", f"no LifeSearch domain for ProfBench domain {row.domain!r}; "
                             "map it with --domain-map FILE (YAML or JSON `name: domain`)")
        with located(path, lineno):  # our id (prefix + task_id) as `validate` checks it
            task, reports, labels, source = convert_row(raws[lineno], row, mapping[row.domain], str(path), lineno, prefix)
        out.tasks.append(task)
        out.reports += reports
        out.labels += labels
        out.sources.append(source)
    return out


def summary(result: ProfImport) -> dict[str, Any]:
    """The import.json record: inputs, weight and field rules, domain map, counts."""
    rubrics = [r for t in result.tasks for r in t.rubrics]
    return {
        "inputs": result.inputs,
        "weight_rule": {level: scale / TOP_SCALE for level, scale in LEVEL_SCALE.items()},
        "field_rules": {"type": f"Subjective if the criterion type is one of {list(SUBJECTIVE_TYPES)}, else Objective",
                        "necessity": "Implicit", "priority": f"Must Have for {list(MUST_HAVE)}, else Nice to Have",
                        "dimension": "the criterion type (types joined by ', ')", "language": "en"},
        "domain_map": {k: v.value for k, v in result.domain_map.items()},
        "counts": {
            "tasks": len(result.tasks), "rubrics": len(rubrics), "reports": len(result.reports), "labels": len(result.labels),
            "domains": {d.value: n for d in Domain if (n := sum(t.domain == d for t in result.tasks))},
            "levels": dict(Counter(c["criterion_weight"] for s in result.sources for c in s.criteria.values())),
            "dimensions": dict(Counter(r.dimension for r in rubrics)),
            "labels_by_system": {a: {"satisfied": sum(x.satisfied for x in result.labels if x.agent == a),
                                     "of": sum(x.agent == a for x in result.labels)}
                                 for a in dict.fromkeys(x.agent for x in result.labels)},
        },
    }


def write_profbench(result: ProfImport, out: str | Path, *, force: bool = False) -> Path:
    """tasks, reports, labels, profbench_source and import.json, written atomically into `out`."""
    files: dict[str, Any] = {"tasks.jsonl": result.tasks, "reports.jsonl": result.reports,
                             "labels.jsonl": result.labels, SOURCE_FILE: result.sources,
                             "import.json": json_text(summary(result))}
    return write_import_dir(out, files, source_file=SOURCE_FILE, command="lifesearch import profbench", force=force)


def reconstruct_rows(tasks: list[Task], reports: list[Report], labels: list[Label], sources: list[ProfSource],
                     prefix: str = "pb-") -> list[dict[str, Any]]:
    """The ProfBench rows an import was made from, exactly (key order and JSON types included)."""
    by_id = {t.id: t for t in tasks}
    text = {(r.task_id, r.agent): r.text for r in reports}
    met = {(x.task_id, x.agent, x.rubric_id): x.satisfied for x in labels}
    out = []
    for s in sources:
        task = by_id[s.task_id]
        rubrics = []
        for r in task.rubrics:
            c = dict(s.criteria[r.id])
            for k in c:
                if k == "criterion_description":
                    c[k] = r.criterion
                elif k.endswith(FULFILMENT):
                    system = k.removesuffix(FULFILMENT)
                    yes = met[(task.id, system, r.id)]
                    c[k] = int(yes) if f"{r.id}/{system}" in s.int_fulfilment else yes
            rubrics.append(c)
        fill = {"task_id": task.id.removeprefix(prefix), "prompt": task.question, "rubrics": rubrics}
        out.append({k: fill[k] if k in fill else (text[(task.id, k.removesuffix(RESPONSE))] if v is None and k.endswith(RESPONSE)
                                                   else v) for k, v in s.row.items()})
    return out


def load_dir(out: str | Path) -> tuple[list[Task], list[Report], list[Label], list[ProfSource], str]:
    """The records of a `lifesearch import profbench` directory and its id prefix."""
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    out = Path(out)
    prefix = import_inputs(out, "id_prefix")["id_prefix"]
    return (load_tasks(out / "tasks.jsonl"), read_records(out / "reports.jsonl", Report),
            read_records(out / "labels.jsonl", Label), [s for _, s in read_rows(out / SOURCE_FILE, ProfSource)], prefix)

