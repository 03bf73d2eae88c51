"""The web cache: content-addressed bodies plus a SQLite index of results by key and as-of date."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import os
import sqlite3
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lifesearch_local.errors import LifesearchError
from lifesearch_local.rundir.files import disk_full, full_disk_as_error, is_disk_full
from lifesearch_local.web.cache_key import (
    CacheCorrupt,
    CacheNotPrivate,
    check_private,
    open_keyed,
    private_root,
    row_mac,
)
from lifesearch_local.web.records import FETCH_RESULT, Document, Failure, SearchResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    key TEXT PRIMARY KEY, url TEXT NOT NULL, as_of TEXT NOT NULL,
    result TEXT NOT NULL, body_sha256 TEXT, created TEXT NOT NULL, row_sha256 TEXT, row_mac TEXT);
CREATE TABLE IF NOT EXISTS searches (
    key TEXT PRIMARY KEY, backend TEXT NOT NULL, query TEXT NOT NULL, params TEXT NOT NULL,
    as_of TEXT NOT NULL, results TEXT NOT NULL, created TEXT NOT NULL, row_sha256 TEXT, row_mac TEXT);
CREATE INDEX IF NOT EXISTS searches_by_query ON searches (query, params, as_of);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL, mac TEXT NOT NULL);
"""
_PAGE_COLUMNS = "key, url, as_of, result, body_sha256, created, row_sha256, row_mac"
_SEARCH_COLUMNS = "key, backend, query, params, as_of, results, created, row_sha256, row_mac"
_TABLES = {"pages": _PAGE_COLUMNS, "searches": _SEARCH_COLUMNS}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _sqlite_full(e: sqlite3.Error) -> bool:
    """SQLite's "database or disk is full" (SQLITE_FULL), or the OS's ENOSPC under it."""
    return getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(e)


class ReplayMiss(LifesearchError):
    """Replay mode asked for something the cache does not hold."""


def row_sha256(*fields: str | None) -> str:
    """Checksum of an index row's fields (the key included, so rows cannot be swapped between keys)."""
    return hashlib.sha256("\x1f".join("\x00" if f is None else f for f in fields).encode("utf-8", "surrogatepass")).hexdigest()


MAX_BLOB_BYTES = 1 << 30  # far above any page the fetcher keeps (its max_bytes); a bigger "blob" is not ours


