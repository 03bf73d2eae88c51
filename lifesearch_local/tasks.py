"""Load task files: accept the paper's spellings, reject bad input with file:line:field."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lifesearch_local.errors import InputError, LifesearchError, excerpt
from lifesearch_local.records import DOMAIN_ABBREV, DOMAIN_TITLES, Domain, Task
from lifesearch_local.rundir.jsonl import load_unique, validation_field

# Aliases seen in rubric datasets (DeepResearch Bench, ResearchRubrics, the paper's text).
TASK_ALIASES = {
    "id": ("id", "task_id", "qid"),
    "language": ("language", "lang"),
    "domain": ("domain", "category", "taxonomy"),
    "question": ("question", "prompt", "query", "task", "tasks"),
    "as_of": ("as_of", "as_of_date", "cutoff", "cutoff_date"),
    "rubrics": ("rubrics", "criteria"),
    "blocked": ("blocked",),
}
RUBRIC_ALIASES = {
    "id": ("id", "rubric_id"),
    "criterion": ("criterion", "text", "rubric", "description"),
    "type": ("type",),
    "necessity": ("necessity",),
    "priority": ("priority",),
    "weight": ("weight",),
    "dimension": ("dimension",),
}


def _norm(s: str) -> str:
    return re.sub(r"[^0-9a-z\u4e00-\u9fff]+", "", s.lower())


_ENUMS = {
    "type": {"objective": "Objective", "subjective": "Subjective", "客观": "Objective", "主观": "Subjective"},
    "necessity": {"explicit": "Explicit", "implicit": "Implicit", "明示": "Explicit", "隐含": "Implicit"},
    "priority": {
        "musthave": "Must Have",
        "must": "Must Have",
        "nicetohave": "Nice to Have",
        "nice": "Nice to Have",
        "必须满足": "Must Have",
        "锦上添花": "Nice to Have",
    },
}
_LANGUAGES = {"en": "en", "english": "en", "enus": "en", "zh": "zh", "chinese": "zh", "zhcn": "zh", "中文": "zh"}

# Chinese names of the domains: what the Chinese-query classifier (prompts/curate_domain_zh.txt,
# our translation of the paper's B.2) asks for.
DOMAIN_NAMES_ZH: dict[Domain, str] = {
    Domain.financial: "金融市场分析",
    Domain.academic: "学术与专业文献",
    Domain.company: "公司与竞品调研",
    Domain.industry: "行业资讯与趋势聚合",
    Domain.policy: "政策法规与政府数据",
    Domain.technical: "技术工具与开发者资源",
    Domain.everyday: "日常事实",
}
# Other Chinese spellings a classifier may answer with.
_DOMAIN_ALIASES_ZH: dict[str, Domain] = {
    "金融市场": Domain.financial,
    "学术文献": Domain.academic,
    "学术与专业文献检索": Domain.academic,
    "公司与竞争对手调研": Domain.company,
    "公司与竞品研究": Domain.company,
    "公司与竞争对手研究": Domain.company,
    "行业新闻与趋势聚合": Domain.industry,
    "行业资讯与趋势": Domain.industry,
    "政策与政府数据": Domain.policy,
    "政策、法规与政府数据": Domain.policy,
    "技术工具与开发资源": Domain.technical,
    "技术工具": Domain.technical,
    "日常生活事实": Domain.everyday,
}


def parse_language(value: Any) -> str:
    """`en` or `zh` from any accepted spelling (ValueError if unknown)."""
    lang = _LANGUAGES.get(_norm(str(value)))
    if lang is None:
        raise ValueError(f"unknown language {value!r} (expected en or zh)")
    return lang


def _domain_keys() -> dict[str, Domain]:
    keys: dict[str, Domain] = {}
    for d in Domain:
        for k in (d.value, DOMAIN_TITLES[d], DOMAIN_ABBREV[d]):
            keys[_norm(k)] = d
    # The paper's figure and classifier spell some domains differently.
    keys[_norm("Company & competitor")] = Domain.company
    keys[_norm("Financial markets")] = Domain.financial
    keys[_norm("Policy, regulation and government data")] = Domain.policy
    keys[_norm("Industry news & trends")] = Domain.industry
    # The classifier (prompts/curate_domain_*.txt) answers with the English or Chinese name.
    for d, name in DOMAIN_NAMES_ZH.items():
        keys[_norm(name)] = d
    for name, d in _DOMAIN_ALIASES_ZH.items():
        keys[_norm(name)] = d
    return keys


_DOMAINS = _domain_keys()


def parse_domain(value: Any) -> Domain:
    """Map any of the paper's spellings of a domain to a `Domain` (ValueError if unknown)."""
    key = _norm(str(value))
    if key in _DOMAINS:
        return _DOMAINS[key]
    for d in Domain:  # "Technical tools" or "academic literature" style prefixes
        if key.startswith(d.value):
            return d
    choices = ", ".join(d.value for d in Domain)
    raise ValueError(f"unknown domain {value!r} (expected one of: {choices}, or the paper's full names)")


