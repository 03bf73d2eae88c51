"""Local search: a BM25 index (bm25s) over a corpus of supplied or cached pages, saved and reloaded."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from lifesearch_local.rundir.files import full_disk_as_error, write_atomic
from lifesearch_local.web.cache import WebCache
from lifesearch_local.web.config import WebConfig
from lifesearch_local.web.dates import after_cutoff
from lifesearch_local.web.records import Document, SearchResult
from lifesearch_local.web.search.base import SearchError, ranked

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKENS = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_STOP = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "what", "which", "who", "with"]
)
SNIPPET_CHARS = 300


def tokenize(text: str) -> list[str]:
    """Lower-cased words; Chinese runs become characters plus overlapping bigrams (no segmenter needed)."""
    out: list[str] = []
    for m in _TOKENS.finditer(text.lower()):
        t = m.group()
        if "\u3400" <= t[0] <= "\ufaff":
            out += list(t) + [t[i : i + 2] for i in range(len(t) - 1)]
        elif t not in _STOP:
            out.append(t)
    return out


class IndexedDoc(BaseModel):
    """A page as the index keeps it."""

    url: str
    """Link returned in results."""
    title: str
    """Title returned in results."""
    date: str | None = None
    """Publication date (ISO), for the as-of filter."""
    text: str
    """Extracted text; snippets come from it."""


def snippet(text: str, query_tokens: set[str]) -> str:
    """The paragraph sharing most tokens with the query, cut to a few hundred characters."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n|\n", text) if p.strip()] or [text]
    best = max(paragraphs, key=lambda p: len(query_tokens & set(tokenize(p))))
    return best if len(best) <= SNIPPET_CHARS else best[: SNIPPET_CHARS - 1].rstrip() + "…"


class LocalIndex:
    """BM25 over IndexedDocs; `save` writes bm25s files plus docs.jsonl into one directory."""

    def __init__(self, docs: list[IndexedDoc], retriever=None):
        import bm25s

        self.docs = docs
        if retriever is None and docs:
            retriever = bm25s.BM25()
            retriever.index([tokenize(f"{d.title}\n{d.text}") for d in docs], show_progress=False)
        self.retriever = retriever

    @classmethod
    def from_documents(cls, docs: Iterable[Document]) -> LocalIndex:
        return cls([IndexedDoc(url=d.url, title=d.title or d.url, date=d.date, text=d.text) for d in docs])

    def save(self, out_dir: str | Path) -> Path:
        out = Path(out_dir)
        with full_disk_as_error(out):
            (out / "bm25").mkdir(parents=True, exist_ok=True)
            self.retriever.save(str(out / "bm25"), show_progress=False)
        write_atomic(out / "docs.jsonl", "".join(d.model_dump_json() + "\n" for d in self.docs))
        return out

    @classmethod
    def load(cls, index_dir: str | Path) -> LocalIndex:
        import bm25s

        from lifesearch_local.rundir.jsonl import read_records

        d = Path(index_dir)
        docs = read_records(d / "docs.jsonl", IndexedDoc)  # a damaged line is one located error
        return cls(docs, bm25s.BM25.load(str(d / "bm25"), show_progress=False))

    def search(self, query: str, *, num: int, as_of: dt.date | None, drop_undated: bool = False) -> list[SearchResult]:
        tokens = tokenize(query)
        vocab = getattr(self.retriever, "vocab_dict", None) or {}
        tokens = [t for t in tokens if t in vocab]
        if not tokens or not self.docs:
            return []
        ids, scores = self.retriever.retrieve([tokens], k=len(self.docs), show_progress=False)
        hits = [self.docs[int(i)] for i, s in zip(ids[0], scores[0], strict=True) if s > 0]
        hits = [h for h in hits if not after_cutoff(h.date, as_of, drop_undated=drop_undated)]
        qset = set(tokens)
        results = [SearchResult(title=h.title, link=h.url, snippet=snippet(h.text, qset), date=h.date, position=i) for i, h in enumerate(hits, 1)]
        return ranked(results, num)


def corpus_documents(corpus_dirs: Iterable[str | Path]) -> list[Document]:
    """Every readable page of the corpora as a Document (pages that extract to nothing are skipped)."""
    from lifesearch_local.web.cache import page_key
    from lifesearch_local.web.corpus import Corpus
    from lifesearch_local.web.fetcher import corpus_document

    docs = [corpus_document(e, page_key(e.url, None)) for e in Corpus.load(corpus_dirs)]
    return [d for d in docs if d.ok]  # type: ignore[misc]


def build_index(*, corpus_dirs: Iterable[str | Path] = (), cache: WebCache | None = None) -> LocalIndex:
    """An index over the corpora's pages and/or the documents in a web cache."""
    docs = corpus_documents(corpus_dirs) + (cache.documents() if cache else [])
    if not docs:
        raise SearchError("nothing to index: no corpus pages and no cached documents")
    return LocalIndex.from_documents(docs)


class LocalBackend:
    """BM25 over `search.index_dir` if saved there, else built now from corpus_dirs or the cache."""

    def __init__(self, config: WebConfig, cache: WebCache | None = None):
        idx = config.search.index_dir
        if idx is not None and (Path(idx) / "docs.jsonl").exists():
            self.index = LocalIndex.load(idx)
        else:
            self.index = build_index(corpus_dirs=config.corpus_dirs, cache=cache)
        self.drop_undated = config.drop_undated

    async def search(self, query: str, *, num: int, as_of: dt.date | None) -> list[SearchResult]:
        return self.index.search(query, num=num, as_of=as_of, drop_undated=self.drop_undated)
