"""Every decision of a judgments file as columns (codes, numbers, byte offsets); the full record read back on demand.

A run of 100k decisions keeps here a few megabytes of arrays and one lower-cased search text per
decision, not 100k records with their raw outputs: the viewer filters and pages on these columns
and reads a decision's own line again only when its page is asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from lifesearch_local.analysis.labels import Key
from lifesearch_local.analysis.scoring import judge_name
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.records import Judgment
from lifesearch_local.rundir.jsonl import parse_json, require_file, validation_field

NO_LABEL, UNGRADED = -1, -1


@dataclass
class Vocab:
    """Strings by code, in order of first appearance."""

    names: list[str] = field(default_factory=list)
    codes: dict[str, int] = field(default_factory=dict)

    def code(self, name: str) -> int:
        got = self.codes.get(name)
        if got is None:
            got = self.codes[name] = len(self.names)
            self.names.append(name)
        return got


@dataclass
class DecisionIndex:
    """The decisions of one judgments file; position i is the file's i-th record."""

    path: Path
    tasks: Vocab
    agents: Vocab
    rubrics: Vocab
    judges: Vocab
    """Judge names as score tables show them (`id`, or `id#k` for repetition k)."""
    task: np.ndarray
    agent: np.ndarray
    run: np.ndarray
    rubric: np.ndarray
    judge: np.ndarray
    verdict: np.ndarray
    """1 true, 0 false, -1 ungraded."""
    p_true: np.ndarray
    """NaN where the judge gave none (generate mode)."""
    truncated: np.ndarray
    """Report tokens the judge did not read (`Judgment.truncated_tokens`)."""
    label: np.ndarray
    """The reference label (1, 0) or -1: none, or the judge is itself a label source."""
    offset: np.ndarray
    """Byte offset of the record's line in the file."""
    line: np.ndarray
    """Its line number (1-based), for messages."""
    text: list[str]
    """Lower-cased task, agent, rubric, criterion and reason: what the text search looks in."""

    def __len__(self) -> int:
        return len(self.offset)

    def key(self, i: int) -> Key:
        return (self.tasks.names[self.task[i]], self.agents.names[self.agent[i]], int(self.run[i]),
                self.rubrics.names[self.rubric[i]])

    def judge_of(self, i: int) -> str:
        return self.judges.names[self.judge[i]]

    def record(self, i: int) -> Judgment:
        """The full judgment at position i, read again from its line; LifesearchError when the file
        was rewritten since the index was built (`repair`), rather than another decision shown."""
        with open(self.path, "rb") as f:
            f.seek(int(self.offset[i]))
            raw = f.readline()
        try:
            j = _judgment(raw, str(self.path), int(self.line[i]))
        except InputError:
            j = None
        if j is None or (j.task_id, j.agent, j.run, j.rubric_id) != self.key(i) or judge_name(j) != self.judge_of(i):
            raise LifesearchError(f"{self.path}:{int(self.line[i])}: the file changed since the viewer read it; "
                                  "restart `lifesearch view` to read it again")
        return j

    def positions(self, judge: str) -> dict[Key, int]:
        """key → position of one judge's decisions (the first, should a key repeat)."""
        code = self.judges.codes.get(judge)
        if code is None:
            return {}
        out: dict[Key, int] = {}
        for i in np.flatnonzero(self.judge == code):
            out.setdefault(self.key(int(i)), int(i))
        return out


def _judgment(raw: bytes, path: str, lineno: int) -> Judgment:
    obj = parse_json(raw, path, lineno)
    if not isinstance(obj, dict):
        raise InputError(path, lineno, None, f"expected a JSON object, got {type(obj).__name__}")
    try:
        return Judgment.model_validate(obj)
    except ValidationError as e:
        where, msg = validation_field(e, Judgment)
        raise InputError(path, lineno, where, msg) from None


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(offset, line number, bytes) of each non-blank line; a last line without its newline is
    left unread (a writer may be appending it right now)."""
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    pos, lineno = 0, 0
    while pos < end:
        nxt = data.index(b"\n", pos) + 1
        lineno += 1
        if data[pos:nxt].strip():
            yield pos, lineno, data[pos:nxt]
        pos = nxt


def build_index(path: str | Path, criteria: Mapping[tuple[str, str], str] | None = None,
                labels: Mapping[Key, bool] | None = None, label_sources: Iterable[str] = ()) -> DecisionIndex:
    """The index of a judgments file (every line validated; the first bad one is an InputError naming
    file:line: field). `criteria`: (task, rubric) → criterion, searched too; `labels`: the reference
    decision of each key, not applied to a judge that is itself one of the `label_sources`."""
    path = Path(path)
    require_file(path)
    criteria, labels, skip = criteria or {}, labels or {}, set(label_sources)
    voc = {k: Vocab() for k in ("tasks", "agents", "rubrics", "judges")}
    cols: dict[str, list] = {k: [] for k in ("task", "agent", "run", "rubric", "judge", "verdict", "p_true",
                                             "truncated", "label", "offset", "line")}
    text: list[str] = []
    for offset, lineno, raw in _lines(path):
        j = _judgment(raw, str(path), lineno)
        lab = labels.get((j.task_id, j.agent, j.run, j.rubric_id)) if j.judge not in skip else None
        row = (voc["tasks"].code(j.task_id), voc["agents"].code(j.agent), j.run, voc["rubrics"].code(j.rubric_id),
               voc["judges"].code(judge_name(j)), UNGRADED if j.satisfied is None else int(j.satisfied),
               np.nan if j.p_true is None else j.p_true, j.truncated_tokens, NO_LABEL if lab is None else int(lab),
               offset, lineno)
        for name, value in zip(cols, row):
            cols[name].append(value)
        text.append("\x1f".join((j.task_id, j.agent, j.rubric_id, criteria.get((j.task_id, j.rubric_id), ""),
                                 j.reason or "")).lower())
    dtypes = {"p_true": np.float64, "verdict": np.int8, "label": np.int8, "offset": np.int64, "truncated": np.int64}
    arrays = {k: np.asarray(v, dtype=dtypes.get(k, np.int32)) for k, v in cols.items()}
    return DecisionIndex(path=path, **voc, **arrays, text=text)