def read_blob_file(path: Path, name: str) -> bytes:
    """A blob's bytes, read only if it is a plain file of sane size: a FIFO would block the reader,
    a symlink to /dev/zero would never end (O_NOFOLLOW, O_NONBLOCK, then S_ISREG and st_size)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CacheCorrupt(f"cache blob {name} is missing") from None
    except OSError as e:  # a symlink (ELOOP), unreadable, …
        why = "is a symbolic link" if path.is_symlink() else f"cannot be read: {e.strerror or e}"
        raise CacheCorrupt(f"cache blob {name} {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheCorrupt(f"cache blob {name} is not a plain file (mode {stat.filemode(st.st_mode)})")
        if st.st_size > MAX_BLOB_BYTES:
            raise CacheCorrupt(f"cache blob {name} is {st.st_size} bytes, over {MAX_BLOB_BYTES}")
        chunks, left = [], st.st_size + 1  # one byte more: a file that grows is caught by the hash
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise CacheCorrupt(f"cache blob {name} cannot be read: {e.strerror or e}") from None
    finally:
        os.close(fd)


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
        self.db_path = private_root(self.root)  # ssh's rule: the user's own, no one else may write it
        self._private_dir(self.root / "blobs")
        self._local = threading.local()
        try:
            con = self._db()
            con.executescript(_SCHEMA)
            self._key = open_keyed(con, self.root, _TABLES)
        except sqlite3.DatabaseError as e:
            if _sqlite_full(e):
                raise disk_full(self.db_path) from None
            raise CacheCorrupt(f"cache index {self.db_path} cannot be read ({e}); check it with "
                               f"`lifesearch cache verify {self.root}` or move the cache away") from None

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

    @staticmethod
    def _private_dir(path: Path) -> None:
        """Make `path` (0700) if absent; CacheNotPrivate when it is a link, another user's, or
        others may write it: the index's rule for every directory the cache writes into, since a
        blob planted there by another user would be served as a page (its name is only a hash)."""
        with full_disk_as_error(path), contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise CacheNotPrivate(f"{path}: a cache directory that is a link or not a directory; move it away "
                                  "and rerun (the cache makes its own)")
        check_private(path, st, secret=False)

    def put_blob(self, data: bytes) -> str:
        """Store bytes under their sha256 (written once; a racing writer writes the same bytes)."""
        sha = hashlib.sha256(data).hexdigest()
        path = self.blob_path(sha)
        if path.exists():
            return sha
        self._private_dir(path.parent)
        with full_disk_as_error(path):
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException as e:  # a full disk (or anything else) leaves no temporary behind
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if is_disk_full(e):
                raise disk_full(path) from None
            raise
        return sha

    def _write_row(self, sql: str, values: tuple) -> None:
        """One row into the index; SQLite's "database or disk is full" is `DiskFull` naming the index."""
        try:
            self._db().execute(sql, values)
        except sqlite3.OperationalError as e:
            if _sqlite_full(e):
                raise disk_full(self.db_path) from None
            raise

    def get_blob(self, sha256: str) -> bytes:
        """The blob's bytes; CacheCorrupt when it is missing or does not hash to its name."""
        data = read_blob_file(self.blob_path(sha256), sha256)
        if hashlib.sha256(data).hexdigest() != sha256:
            raise CacheCorrupt(f"cache blob {sha256} does not match its sha256 (altered)")
        return data

    # -- pages --------------------------------------------------------------------------
    def get_page(self, key: str) -> Document | Failure | None:
        """The recorded result, a `cache_corrupt` Failure when the row or its blob fails its checksum, or None."""
        row = self._db().execute(f"SELECT {_PAGE_COLUMNS} FROM pages WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return self._checked_page(row)
        except CacheCorrupt as e:
            return Failure(kind="cache_corrupt", url=row[1], message=str(e), cache_key=key, fetched_at=_now())

    def _check_mac(self, table: str, row: tuple, what: str) -> None:
        """CacheCorrupt unless the row carries its MAC under this cache's key: a row without one
        is not one this program wrote."""
        mac = row[-1]
        if mac is None:
            raise CacheCorrupt(f"cache index row {row[0]} ({what}) has no row MAC: forged or damaged "
                               "(every row this version writes has one)")
        if not hmac.compare_digest(mac, row_mac(self._key, table, *row[:-3])):
            raise CacheCorrupt(f"cache index row {row[0]} ({what}) was edited: it fails its row MAC")

    def _checked_page(self, row: tuple) -> Document | Failure:
        key, url, as_of, result, body_sha = row[:5]
        self._check_mac("pages", row, url)
        try:
            parsed = FETCH_RESULT.validate_json(result)
        except ValueError as e:
            raise CacheCorrupt(f"cache index row {key} ({url}) does not parse: {str(e).splitlines()[0]}") from None
        recorded = parsed.body_sha256 if parsed.ok else None  # type: ignore[union-attr]
        if recorded != body_sha:
            raise CacheCorrupt(f"cache index row {key} ({url}) names blob {recorded} but its column says {body_sha}")
        if body_sha is not None:
            self.get_blob(body_sha)
        return parsed

    def put_page(self, key: str, url: str, as_of: dt.date | None, result: Document | Failure, body: bytes | None = None) -> None:
        sha = self.put_blob(body) if body is not None and result.ok else None
        if sha:
            result.body_sha256 = sha  # type: ignore[union-attr]
        fields = (key, normalize_url(url), _as_of(as_of), result.model_dump_json(), sha)
        self._write_row(
            f"INSERT OR REPLACE INTO pages ({_PAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*fields, _now(), row_sha256(*fields), row_mac(self._key, "pages", *fields)),
        )

    def documents(self) -> list[Document]:
        """Every cached document (for building a local search index); CacheCorrupt on the first bad entry."""
        rows = self._db().execute(f"SELECT {_PAGE_COLUMNS} FROM pages ORDER BY url").fetchall()
        results = [self._checked_page(r) for r in rows]
        return [r for r in results if r.ok]  # type: ignore[misc]

    # -- searches -----------------------------------------------------------------------
    def get_search(self, key: str) -> list[SearchResult] | None:
        row = self._db().execute(f"SELECT {_SEARCH_COLUMNS} FROM searches WHERE key = ?", (key,)).fetchone()
        return self._checked_search(row) if row else None

    def find_search(self, query: str, params: dict, as_of: dt.date | None, backend: str | None) -> list[SearchResult] | None:
        """The latest recorded results for a query from any backend (or the one named); CacheCorrupt
        when that row fails its checksum."""
        sql = f"SELECT {_SEARCH_COLUMNS} FROM searches WHERE query = ? AND params = ? AND as_of = ?"
        args: list[str] = [query, json.dumps(params, sort_keys=True), _as_of(as_of)]
        if backend:
            sql, args = sql + " AND backend = ?", [*args, backend]
        row = self._db().execute(sql + " ORDER BY created DESC, rowid DESC LIMIT 1", args).fetchone()
        return self._checked_search(row) if row else None

    def _checked_search(self, row: tuple) -> list[SearchResult]:
        key, query, results = row[0], row[2], row[5]
        self._check_mac("searches", row, f"search {query!r}")
        try:
            return [SearchResult.model_validate(r) for r in json.loads(results)]
        except (ValueError, TypeError) as e:
            raise CacheCorrupt(f"cache index row {key} (search {query!r}) does not parse: {str(e).splitlines()[0]}") from None

    def put_search(self, backend: str, query: str, params: dict, as_of: dt.date | None, results: list[SearchResult]) -> None:
        key = search_key(backend, query, params, as_of)
        payload = json.dumps([r.model_dump() for r in results], ensure_ascii=False)
        fields = (key, backend, query, json.dumps(params, sort_keys=True), _as_of(as_of), payload)
        self._write_row(f"INSERT OR REPLACE INTO searches ({_SEARCH_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (*fields, _now(), row_sha256(*fields), row_mac(self._key, "searches", *fields)))

    # -- verification -------------------------------------------------------------------
    def verify(self) -> CacheReport:
        """Check every row and blob: row checksums, each page's blob, blobs that do not hash to their name."""
        report = CacheReport()
        db = self._db()
        report.integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        referenced: set[str] = set()
        for row in db.execute(f"SELECT {_PAGE_COLUMNS} FROM pages ORDER BY key"):
            report.pages += 1
            referenced.add(row[4] or "")
            try:
                self._checked_page(row)
            except CacheCorrupt as e:
                report.problems.append(f"page {row[0]} {row[1]}: {e}")
        for row in db.execute(f"SELECT {_SEARCH_COLUMNS} FROM searches ORDER BY key"):
            report.searches += 1
            try:
                self._checked_search(row)
            except CacheCorrupt as e:
                report.problems.append(f"search {row[0]} {row[2]!r}: {e}")
        for path in sorted((self.root / "blobs").glob("*/*")):
            if path.name.startswith(".tmp-"):
                continue
            report.blobs += 1
            if path.name not in referenced:
                report.unreferenced += 1
                try:
                    if hashlib.sha256(read_blob_file(path, path.name)).hexdigest() != path.name:
                        report.problems.append(f"blob {path.name}: does not match its sha256 (altered)")
                except CacheCorrupt as e:
                    report.problems.append(f"blob {path.name}: {e}")
        return report


@dataclass
class CacheReport:
    """What `WebCache.verify` found."""

    pages: int = 0
    searches: int = 0
    blobs: int = 0
    unreferenced: int = 0
    integrity: str = "ok"
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.integrity == "ok"

    def summary(self) -> str:
        state = "ok" if self.ok else f"CORRUPT: {len(self.problems)} problem(s)" + ("" if self.integrity == "ok" else f"; sqlite: {self.integrity}")
        return (f"{self.pages} pages, {self.searches} searches, {self.blobs} blobs ({self.unreferenced} unreferenced)"
                f": {state}")
