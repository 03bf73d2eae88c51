"""Local corpora: manifest.jsonl (url, path, content_type, date, title) plus the page files."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from lifesearch_local.errors import InputError
from lifesearch_local.rundir.jsonl import parse_json
from lifesearch_local.web.cache import normalize_url


class CorpusEntry(BaseModel):
    """One page of a local corpus, as listed in its manifest."""

    model_config = ConfigDict(extra="ignore")

    url: str
    """The URL the page stands for; fetches of it are served from disk."""
    path: str
    """File of the page, relative to the corpus directory."""
    content_type: str = "text/html"
    """Media type of the file (a charset parameter is honoured)."""
    date: str | None = None
    """Publication date (ISO); pages dated after a task's cutoff are refused."""
    title: str | None = None
    """Title to show when the page's own metadata has none."""
    root: Path = Path(".")
    """Corpus directory the path is relative to (set on load, not read from the manifest)."""

    def read(self) -> bytes:
        return (self.root / self.path).read_bytes()


def read_manifest(corpus_dir: str | Path) -> list[CorpusEntry]:
    """Entries of `corpus_dir/manifest.jsonl`; a bad line is an InputError naming it."""
    root = Path(corpus_dir)
    path = root / "manifest.jsonl"
    entries = []
    for n, line in enumerate(path.read_bytes().split(b"\n"), 1):  # bytes: a bad one is a located error
        if not line.strip():
            continue
        obj = parse_json(line, str(path), n)
        if not isinstance(obj, dict):
            raise InputError(str(path), n, None, f"expected a JSON object, got {type(obj).__name__}")
        try:
            entry = CorpusEntry.model_validate({**obj, "root": root})
        except ValueError as e:
            raise InputError(str(path), n, None, str(e).splitlines()[0]) from e
        if not (root / entry.path).is_file():
            raise InputError(str(path), n, "path", f"{entry.path} does not exist")
        entries.append(entry)
    return entries


class Corpus:
    """Pages of one or more corpora by normalized URL (later corpora win on duplicates)."""

    def __init__(self, entries: Iterable[CorpusEntry] = ()):
        self.by_url = {normalize_url(e.url): e for e in entries}

    @classmethod
    def load(cls, dirs: Iterable[str | Path]) -> Corpus:
        return cls(e for d in dirs for e in read_manifest(d))

    def get(self, url: str) -> CorpusEntry | None:
        return self.by_url.get(normalize_url(url)) if self.by_url else None

    def __iter__(self) -> Iterator[CorpusEntry]:
        return iter(self.by_url.values())

    def __len__(self) -> int:
        return len(self.by_url)
