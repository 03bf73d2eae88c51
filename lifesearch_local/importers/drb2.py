"""DeepResearch Bench II tasks_and_rubrics.jsonl (and reports) → LifeSearch files, with an exact way back.

Each DRB II rubric becomes one rubric with its text verbatim (the upstream evaluator's results are
keyed by that text), `dimension` = its DRB II dimension, weight 1 (DRB II scores the fraction of
rubrics met), type Objective except presentation (Subjective), necessity Implicit (the rubrics
come from an expert article, not from the question), priority Must Have (DRB II calls every rubric
essential). The question is the task's `prompt` (what agents are given: the task and, in words,
the blocked article they must not read) or, with question="task", `content.task` (what the
upstream judge is given). `blocked` is kept on the Task. `drb2_source.jsonl` holds what tasks.jsonl
does not, so that `reconstruct_tasks` gives back the original lines byte for byte.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictInt

from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.importers.common import check_id, check_text, located, read_rows, unique_by
from lifesearch_local.importers.config import Drb2ImportConfig
from lifesearch_local.importers.drb import DEFAULT_DOMAIN_MAP, load_domain_map
from lifesearch_local.importers.report_files import (
    REPORT_NAME,
    FileRead,
    Unreadable,
    file_problem,
    read_report_file,
    refusal,
)
from lifesearch_local.records import BlockedSources, Domain, Report, Rubric, Task

DIMENSIONS = ("info_recall", "analysis", "presentation")
RUBRIC_TYPE = {"info_recall": "Objective", "analysis": "Objective", "presentation": "Subjective"}
NECESSITY = "Implicit"
PRIORITY = "Must Have"
QuestionField = Literal["prompt", "task"]
UPSTREAM_MAX_CHARS: int = Drb2ImportConfig.model_fields["max_chars"].default  # the text Gemini read


class _Drb2(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Drb2Blocked(_Drb2):
    """A task's `content.blocked`: the expert article the rubrics were drawn from."""

    title: str
    authors: list[str]
    urls: list[str]


class Drb2Content(_Drb2):
    """A task's `content`: the judge's task text, rubrics by dimension, the blocked article."""

    task: str
    rubric: dict[str, list[str]]
    blocked: Drb2Blocked | None = None


class Drb2Task(_Drb2):
    """One line of tasks_and_rubrics.jsonl."""

    id: str
    idx: StrictInt
    language: Literal["en", "zh"]
    theme: str
    description: str
    prompt: str
    content: Drb2Content


class Drb2Source(_Drb2):
    """One line of drb2_source.jsonl: what a task's DRB II line holds that tasks.jsonl does not."""

    task_id: str
    """Our task id (prefix + idx)."""
    id: str
    """DRB II's `id` (e.g. `task7`, `task1+`)."""
    idx: int
    """DRB II's `idx`, the key of the evaluator's results."""
    theme: str
    """The theme the domain was mapped from."""
    description: str
    """DRB II's short description."""
    question_field: QuestionField
    """Which DRB II text became the question: `prompt` or `content.task`."""
    other_text: str
    """The other one of the two (the question is in tasks.jsonl)."""
    dimensions: list[str]
    """The keys of `content.rubric`, in the file's order (an empty one included)."""
    content_keys: list[str]
    """The keys of `content`, in the file's order (one task has no `blocked`)."""


@dataclass
class Drb2Import:
    """The converted files, before they are written."""

    tasks: list[Task]
    sources: list[Drb2Source]
    domain_map: dict[str, Domain]
    reports: list[Report] = field(default_factory=list)
    cut_reports: int = 0
    inputs: dict[str, Any] = field(default_factory=dict)
    report_files: list[FileRead] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _check_task(t: Drb2Task, path: str, lineno: int) -> None:
    for dim, items in t.content.rubric.items():
        if dim not in DIMENSIONS:
            raise InputError(path, lineno, f"content.rubric.{dim}", f"unknown DRB II dimension (expected one of {list(DIMENSIONS)})")
        for i, text in enumerate(items):
            check_text(text, path, lineno, f"content.rubric.{dim}[{i}]", "rubric")
    if not any(t.content.rubric.values()):
        raise InputError(path, lineno, "content.rubric", "no rubrics")


def _content_keys(c: Drb2Content) -> list[str]:
    # pydantic keeps which fields were given, not their order; DRB II writes task, rubric, blocked
    return [k for k in ("task", "rubric", "blocked") if k in c.model_fields_set]


