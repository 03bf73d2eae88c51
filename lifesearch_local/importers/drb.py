"""DeepResearch Bench (DRB) → LifeSearch task and report files, with an exact way back.

Each DRB criterion becomes one Pass/Fail rubric (see `PHRASING`). Weight rule: the effective
DRB weight of a criterion is e = dimension_weight[dimension] × criterion weight (e sums to 1
per task). Our weight is w = max(0.1, round_half_up(e / max_e_in_task, 1)): scaled per task so
that the most important criterion gets 1.0 (a per-task scale cancels in Σw·y/Σw), rounded half
up to one decimal (the ratio is first taken to 9 decimals so that float noise, e.g.
0.11/0.2 = 0.5499999999999999, does not decide a tie), and floored at 0.1 so that no DRB
criterion is dropped. The mapping is monotone (rounding may tie, never invert). The price of
rounding is measured per task as the worst-case score deviation over all pass/fail patterns y:
max_y |Σy·w/Σw − Σy·e/Σe| = max(Σ positive parts, −Σ negative parts) of (w_i/Σw − e_i/Σe).
DRB has no type, necessity or priority; our rule: comprehensiveness and instruction_following
are Objective, insight and readability Subjective; instruction_following is Explicit, the rest
Implicit; w ≥ 0.5 is "Must Have", else "Nice to Have". `drb_source.jsonl` keeps every original
value so that `reconstruct_*` give back the DRB records exactly.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, StrictInt, StrictStr

from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.importers.common import (
    check_id,
    check_text,
    json_text,
    located,
    read_rows,
    write_import_dir,
)
from lifesearch_local.records import Domain, Report, Rubric, Task
from lifesearch_local.tasks import parse_domain

WEIGHT_RULE = (
    "e = dimension_weight[dimension] * criterion weight; "
    "w = max(0.1, round_half_up(e / max_e_in_task, 1)), the ratio first taken to 9 decimals; "
    "deviation = max over pass/fail patterns of |sum(y*w)/sum(w) - sum(y*e)/sum(e)|"
)
PHRASING = {
    "en": "Requirement: {criterion}. Pass only if the answer to this check is yes: {explanation}",
    "zh": "要求：{criterion}。仅当以下检查的答案为“是”时通过：{explanation}",
}
DIMENSIONS = ("comprehensiveness", "insight", "instruction_following", "readability")
RUBRIC_TYPE = {"comprehensiveness": "Objective", "instruction_following": "Objective",
               "insight": "Subjective", "readability": "Subjective"}
NECESSITY = {d: "Explicit" if d == "instruction_following" else "Implicit" for d in DIMENSIONS}
MUST_HAVE_FROM = 0.5
WEIGHT_FLOOR = 0.1

# DRB's 22 topics onto our 7 domains; DRB has no company-research topic, so none maps there.
DEFAULT_DOMAIN_MAP: dict[str, Domain] = {
    "Finance & Business": Domain.financial,
    **dict.fromkeys(("Science & Technology", "Education & Jobs", "Health", "Literature", "History",
                     "Art & Design", "Religion", "Social Life"), Domain.academic),
    **dict.fromkeys(("Software Development", "Software", "Hardware"), Domain.technical),
    **dict.fromkeys(("Industrial", "Transportation"), Domain.industry),
    "Crime & Law": Domain.policy,
    **dict.fromkeys(("Games", "Entertainment", "Sports & Fitness", "Home & Hobbies", "Travel",
                     "Food & Dining", "Fashion & Beauty"), Domain.everyday),
}


def _number(v: Any) -> Any:
    # Keep ints as ints and floats as floats (the round trip must give back the same JSON), and
    # refuse strings and booleans that pydantic's lax mode would coerce.
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"expected a finite number >= 0, got {v!r}")
    return v


Number = Annotated[int | float, BeforeValidator(_number)]
DrbId = StrictInt | StrictStr


class _Drb(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DrbQuery(_Drb):
    """One line of DRB query.jsonl."""

    id: DrbId
    topic: str
    language: Literal["en", "zh"]
    prompt: str


class DrbCriterion(_Drb):
    """One DRB criterion; its weight is relative to the other criteria of its dimension."""

    # Some DRB criteria carry annotator notes (comment, aspect, rationale_for_weight): kept for
    # the round trip, never shown to the judge.
    model_config = ConfigDict(extra="allow")
    criterion: str
    explanation: str
    weight: Number


class DrbCriteria(_Drb):
    """One line of DRB criteria.jsonl."""

    id: DrbId
    prompt: str
    dimension_weight: dict[str, Number]
    criterions: dict[str, list[DrbCriterion]]


class DrbReport(_Drb):
    """One line of a DRB reports-<agent>.jsonl."""

    id: DrbId
    prompt: str
    article: str


class SourceRubric(DrbCriterion):
    """The DRB criterion a rubric was made from, verbatim, with its dimension."""

    dimension: str


class DrbSource(_Drb):
    """One line of drb_source.jsonl: what a task's DRB records hold that tasks.jsonl does not."""

    task_id: str
    """Our task id (prefix + DRB id)."""
    id: DrbId
    """The DRB id, with its JSON type."""
    topic: str
    """The DRB topic the domain was mapped from."""
    dimension_weight: dict[str, Number]
    """The DRB dimension weights, in the file's order."""
    dimensions: list[str]
    """The dimensions of `criterions`, in the file's order (an empty one included)."""
    rubrics: dict[str, SourceRubric]
    """Rubric id → its DRB criterion."""


