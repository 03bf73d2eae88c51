"""The web cache's row MACs: a per-cache secret key file, keyed row checksums, the index's format marker.

Threat model (docs/reliability.md): a plain checksum guards against accidents only, since whoever
edits a row can recompute it. Rows are therefore keyed (HMAC-SHA256) with a 32-byte secret kept
outside the database, in `<cache>/cache.key` (mode 0600). Someone who can write index.sqlite but
cannot read that file cannot make a row that passes. Someone who controls the whole cache
directory (reads the key, or deletes it and the database's marker) can: the MAC is no defence
against the cache's owner.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
import stat
from pathlib import Path

from lifesearch_local.errors import LifesearchError

KEY_FILE = "cache.key"
FORMAT = "2"  # index format with keyed rows and the `meta` table


class CacheCorrupt(LifesearchError):
    """A cached entry fails its checksum: never served as content."""

    kind = "cache_corrupt"


class CacheKeyError(CacheCorrupt):
    """The cache's key file is missing, unreadable or not what this program writes, or the index
    lost its format marker: no row of it can be trusted."""


def row_mac(key: bytes, table: str, *fields: str | None) -> str:
    """HMAC-SHA256 of an index row's fields under the cache's key (the table and row key included,
    so a row cannot be moved between keys or tables)."""
    msg = "\x1f".join([table, *("\x00" if f is None else f for f in fields)]).encode("utf-8", "surrogatepass")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise CacheKeyError(f"{path}: the cache key cannot be read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 256:
            raise CacheKeyError(f"{path}: the cache key is not a small plain file")
        text = os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise CacheKeyError(f"{path}: the cache key is not 64 hex digits")
    return key


def load_key(root: Path, *, create: bool) -> bytes | None:
    """The cache's key; with `create`, made (0600, atomically: a racing process reads the winner's)
    when absent. None when absent and not `create`."""
    path = root / KEY_FILE
    if not os.path.lexists(path):
        if not create:
            return None
        tmp = root / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # create-if-absent: a racing creator's key wins, ours is dropped
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return _read_key(path)


def open_keyed(con: sqlite3.Connection, root: Path, tables: dict[str, str]) -> bytes:
    """The key of the cache whose index is `con`; a new (empty) index gets one and its format marker.

    `tables`: table -> its column list (the MAC covers all but the last three: created,
    row_sha256, row_mac). An index with rows or other columns but no marker is refused in one
    line: an earlier version's cache, or one whose marker was dropped to pass off rows without
    their MACs. So is a marker without the key file.
    """
    marked = con.execute("SELECT value FROM meta WHERE name = 'format'").fetchone() is not None
    if not marked and not _empty_and_current(con, tables):
        raise _unmarked(root)
    key = load_key(root, create=not marked)
    if marked and key is None:
        raise CacheKeyError(f"{root / KEY_FILE} is missing: the rows of this cache cannot be verified; "
                            "restore the key file with the cache, or record the pages again into a new cache")
    assert key is not None
    con.execute("BEGIN IMMEDIATE")
    try:
        row = con.execute("SELECT value, mac FROM meta WHERE name = 'format'").fetchone()
        if row is None:
            if not _empty_and_current(con, tables):  # rows written since the first look
                raise _unmarked(root)
            con.execute("INSERT OR REPLACE INTO meta (name, value, mac) VALUES (?, ?, ?)",
                        ("format", FORMAT, row_mac(key, "meta", "format", FORMAT)))
        elif not hmac.compare_digest(row[1], row_mac(key, "meta", "format", row[0])):
            raise CacheKeyError(f"{root}: the index's format marker fails its MAC (edited, or another cache's key)")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return key


def _unmarked(root: Path) -> CacheKeyError:
    return CacheKeyError(f"{root}: the index holds rows or another schema but no format marker (a cache of an earlier "
                         "version of lifesearch, or its marker was removed); record the pages again into a fresh cache directory")


def _empty_and_current(con: sqlite3.Connection, tables: dict[str, str]) -> bool:
    """Whether every table is empty and has this version's columns (a cache about to be made)."""
    for table, columns in tables.items():
        have = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        if have != [c.strip() for c in columns.split(",")] or con.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
            return False
    return True
