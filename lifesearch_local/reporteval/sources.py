"""Cited sources for factuality: fetched through the web layer (corpus, cache modes, as-of), cut into chunks."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from lifesearch_local.web.cache import ReplayMiss, normalize_url
from lifesearch_local.web.config import WebConfig

SourceKey = tuple[str, "dt.date | None"]


@dataclass
class Source:
    """A cited page as the judge will read it, or why it could not be read."""

    url: str
    title: str = ""
    chunks: list[str] = field(default_factory=list)
    failure: str | None = None
    """`kind: message` when the page could not be obtained (fetch failure kinds, or replay_miss)."""


def source_key(url: str, as_of: dt.date | None) -> SourceKey:
    return normalize_url(url), as_of


def estimate_tokens(text: str) -> int:
    """A deliberately generous token estimate: ASCII at 3 characters a token, anything else 1.5 tokens a character."""
    wide = sum(1 for ch in text if ord(ch) > 127)
    return math.ceil((len(text) - wide) / 3 + wide * 1.5)


def _pieces(text: str, budget: int) -> list[str]:
    """Paragraphs, then lines, then hard cuts: each piece within the budget."""
    out: list[str] = []
    for para in text.split("\n\n"):
        if estimate_tokens(para) <= budget:
            out.append(para)
            continue
        for line in para.split("\n"):
            while estimate_tokens(line) > budget:
                cut = max(1, int(len(line) * budget / estimate_tokens(line)))
                out.append(line[:cut])
                line = line[cut:]
            out.append(line)
    return [p for p in out if p.strip()]


def split_chunks(text: str, budget: int) -> list[str]:
    """Consecutive chunks of at most `budget` estimated tokens, cut at paragraph breaks where possible.

    Each chunk after the first starts with the previous chunk's last paragraph when that is
    short (a quarter of the budget at most), so a fact at a cut is seen whole at least once.
    """
    if estimate_tokens(text) <= budget:
        return [text]
    chunks: list[list[str]] = [[]]
    size = 0
    for p in _pieces(text, budget):
        t = estimate_tokens(p) + 1
        if chunks[-1] and size + t > budget:
            last = chunks[-1][-1]
            carry = [last] if estimate_tokens(last) <= budget // 4 and estimate_tokens(last) + t <= budget else []
            chunks.append(carry)
            size = sum(estimate_tokens(x) + 1 for x in carry)
        chunks[-1].append(p)
        size += t
    return ["\n\n".join(c) for c in chunks if c]


async def _fetch_one(fetcher, url: str, as_of: dt.date | None):
    try:
        return await fetcher.fetch(url, as_of=as_of)
    except ReplayMiss as e:  # replay without the page: unverifiable, not an error of the whole stage
        return f"replay_miss: {e}"


def fetch_sources(web: WebConfig, wanted: Iterable[tuple[str, dt.date | None]], budget: int,
                  *, show: bool = False) -> tuple[dict[SourceKey, Source], dict]:
    """Fetch each distinct (url, as_of) once; returns the sources by key and the fetcher's stats."""
    from lifesearch_local.runtime.concurrency import map_bounded, run_sync
    from lifesearch_local.web.fetcher import Fetcher

    todo: dict[SourceKey, tuple[str, dt.date | None]] = {}
    for url, as_of in wanted:
        todo.setdefault(source_key(url, as_of), (url, as_of))

    async def go():
        async with Fetcher(web) as f:
            results = await map_bounded(lambda x: _fetch_one(f, *x), list(todo.values()),
                                        limit=web.concurrency, desc="fetch sources", show=show, unit="page")
            return results, f.stats.model_dump()

    results, stats = run_sync(go) if todo else ([], {})
    out = {}
    for key, (url, _), res in zip(todo, todo.values(), results):
        if isinstance(res, str):
            out[key] = Source(url=url, failure=res)
        elif not res.ok:
            out[key] = Source(url=url, failure=f"{res.kind}: {res.message}")
        else:
            out[key] = Source(url=url, title=res.title or "", chunks=split_chunks(res.text, budget))
    return out, stats