M = TypeVar("M", bound=BaseModel)


def read_drb(path: str | Path, model: type[M]) -> list[tuple[int, M]]:
    """(line, record) for each line of a DRB JSONL file; InputError names file:line: field."""
    return read_rows(path, model)


def _by_id(rows: list[tuple[int, M]], path: str | Path) -> dict[str, tuple[int, M]]:
    seen: dict[str, tuple[int, M]] = {}  # keyed by str(id): 7 and "7" name the same task
    for lineno, rec in rows:
        key = str(rec.id)  # type: ignore[attr-defined]
        if key in seen:
            raise InputError(str(path), lineno, "id", f"duplicate id {key!r} (first on line {seen[key][0]})")
        seen[key] = (lineno, rec)
    return seen


def drb_weight(e: float, e_max: float) -> float:
    """Our weight for effective DRB weight `e` in a task whose largest is `e_max` (module rule)."""
    ratio = Decimal(e / e_max).quantize(Decimal("1e-9"))
    return max(WEIGHT_FLOOR, float(ratio.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)))


def rounding_deviation(w: Sequence[float], e: Sequence[float]) -> float:
    """Worst case over pass/fail patterns of |score with w − score with e| for one task."""
    sw, se = sum(w), sum(e)
    d = [wi / sw - ei / se for wi, ei in zip(w, e, strict=True)]
    return max(sum(x for x in d if x > 0), -sum(x for x in d if x < 0))


def phrase(criterion: str, explanation: str, language: str) -> str:
    """The rubric text the judge sees: the criterion as a requirement, its explanation as the check."""
    return PHRASING[language].format(criterion=criterion.strip().rstrip(".。"), explanation=explanation.strip())


def load_domain_map(path: str | Path | None = None, base: dict[str, Domain] | None = None) -> dict[str, Domain]:
    """`base` (default DEFAULT_DOMAIN_MAP) with the entries of a YAML/JSON `topic: domain` file laid over it."""
    mapping = dict(DEFAULT_DOMAIN_MAP if base is None else base)
    if path is None:
        return mapping
    from lifesearch_local.configfile import load_yaml  # JSON is read by the YAML parser too

    for topic, value in load_yaml(path).items():
        try:
            mapping[str(topic)] = parse_domain(value)
        except ValueError as e:
            raise InputError(str(path), None, str(topic), str(e)) from None
    return mapping


def _domains(queries: dict[str, tuple[int, DrbQuery]], mapping: dict[str, Domain], path: str) -> dict[str, Domain]:
    """Domain per query id; one error naming every unmapped topic and the flag that maps them."""
    # reversed: the first line a topic appears on is the one kept (and reported)
    missing = {q.topic: lineno for lineno, q in reversed(queries.values()) if q.topic not in mapping}
    if missing:
        names = ", ".join(repr(t) for t in sorted(missing, key=missing.__getitem__))
        raise InputError(path, min(missing.values()), "topic", f"no domain for DRB topic(s) {names}; map them "
                         "with --domain-map FILE (YAML or JSON `topic: domain`, domains as `lifesearch validate` accepts)")
    return {key: mapping[q.topic] for key, (_, q) in queries.items()}