def convert_task(t: Drb2Task, domain: Domain, prefix: str = "drb2-", question: QuestionField = "prompt") -> tuple[Task, Drb2Source]:
    """One DRB II line as our Task and its source record (module docstring for the rules)."""
    items = [(dim, text) for dim, texts in t.content.rubric.items() for text in texts]
    rubrics = [Rubric(id=f"R{i}", criterion=text, type=RUBRIC_TYPE[dim], necessity=NECESSITY, priority=PRIORITY,
                      weight=1.0, dimension=dim) for i, (dim, text) in enumerate(items, start=1)]
    b = t.content.blocked
    blocked = None if b is None else BlockedSources(title=b.title, authors=b.authors, urls=b.urls)
    task = Task(id=f"{prefix}{t.idx}", language=t.language, domain=domain,
                question=t.prompt if question == "prompt" else t.content.task, rubrics=rubrics, blocked=blocked)
    source = Drb2Source(task_id=task.id, id=t.id, idx=t.idx, theme=t.theme, description=t.description,
                        question_field=question, other_text=t.content.task if question == "prompt" else t.prompt,
                        dimensions=list(t.content.rubric), content_keys=_content_keys(t.content))
    return task, source


def convert(path: str | Path, *, domain_map: dict[str, Domain] | None = None, prefix: str = "drb2-",
            question: QuestionField = "prompt") -> Drb2Import:
    """Every line of tasks_and_rubrics.jsonl as a Task (ids and idx unique, themes mapped)."""
    rows = read_rows(path, Drb2Task)
    unique_by(rows, lambda t: t.idx, path, "idx")
    unique_by(rows, lambda t: t.id, path, "id")
    mapping = dict(DEFAULT_DOMAIN_MAP) if domain_map is None else domain_map
    missing = {t.theme: n for n, t in reversed(rows) if t.theme not in mapping}
    if missing:
        names = ", ".join(repr(x) for x in sorted(missing, key=missing.__getitem__))
        raise InputError(str(path), min(missing.values()), "theme", f"no domain for DRB II theme(s) {names}; map them "
                         "with --domain-map FILE (YAML or JSON `theme: domain`)")
    result = Drb2Import(tasks=[], sources=[], domain_map=mapping,
                        inputs={"tasks": str(path), "id_prefix": prefix, "question": question})
    for lineno, t in rows:
        _check_task(t, str(path), lineno)
        check_text(t.prompt if question == "prompt" else t.content.task, path, lineno,
                   "prompt" if question == "prompt" else "content.task", "question")
        with located(path, lineno):  # our id (prefix + idx) as `validate` checks it
            task, source = convert_task(t, mapping[t.theme], prefix, question)
        result.tasks.append(task)
        result.sources.append(source)
    return result


# -- reports -------------------------------------------------------------------------------------

class Drb2Report(_Drb2):
    """One line of a DRB II reports JSONL (our own shape: the upstream publishes one file per report)."""

    idx: StrictInt
    article: str


def _report_files(folder: Path, refused: list[str]) -> dict[int, Path]:
    """idx → its report file in `folder`; a file we cannot read (an image, an unknown format) joins `refused`."""
    found: dict[int, Path] = {}
    for f in sorted(folder.iterdir()):
        m = REPORT_NAME.match(f.name)
        if not m or not f.is_file():
            continue
        idx = int(m.group(1))
        if idx in found:
            raise InputError(str(f), None, None, f"a second report for idx {idx} (first: {found[idx].name})")
        found[idx] = f
    for f in [f for f in found.values() if file_problem(f)]:
        refused.append(f"{f}: {file_problem(f)}")
    return {idx: f for idx, f in found.items() if not file_problem(f)}


def _has_reports(folder: Path) -> bool:
    return any(REPORT_NAME.match(f.name) and f.is_file() for f in folder.iterdir())


def _read(files: dict[int, Path], agent: str, refused: list[str]) -> dict[int, tuple[str, str, FileRead | None]]:
    """idx → (where, text, what the file lost) of every file that gives text; the others join `refused`."""
    out: dict[int, tuple[str, str, FileRead | None]] = {}
    for idx, f in files.items():
        try:
            text, info = read_report_file(f, "", agent)
        except Unreadable as e:
            refused.append(f"{f}: {e}")
            continue
        out[idx] = (str(f), text, info)
    return out


def report_sources(path: str | Path, agent: str | None,
                   refused: list[str]) -> list[tuple[str, dict[int, tuple[str, str, FileRead | None]]]]:
    """(agent, idx → (where, text, what the file lost)) for one --reports path: a folder of idx-<n>.<ext> files
    (agent = its name), a folder of such folders (the evaluator's PDF_DIR: one agent per subfolder), or a JSONL
    file of {idx, article} (agent = --agent, or <name> of reports-<name>.jsonl). Files that give no text join
    `refused` (report_files.py)."""
    p = Path(path)
    if p.is_file():
        name = agent or p.name.removesuffix(".jsonl").removeprefix("reports-")
        rows = unique_by(read_rows(p, Drb2Report), lambda r: r.idx, p, "idx")
        return [(name, {idx: (f"{p}:{n}", r.article, None) for idx, (n, r) in rows.items()})]
    if not p.is_dir():
        raise InputError(str(p), None, None, "no such file or directory")
    if _has_reports(p):
        return [(agent or p.name, _read(_report_files(p, refused), agent or p.name, refused))]
    subs = [d for d in sorted(p.iterdir()) if d.is_dir() and _has_reports(d)]
    if not subs:
        raise InputError(str(p), None, None, "no idx-<n>.<ext> report files in it or in its subfolders")
    if agent:
        raise LifesearchError(f"{p}: holds one folder per agent ({', '.join(d.name for d in subs)}); --agent names "
                              "the agent of a single folder or file, so leave it out here")
    return [(d.name, _read(_report_files(d, refused), d.name, refused)) for d in subs]


