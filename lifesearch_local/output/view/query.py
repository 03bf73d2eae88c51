"""The decisions table's filters, sort orders and pages, and the diff of two judges, computed on the index."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from urllib.parse import urlencode

import numpy as np

from lifesearch_local.errors import LifesearchError
from lifesearch_local.output.view.index import NO_LABEL, UNGRADED, DecisionIndex

VERDICTS = {"true": 1, "false": 0, "ungraded": UNGRADED}
AGREEMENT = ("agree", "disagree", "labelled", "unlabelled")
TRUNCATED = ("yes", "no")
SORTS = ("file", "confidence", "p_true", "-p_true", "truncated")
"""file order; the judge's confidence in its own verdict, highest first (disagreements are ranked
so); p_true up or down; most report tokens cut first."""
PER_PAGE, MAX_PER_PAGE = 50, 500
MAX_TEXT = 200


class QueryError(LifesearchError):
    """A request parameter the viewer does not take (answered 400 with this message)."""


@dataclass(frozen=True)
class Query:
    """What the decisions table shows: the filters (empty: any), the text searched, the order and the page."""

    task: str = ""
    agent: str = ""
    rubric: str = ""
    judge: str = ""
    verdict: str = ""
    agreement: str = ""
    truncated: str = ""
    q: str = ""
    sort: str = "file"
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def parse(cls, params: Mapping[str, list[str]]) -> Query:
        """From a URL's query parameters; unknown parameters and values are a QueryError."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(params) - known)
        if extra:
            raise QueryError(f"unknown parameter {extra[0]!r} (known: {', '.join(sorted(known))})")
        got = {k: v[-1].strip() for k, v in params.items() if v}
        for name, allowed in (("verdict", VERDICTS), ("agreement", AGREEMENT), ("truncated", TRUNCATED), ("sort", SORTS)):
            if got.get(name) and got[name] not in allowed:
                raise QueryError(f"{name}={got[name]!r}: one of {', '.join(allowed)}")
        if len(got.get("q", "")) > MAX_TEXT:
            raise QueryError(f"q: at most {MAX_TEXT} characters")
        for name, top in (("page", 10**9), ("per_page", MAX_PER_PAGE)):
            if name in got:
                if not got[name].isdigit() or not 1 <= int(got[name]) <= top:
                    raise QueryError(f"{name}={got[name]!r}: a whole number from 1 to {top}")
                got[name] = int(got[name])  # type: ignore[assignment]
        if got.get("sort") == "":
            got.pop("sort")
        return cls(**got)  # type: ignore[arg-type]

    def encode(self, **changes: object) -> str:
        """The query string of this query with `changes` (defaults left out)."""
        q = replace(self, **changes)  # type: ignore[arg-type]
        base = Query()
        return urlencode({f.name: getattr(q, f.name) for f in fields(q) if getattr(q, f.name) != getattr(base, f.name)})

    @property
    def filtered(self) -> bool:
        return any(getattr(self, f) for f in ("task", "agent", "rubric", "judge", "verdict", "agreement", "truncated", "q"))


def confidence(index: DecisionIndex) -> np.ndarray:
    """The probability each judge gave its own verdict (NaN without p_true or a verdict), as
    `analysis.disagreements.confidence` defines it."""
    p, v = index.p_true, index.verdict
    out = np.where(v == 1, p, 1.0 - p)
    return np.where(v == UNGRADED, np.nan, out)


def _code(vocab_codes: Mapping[str, int], value: str) -> int:
    return vocab_codes.get(value, -2)  # -2 matches no row: a value absent from the file selects nothing


def mask(index: DecisionIndex, query: Query) -> np.ndarray:
    """Which decisions pass the query's filters and text search."""
    m = np.ones(len(index), dtype=bool)
    for name, vocab in (("task", index.tasks), ("agent", index.agents), ("rubric", index.rubrics), ("judge", index.judges)):
        value = getattr(query, name)
        if value:
            m &= getattr(index, name) == _code(vocab.codes, value)
    if query.verdict:
        m &= index.verdict == VERDICTS[query.verdict]
    labelled = index.label != NO_LABEL
    if query.agreement == "agree":
        m &= labelled & (index.verdict == index.label)
    elif query.agreement == "disagree":  # an ungraded verdict on a labelled rubric counts as a miss
        m &= labelled & (index.verdict != index.label)
    elif query.agreement == "labelled":
        m &= labelled
    elif query.agreement == "unlabelled":
        m &= ~labelled
    if query.truncated:
        m &= (index.truncated > 0) == (query.truncated == "yes")
    if query.q:
        needle = query.q.lower()
        hits = np.fromiter((needle in t for t in index.text), dtype=bool, count=len(index))
        m &= hits
    return m


def select(index: DecisionIndex, query: Query) -> np.ndarray:
    """Positions of the decisions the query shows, in its order (ties in file order)."""
    pos = np.flatnonzero(mask(index, query))
    if query.sort == "file" or not len(pos):
        return pos
    if query.sort == "confidence":  # highest first, those without a confidence last
        c = confidence(index)[pos]
        keys = np.where(np.isnan(c), np.inf, -c)
    elif query.sort in ("p_true", "-p_true"):
        p = index.p_true[pos]
        keys = np.where(np.isnan(p), np.inf, p if query.sort == "p_true" else -p)
    else:
        keys = -index.truncated[pos].astype(np.float64)
    return pos[np.argsort(keys, kind="stable")]


@dataclass
class Page:
    """One page of a selection."""

    rows: list[int]
    total: int
    page: int
    pages: int


def page_of(positions: np.ndarray, page: int, per_page: int) -> Page:
    """Rows of page `page` (1-based; a page past the end shows the last one)."""
    pages = max(1, -(-len(positions) // per_page))
    page = min(page, pages)
    start = (page - 1) * per_page
    return Page([int(i) for i in positions[start:start + per_page]], len(positions), page, pages)


@dataclass
class DiffRow:
    """One decision both sides made: where each sits in its index, and how they differ."""

    a: int
    b: int
    dp: float | None
    """|p_true(a) − p_true(b)|; None where either side has no p_true."""
    flip: bool
    """The verdicts differ (an ungraded one counts as different from a verdict)."""


def diff(a: DecisionIndex, a_judge: str, b: DecisionIndex, b_judge: str, *, only_differ: bool = True) -> tuple[list[DiffRow], int]:
    """The decisions judge `a_judge` of `a` and judge `b_judge` of `b` both made (matched by task,
    agent, run and rubric), largest |Δp| first, those without a p_true after them (flips first); only
    those that differ (a flip or Δp > 0) with `only_differ`. Also returns how many were matched."""
    pa, pb = a.positions(a_judge), b.positions(b_judge)
    rows = []
    for key, i in pa.items():
        k = pb.get(key)
        if k is None:
            continue
        x, y = a.p_true[i], b.p_true[k]
        dp = None if np.isnan(x) or np.isnan(y) else float(abs(x - y))
        flip = bool(a.verdict[i] != b.verdict[k])
        if only_differ and not flip and not dp:
            continue
        rows.append(DiffRow(i, k, dp, flip))
    matched = sum(1 for key in pa if key in pb)
    rows.sort(key=lambda r: (r.dp is None, -(r.dp or 0.0), not r.flip, r.a))
    return rows, matched