def _check_criteria(c: DrbCriteria, path: str, lineno: int) -> None:
    for dim, xs in c.criterions.items():
        for i, x in enumerate(xs):
            check_text(x.criterion, path, lineno, f"criterions.{dim}[{i}].criterion", "criterion")
        if dim not in DIMENSIONS:
            raise InputError(path, lineno, f"criterions.{dim}", f"unknown DRB dimension (expected one of {list(DIMENSIONS)})")
        if dim not in c.dimension_weight:
            raise InputError(path, lineno, "dimension_weight", f"no weight for dimension {dim!r}")
    if not any(c.dimension_weight[d] * x.weight > 0 for d, xs in c.criterions.items() for x in xs):
        raise InputError(path, lineno, "criterions", "no criterion with a positive effective weight")


def convert_task(q: DrbQuery, c: DrbCriteria, domain: Domain, prefix: str = "drb-") -> tuple[Task, DrbSource, float]:
    """One DRB task as our Task, its source record and its rounding deviation."""
    items = [(dim, x, c.dimension_weight[dim] * x.weight) for dim, xs in c.criterions.items() for x in xs]
    e = [eff for _, _, eff in items]
    w = [drb_weight(eff, max(e)) for eff in e]
    rubrics = [
        Rubric(id=f"R{i}", criterion=phrase(x.criterion, x.explanation, q.language), type=RUBRIC_TYPE[dim],
               necessity=NECESSITY[dim], priority="Must Have" if wi >= MUST_HAVE_FROM else "Nice to Have", weight=wi,
               dimension=dim)
        for i, ((dim, x, _), wi) in enumerate(zip(items, w), start=1)
    ]
    task = Task(id=f"{prefix}{q.id}", language=q.language, domain=domain, question=q.prompt, rubrics=rubrics)
    source = DrbSource(
        task_id=task.id, id=c.id, topic=q.topic, dimension_weight=c.dimension_weight, dimensions=list(c.criterions),
        rubrics={r.id: SourceRubric(dimension=dim, **x.model_dump()) for r, (dim, x, _) in zip(rubrics, items)},
    )
    return task, source, rounding_deviation(w, e)


def agent_from_path(path: str | Path) -> str:
    """`reports-<name>.jsonl` → `<name>` (DRB's naming); any other file → its name without .jsonl."""
    name = Path(path).name.removesuffix(".jsonl").removeprefix("reports-")
    if not name:
        raise LifesearchError(f"{path}: cannot derive an agent name from the file name; pass --agent NAME")
    return name


def convert_reports(path: str | Path, tasks: dict[str, Task], agent: str, prefix: str = "drb-") -> list[Report]:
    """DRB reports as our Reports (run 0, text = article); each must match a task and its prompt."""
    out = []
    for key, (lineno, rep) in _by_id(read_drb(path, DrbReport), path).items():
        task = tasks.get(f"{prefix}{key}")
        if task is None:
            raise InputError(str(path), lineno, "id", f"report for id {rep.id!r}, which is not in the task files")
        if rep.prompt != task.question:
            raise InputError(str(path), lineno, "prompt", f"differs from the query prompt of id {rep.id!r}")
        out.append(Report(task_id=task.id, agent=agent, run=0, text=rep.article))
    return out


@dataclass
class DrbImport:
    """The converted files, before they are written."""

    tasks: list[Task]
    sources: list[DrbSource]
    deviations: dict[str, float]
    domain_map: dict[str, Domain]
    reports: list[Report] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)