def convert_reports(result: Drb2Import, paths: list[str | Path], agent: str | None, max_chars: int | None,
                    skip_unreadable: bool = False) -> None:
    """Add the reports of `paths` to `result` (run 0; text cut at `max_chars` as the evaluator cuts it); files
    that give no text are refused, one line each, unless `skip_unreadable` (then recorded in `result.refused`)."""
    if agent and len(paths) > 1:
        raise LifesearchError("--agent names the agent of one --reports path; with several, each is named by its folder or file")
    by_idx = {s.idx: s.task_id for s in result.sources}
    seen: dict[tuple[str, str], str] = {}
    for path in paths:
        for name, reports in report_sources(path, agent, result.refused):
            check_id(name, path, None, "agent (--agent, or the folder or file name)")
            for idx, (where, text, info) in sorted(reports.items()):
                if idx not in by_idx:
                    raise InputError(where, None, "idx", f"report for idx {idx}, which is not in the tasks file")
                key = (by_idx[idx], name)
                if key in seen:
                    raise InputError(where, None, "idx", f"a second report of agent {name!r} for idx {idx} (first: {seen[key]})")
                seen[key] = where
                if info is not None:
                    result.report_files.append(info.model_copy(update={"task_id": by_idx[idx]}))
                if max_chars and len(text) > max_chars:
                    text, result.cut_reports = text[:max_chars], result.cut_reports + 1
                result.reports.append(Report(task_id=by_idx[idx], agent=name, run=0, text=text))
    if result.refused and not skip_unreadable:
        raise refusal(result.refused)
    result.inputs.update(reports=[str(p) for p in paths], agent=agent, max_chars=max_chars)


def import_drb2(tasks: str | Path, *, reports: list[str | Path] | None = None, agent: str | None = None,
                max_chars: int | None = UPSTREAM_MAX_CHARS, domain_map: str | Path | None = None,
                prefix: str = "drb2-", question: QuestionField = "prompt", skip_unreadable: bool = False) -> Drb2Import:
    """Tasks (theme → domain from DRB's map, overridden by the `domain_map` file) and optional reports
    (markdown, text, HTML, PDF or DOCX files: report_files.py; `skip_unreadable` imports the rest)."""
    result = convert(tasks, domain_map=load_domain_map(domain_map), prefix=prefix, question=question)
    result.inputs["domain_map"] = None if domain_map is None else str(domain_map)
    if reports:
        convert_reports(result, list(reports), agent, max_chars, skip_unreadable)
    return result


def task_counts(result: Drb2Import) -> dict[str, Any]:
    """Counts for import.json: tasks, rubrics per dimension, languages, domains, themes, blocked, repeats."""
    rubrics = [r for t in result.tasks for r in t.rubrics]
    repeated = sum(n - 1 for t in result.tasks
                   for n in Counter((r.dimension, r.criterion) for r in t.rubrics).values() if n > 1)
    return {
        "tasks": len(result.tasks), "rubrics": len(rubrics),
        "dimensions": {d: sum(r.dimension == d for r in rubrics) for d in DIMENSIONS},
        "languages": dict(sorted(Counter(t.language for t in result.tasks).items())),
        "domains": {d.value: n for d in Domain if (n := sum(t.domain == d for t in result.tasks))},
        "themes": dict(Counter(s.theme for s in result.sources)),
        "tasks_with_blocked": sum(t.blocked is not None for t in result.tasks),
        "repeated_rubric_texts": repeated,
        "reports": dict(Counter(r.agent for r in result.reports)), "reports_cut": result.cut_reports,
    }


def reconstruct_tasks(tasks: list[Task], sources: list[Drb2Source]) -> list[dict[str, Any]]:
    """The tasks_and_rubrics.jsonl records an import was made from, exactly (key order included)."""
    by_id = {t.id: t for t in tasks}
    out = []
    for s in sources:
        t = by_id[s.task_id]
        task_text, prompt = (s.other_text, t.question) if s.question_field == "prompt" else (t.question, s.other_text)
        content: dict[str, Any] = {"task": task_text,
                                   "rubric": {d: [r.criterion for r in t.rubrics if r.dimension == d] for d in s.dimensions}}
        if "blocked" in s.content_keys:
            content["blocked"] = None if t.blocked is None else t.blocked.model_dump()
        content = {k: content[k] for k in s.content_keys}
        out.append({"id": s.id, "idx": s.idx, "language": t.language, "theme": s.theme,
                    "description": s.description, "prompt": prompt, "content": content})
    return out
