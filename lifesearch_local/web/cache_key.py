"""The web cache's row MACs: a per-cache secret key file, keyed row checksums, the index's format marker.

Threat model (docs/security.md): a plain checksum guards against accidents only, since whoever
edits a row can recompute it. Rows are therefore keyed (HMAC-SHA256) with a 32-byte secret kept
outside the database, in `<cache>/cache.key` (mode 0600). Someone who can write index.sqlite but
cannot read that file cannot make a row that passes. Someone who controls the whole cache
directory (reads the key, or deletes it and the database's marker) can: the MAC is no defence
against the cache's owner. So, as ssh does with its keys, a cache is used only when its
directory, index and key belong to the current user and no one else can write them (nor read
the key): `check_private`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import sqlite3
import stat
from pathlib import Path

from lifesearch_local.errors import LifesearchError
from lifesearch_local.rundir.files import disk_full, is_disk_full

KEY_FILE = "cache.key"
FORMAT = "2"  # index format with keyed rows and the `meta` table


class CacheCorrupt(LifesearchError):
    """A cached entry fails its checksum: never served as content."""

    kind = "cache_corrupt"


class CacheKeyError(CacheCorrupt):
    """The cache's key file is missing, unreadable or not what this program writes, or the index
    lost its format marker: no row of it can be trusted."""


class CacheNotPrivate(CacheKeyError):
    """The cache directory, its index or its key belongs to another user, or others may write it
    (or read the key): someone else could plant or read the key and forge rows that pass."""


def check_private(path: Path, st: os.stat_result, *, secret: bool) -> None:
    """CacheNotPrivate unless `path` (stat `st`) is the current user's and no one else may write
    it, nor, for a `secret` (the key), read it: ssh's rule for its keys, in one line with the fix."""
    uid = os.geteuid()
    what = "the cache key" if secret else "the cache directory" if stat.S_ISDIR(st.st_mode) else "the cache index"
    if st.st_uid != uid:
        raise CacheNotPrivate(f"{path}: {what} belongs to uid {st.st_uid}, not to you (uid {uid}): its owner could "
                              "forge pages that replay as genuine; use a cache directory of your own")
    mode = stat.S_IMODE(st.st_mode)
    if secret and mode & 0o077:
        raise CacheNotPrivate(f"{path}: {what} has mode {mode:04o}: group or others may read or write it, and "
                              f"whoever reads it can forge pages that replay as genuine; `chmod 600 {path}` (as ssh "
                              "requires of its keys), or record the pages again into a fresh cache")
    if not secret and mode & 0o022:
        fix = f"chmod go-w {path}" if stat.S_ISDIR(st.st_mode) else f"chmod 600 {path}"
        raise CacheNotPrivate(f"{path}: {what} has mode {mode:04o}: group or others may write it, and so plant "
                              f"a key or rows of their own; `{fix}`, or keep the cache in a private directory")


def private_root(root: Path) -> Path:
    """The cache directory, made (mode 0700) if absent, with its index file (0600, so that a
    permissive umask cannot open it to others); CacheNotPrivate if either is another user's or
    writable by others. Returns the index's path."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        if is_disk_full(e):
            raise disk_full(root) from None
        raise LifesearchError(f"{root}: cannot make the cache directory: {e.strerror or e}") from None
    check_private(root, os.stat(root), secret=False)
    index = root / "index.sqlite"
    with contextlib.suppress(FileExistsError):
        os.close(os.open(index, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    check_private(index, os.stat(index), secret=False)
    return index


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
        check_private(path, st, secret=True)
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
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:  # a full disk: no half-written key stays behind
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if is_disk_full(e):
                raise disk_full(path) from None
            raise
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