def _pick(obj: dict[str, Any], aliases: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, names in aliases.items():
        for n in names:
            if n in obj:
                out[field] = obj[n]
                break
    return out


def _normalize_rubric(raw: Any, index: int, where: tuple[str, int]) -> dict[str, Any]:
    path, lineno = where
    field = f"rubrics[{index}]"
    if not isinstance(raw, dict):
        raise InputError(path, lineno, field, "expected an object")
    r = _pick(raw, RUBRIC_ALIASES)
    r.setdefault("id", f"R{index + 1}")
    r["id"] = str(r["id"])
    for name, table in _ENUMS.items():
        if name in r:
            value = r[name]
            if _norm(str(value)) not in table:
                allowed = sorted(set(table.values()))
                raise InputError(path, lineno, f"{field}.{name}", f"unknown value {value!r} (expected {allowed})")
            r[name] = table[_norm(str(value))]
    if "weight" in r:
        if isinstance(r["weight"], bool):  # float(True) is 1.0: a flag where a number belongs is a mistake
            raise InputError(path, lineno, f"{field}.weight", f"expected a number, got {str(r['weight']).lower()}")
        try:
            w = float(r["weight"])
        except (TypeError, ValueError):
            raise InputError(path, lineno, f"{field}.weight", f"not a number: {r['weight']!r}") from None
        if not 0.0 <= w <= 1.0:
            raise InputError(path, lineno, f"{field}.weight", f"weight {w} is outside [0, 1]")
        r["weight"] = w
    return r


def parse_task(obj: dict[str, Any], path: str, lineno: int, *, draft: bool = False) -> Task:
    """Validate one task object from line `lineno` of `path`.

    With `draft`, a task without rubrics (missing or empty list) is accepted: the output of
    `lifesearch curate`, waiting for experts to write its rubrics.
    """
    t = _pick(obj, TASK_ALIASES)
    if "language" in t:
        try:
            t["language"] = parse_language(t["language"])
        except ValueError as e:
            raise InputError(path, lineno, "language", str(e)) from None
    if "domain" in t:
        try:
            t["domain"] = parse_domain(t["domain"])
        except ValueError as e:
            raise InputError(path, lineno, "domain", str(e)) from None
    if isinstance(t.get("id"), int):
        t["id"] = str(t["id"])
    rubrics = t.get("rubrics")
    if draft and rubrics in (None, []):
        rubrics = []
    elif not isinstance(rubrics, list) or not rubrics:
        hint = " (a draft without rubrics validates with --draft)" if rubrics in (None, []) else ""
        raise InputError(path, lineno, "rubrics", "a non-empty list of rubrics is required" + hint)
    t["rubrics"] = [_normalize_rubric(r, i, (path, lineno)) for i, r in enumerate(rubrics)]
    if t.get("as_of") in ("", None):
        t.pop("as_of", None)
    try:
        task = Task.model_validate(t)
    except ValidationError as e:
        field, msg = validation_field(e)
        raise InputError(path, lineno, field, msg) from None
    seen: set[str] = set()
    for i, r in enumerate(task.rubrics):
        if r.id in seen:
            raise InputError(path, lineno, f"rubrics[{i}].id", f"duplicate rubric id {r.id!r} in task {task.id!r}")
        seen.add(r.id)
    if task.rubrics and task.total_weight <= 0:
        raise InputError(path, lineno, "rubrics", f"task {task.id!r} has zero total rubric weight")
    return task


def load_tasks(path: str | Path, draft: bool = False) -> list[Task]:
    """Load and validate a task JSONL file; raises InputError on the first problem.

    `draft` accepts tasks without rubrics (see `parse_task`); normal mode requires them.
    """
    return load_unique(path, lambda obj, p, n: parse_task(obj, p, n, draft=draft), "task", "tasks")


def select_tasks(tasks: list[Task], ids: list[str] | None) -> list[Task]:
    """The tasks named by `ids` (file order), or all (a run config's `task_ids`)."""
    from lifesearch_local.errors import LifesearchError

    if ids is None:
        return tasks
    unknown = sorted(set(ids) - {t.id for t in tasks})
    if unknown:
        raise LifesearchError(f"task_ids not in the tasks file: {', '.join(unknown)}")
    return [t for t in tasks if t.id in set(ids)]


def first_tasks(tasks: list[Task], limit: int | None, *records: list[Any]) -> tuple[list[Any], ...]:
    """The first `limit` tasks (file order; all when None) and, for each list of `records`, those
    of these tasks (by `task_id`): what `--limit N` selects in `judge` and in `score`."""
    if limit is None or limit >= len(tasks):
        return (tasks, *records)
    kept = tasks[:limit]
    ids = {t.id for t in kept}
    return (kept, *([r for r in rs if r.task_id in ids] for rs in records))


def chosen_tasks(tasks: list[Task], ids: set[str] | None, source: str | Path, *records: list[Any]) -> tuple[list[Any], ...]:
    """The tasks whose ids are in `ids` (file order; all when None) and, for each list of `records`,
    those of these tasks (by `task_id`): what `--task-ids` selects. An id the tasks file lacks is an
    error naming the file: a typo must not quietly score fewer tasks."""
    if ids is None:
        return (tasks, *records)
    unknown = sorted(ids - {t.id for t in tasks})
    if unknown:
        raise LifesearchError(f"--task-ids: {len(unknown)} id(s) not in the tasks file {source}: "
                              f"{named_ids(ids, unknown)}")
    return ([t for t in tasks if t.id in ids], *([r for r in rs if r.task_id in ids] for rs in records))


def check_known_tasks(tasks: list[Task], task_ids: Iterable[str], source: str | Path, what: str = "judgment") -> None:
    """An error naming the tasks file when some records (`task_ids`: the task id of each judgment,
    label, …) are for tasks it does not hold: the wrong tasks file, not a labels or scoring problem."""
    known = {t.id for t in tasks}
    strays = [tid for tid in task_ids if tid not in known]
    if strays:
        ids = sorted(set(strays))
        raise LifesearchError(f"{len(strays)} {what}(s) are for {len(ids)} task(s) not in the tasks file {source}: "
                              f"{_some(ids)}; pass the tasks file they were made from (--tasks)")


class TaskIds(set):
    """Task ids read from a file, each with the FILE:LINE it came from (`where`): an error about
    them names those lines, never the ids (a private file given by mistake must not be echoed)."""

    def __init__(self, *args: object):
        super().__init__(*args)
        self.where: dict[str, str] = {}


def named_ids(ids: set[str], some: list[str], n: int = 5) -> str:
    """`some` of `ids` for an error: by FILE:LINE when they were read from a file, else each as a
    short printable excerpt of what was typed."""
    where = getattr(ids, "where", None)
    shown = [where.get(i, "?") for i in some[:n]] if where else [excerpt(i, quote=False) for i in some[:n]]
    return ", ".join(shown) + (f", … ({len(some) - n} more)" if len(some) > n else "")


def _some(ids: list[str], n: int = 5) -> str:
    return ", ".join(ids[:n]) + (f", … ({len(ids) - n} more)" if len(ids) > n else "")


def summarize(tasks: list[Task]) -> str:
    """One line: counts of tasks and rubrics, per language and per domain."""
    langs = Counter(t.language for t in tasks)
    doms = Counter(t.domain.value for t in tasks)
    n_rub = sum(len(t.rubrics) for t in tasks)
    lang_s = ", ".join(f"{k} {v}" for k, v in sorted(langs.items()))
    dom_s = ", ".join(f"{d.value} {doms[d.value]}" for d in Domain if doms[d.value])
    return f"{len(tasks)} tasks, {n_rub} rubrics; languages: {lang_s}; domains: {dom_s}"