def convert(queries: str | Path, criteria: str | Path, *, domain_map: dict[str, Domain] | None = None,
            prefix: str = "drb-") -> DrbImport:
    """Pair query.jsonl and criteria.jsonl by id (prompts must agree) and convert each task."""
    qs, cs = _by_id(read_drb(queries, DrbQuery), queries), _by_id(read_drb(criteria, DrbCriteria), criteria)
    for key, (lineno, q) in qs.items():
        if key not in cs:
            raise InputError(str(queries), lineno, "id", f"id {q.id!r} has no record in {criteria}")
    for key, (lineno, c) in cs.items():
        if key not in qs:
            raise InputError(str(criteria), lineno, "id", f"id {c.id!r} is not in {queries}")
        if c.prompt != qs[key][1].prompt:
            raise InputError(str(criteria), lineno, "prompt",
                             f"differs from the prompt of id {c.id!r} at {queries}:{qs[key][0]}")
        _check_criteria(c, str(criteria), lineno)
    mapping = domain_map if domain_map is not None else dict(DEFAULT_DOMAIN_MAP)
    domains = _domains(qs, mapping, str(queries))
    result = DrbImport(tasks=[], sources=[], deviations={}, domain_map=mapping,
                       inputs={"queries": str(queries), "criteria": str(criteria), "id_prefix": prefix})
    for key, (lineno, q) in qs.items():
        check_text(q.prompt, queries, lineno, "prompt", "question")
        check_id(f"{prefix}{q.id}", queries, lineno, "id")
        with located(queries, lineno):  # our id (prefix + DRB id) as `validate` checks it
            task, source, dev = convert_task(q, cs[key][1], domains[key], prefix)
        result.tasks.append(task)
        result.sources.append(source)
        result.deviations[task.id] = dev
    return result


def import_drb(queries: str | Path, criteria: str | Path, reports: str | Path | None = None, *,
               agent: str | None = None, domain_map: str | Path | None = None, prefix: str = "drb-") -> DrbImport:
    """The whole conversion: tasks (domain map defaults overridden by the `domain_map` file) and reports."""
    result = convert(queries, criteria, domain_map=load_domain_map(domain_map), prefix=prefix)
    result.inputs["domain_map"] = None if domain_map is None else str(domain_map)
    if reports is not None:
        agent = check_id(agent or agent_from_path(reports), reports, None, "agent (--agent, or from the file name)")
        result.reports = convert_reports(reports, {t.id: t for t in result.tasks}, agent, prefix)
        result.inputs.update(reports=str(reports), agent=agent)
    return result


def summary(result: DrbImport) -> dict[str, Any]:
    """The import.json record: rules, domain map, counts and the rounding deviation."""
    rubrics = [(t, r) for t in result.tasks for r in t.rubrics]
    devs = result.deviations
    worst = max(devs, key=devs.__getitem__)
    return {
        "inputs": result.inputs,
        "weight_rule": WEIGHT_RULE,
        "phrasing": PHRASING,
        "field_rules": {"type": RUBRIC_TYPE, "necessity": NECESSITY, "priority": f"Must Have if w >= {MUST_HAVE_FROM}"},
        "domain_map": {k: v.value for k, v in result.domain_map.items()},
        "topics": dict(Counter(s.topic for s in result.sources)),
        "counts": {
            "tasks": len(result.tasks), "rubrics": len(rubrics), "reports": len(result.reports),
            "languages": dict(Counter(t.language for t in result.tasks)),
            "domains": {d.value: n for d in Domain if (n := sum(t.domain == d for t in result.tasks))},
            "weights": {f"{w:.1f}": n for w, n in sorted(Counter(r.weight for _, r in rubrics).items())},
            "priority": dict(Counter(r.priority for _, r in rubrics)),
            "criterion_notes_kept": dict(Counter(k for s in result.sources for x in s.rubrics.values()
                                                 for k in x.model_extra or {})),
        },
        "rounding_deviation": {"max": round(devs[worst], 6), "max_task": worst,
                               "mean": round(sum(devs.values()) / len(devs), 6),
                               "per_task": {k: round(v, 6) for k, v in devs.items()}},
    }


def write_import(result: DrbImport, out: str | Path, *, force: bool = False) -> Path:
    """Write tasks/reports/drb_source/import.json into a temp dir, then rename it to `out`."""
    files: dict[str, Any] = {"tasks.jsonl": result.tasks, "drb_source.jsonl": result.sources}
    if result.reports:
        files["reports.jsonl"] = result.reports
    files["import.json"] = json_text(summary(result))
    return write_import_dir(out, files, source_file="drb_source.jsonl", command="lifesearch import drb", force=force)
