"""The web cache: content-addressed bodies plus a SQLite index of results by key and as-of date."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import LifesearchError
from .records import FETCH_RESULT, Document, Failure, SearchResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    key TEXT PRIMARY KEY, url TEXT NOT NULL, as_of TEXT NOT NULL,
    result TEXT NOT NULL, body_sha256 TEXT, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS searches (
    key TEXT PRIMARY KEY, backend TEXT NOT NULL, query TEXT NOT NULL, params TEXT NOT NULL,
    as_of TEXT NOT NULL, results TEXT NOT NULL, created TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS searches_by_query ON searches (query, params, as_of);
"""
_DEFAULT_PORTS = {"http": 80, "https": 443}


class ReplayMiss(LifesearchError):
    """Replay mode asked for something the cache does not hold."""


def normalize_url(url: str) -> str:
    """Lower-case scheme and host, no default port or fragment, path at least "/", sorted query."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    netloc = f"[{host}]" if ":" in host else host
    if parts.port and parts.port != _DEFAULT_PORTS.get(scheme):
        netloc += f":{parts.port}"
    if parts.username:
        netloc = parts.username + (f":{parts.password}" if parts.password else "") + "@" + netloc
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return urlunsplit((scheme, netloc, parts.path or "/", query, ""))


def _as_of(as_of: dt.date | None) -> str:
    return as_of.isoformat() if as_of else ""


def page_key(url: str, as_of: dt.date | None) -> str:
    return hashlib.sha256(f"page\n{normalize_url(url)}\n{_as_of(as_of)}".encode()).hexdigest()[:32]


def search_key(backend: str, query: str, params: dict, as_of: dt.date | None) -> str:
    blob = json.dumps([backend, query, params, _as_of(as_of)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"search\n{blob}".encode()).hexdigest()[:32]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class WebCache:
    """Safe for concurrent writers: one SQLite connection per thread, WAL, atomic blob writes."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        self.db_path = self.root / "index.sqlite"
        self._local = threading.local()
        self._db().executescript(_SCHEMA)

    def _db(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.db_path, timeout=60, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA busy_timeout=60000")
            self._local.con = con
        return con

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    # -- blobs --------------------------------------------------------------------------
    def blob_path(self, sha256: str) -> Path:
        return self.root / "blobs" / sha256[:2] / sha256

    def put_blob(self, data: bytes) -> str:
        """Store bytes under their sha256 (written once; a racing writer writes the same bytes)."""
        sha = hashlib.sha256(data).hexdigest()
        path = self.blob_path(sha)
        if path.exists():
            return sha
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return sha

    def get_blob(self, sha256: str) -> bytes:
        data = self.blob_path(sha256).read_bytes()
        if hashlib.sha256(data).hexdigest() != sha256:
            raise LifesearchError(f"cache blob {sha256} is corrupt")
        return data

    # -- pages --------------------------------------------------------------------------
    def get_page(self, key: str) -> Document | Failure | None:
        row = self._db().execute("SELECT result FROM pages WHERE key = ?", (key,)).fetchone()
        return FETCH_RESULT.validate_json(row[0]) if row else None

    def put_page(self, key: str, url: str, as_of: dt.date | None, result: Document | Failure, body: bytes | None = None) -> None:
        sha = self.put_blob(body) if body is not None else None
        if sha and result.ok:
            result.body_sha256 = sha  # type: ignore[union-attr]
        self._db().execute(
            "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?, ?)",
            (key, normalize_url(url), _as_of(as_of), result.model_dump_json(), sha, _now()),
        )

    def documents(self) -> list[Document]:
        """Every cached document (for building a local search index from cached pages)."""
        rows = self._db().execute("SELECT result FROM pages ORDER BY url").fetchall()
        results = [FETCH_RESULT.validate_json(r[0]) for r in rows]
        return [r for r in results if r.ok]  # type: ignore[misc]

    # -- searches -----------------------------------------------------------------------
    def get_search(self, key: str) -> list[SearchResult] | None:
        row = self._db().execute("SELECT results FROM searches WHERE key = ?", (key,)).fetchone()
        return [SearchResult.model_validate(r) for r in json.loads(row[0])] if row else None

    def find_search(self, query: str, params: dict, as_of: dt.date | None, backend: str | None) -> list[SearchResult] | None:
        """The latest recorded results for a query from any backend (or the one named)."""
        sql = "SELECT results FROM searches WHERE query = ? AND params = ? AND as_of = ?"
        args: list[str] = [query, json.dumps(params, sort_keys=True), _as_of(as_of)]
        if backend:
            sql, args = sql + " AND backend = ?", [*args, backend]
        row = self._db().execute(sql + " ORDER BY created DESC, rowid DESC LIMIT 1", args).fetchone()
        return [SearchResult.model_validate(r) for r in json.loads(row[0])] if row else None

    def put_search(self, backend: str, query: str, params: dict, as_of: dt.date | None, results: list[SearchResult]) -> None:
        key = search_key(backend, query, params, as_of)
        payload = json.dumps([r.model_dump() for r in results], ensure_ascii=False)
        self._db().execute(
            "INSERT OR REPLACE INTO searches VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, backend, query, json.dumps(params, sort_keys=True), _as_of(as_of), payload, _now()),
        )
