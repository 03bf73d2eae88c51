"""The cache's key: private to its owner, shared by concurrent openers, and never silently recreated."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from lifesearch_local.errors import LifesearchError
from lifesearch_local.web.cache import WebCache
from lifesearch_local.web.cache_key import CacheNotPrivate
from tests.helpers.web import cache_with_page, forge_index


def test_a_cache_made_to_look_older_is_refused(tmp_path, capsys):
    root = tmp_path / "cache"
    cache_with_page(root)[0].close()
    forge_index(root, "DROP TABLE meta")  # the index now looks like an older version's: adoption would bless forgeries
    with pytest.raises(LifesearchError, match="format marker|cache.key"):
        WebCache(root)
    (tmp_path / "other").mkdir()
    root2 = tmp_path / "c2"
    cache_with_page(root2)[0].close()
    (root2 / "cache.key").unlink()
    with pytest.raises(LifesearchError, match="cache.key is missing"):
        WebCache(root2)


def test_the_cache_key_is_private_and_concurrent_openers_share_it(tmp_path):
    root = tmp_path / "cache"
    caches: list[WebCache] = []
    threads = [threading.Thread(target=lambda: caches.append(WebCache(root))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({c._key for c in caches}) == 1
    assert (root / "cache.key").stat().st_mode & 0o777 == 0o600


# -- ssh's rule: the cache is the user's own ----------------------------------------------

OTHER_UID = 54321  # a user who is not us (chown needs root: skipped otherwise)


def made_cache(tmp_path) -> Path:
    root = tmp_path / "cache"
    cache_with_page(root)[0].close()
    return root


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o606])
def test_a_key_others_may_read_or_write_is_refused(tmp_path, mode):
    root = made_cache(tmp_path)
    key = root / "cache.key"
    key.chmod(mode)
    with pytest.raises(CacheNotPrivate) as e:
        WebCache(root)
    msg = str(e.value)
    assert msg.startswith(f"{key}: the cache key has mode {mode:04o}") and f"chmod 600 {key}" in msg
    assert "\n" not in msg
    key.chmod(0o600)
    WebCache(root).close()  # the fix it names works


@pytest.mark.parametrize(("name", "mode", "fix"), [("", 0o777, "chmod go-w"), ("", 0o775, "chmod go-w"),
                                                   ("index.sqlite", 0o666, "chmod 600"), ("index.sqlite", 0o664, "chmod 600")])
def test_a_directory_or_index_others_may_write_is_refused(tmp_path, name, mode, fix):
    """A world-writable cache directory lets another user plant cache.key (and index.sqlite) first."""
    root = made_cache(tmp_path)
    target = root / name if name else root
    target.chmod(mode)
    with pytest.raises(CacheNotPrivate, match=f"has mode {mode:04o}: group or others may write it.*{fix} "):
        WebCache(root)


@pytest.mark.parametrize("name", ["cache.key", "index.sqlite", ""])
def test_a_cache_file_owned_by_another_user_is_refused(tmp_path, name):
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    root = made_cache(tmp_path)
    os.chown(root / name if name else root, OTHER_UID, -1)
    with pytest.raises(CacheNotPrivate, match=f"belongs to uid {OTHER_UID}, not to you"):
        WebCache(root)


def test_a_key_planted_by_another_user_before_the_first_run_is_not_used(tmp_path):
    """The issue's attack: in a shared directory another user writes cache.key first; our run would have
    recorded with their key, and their forged rows would have replayed as genuine."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    root = tmp_path / "shared"
    root.mkdir()
    (root / "cache.key").write_text("ab" * 32 + "\n")
    (root / "cache.key").chmod(0o600)
    os.chown(root / "cache.key", OTHER_UID, -1)
    with pytest.raises(CacheNotPrivate, match="cache.key: the cache key belongs to uid"):
        WebCache(root)


def test_a_new_cache_is_private_whatever_the_umask(tmp_path):
    old = os.umask(0o002)  # group-writable by default, as on many shared machines
    try:
        root = tmp_path / "cache"
        WebCache(root).close()
        WebCache(root).close()  # and opens again
    finally:
        os.umask(old)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "index.sqlite").stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "cache.key").stat().st_mode) == 0o600


def test_cache_verify_refuses_an_open_cache_in_one_line(tmp_path, capsys):
    from lifesearch_local.cli import main

    root = made_cache(tmp_path)
    (root / "cache.key").chmod(0o644)
    assert main(["cache", "verify", str(root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cache.key: the cache key has mode 0644" in err[0] and "CORRUPT" not in err[0]


def test_a_cache_made_on_a_full_disk_is_one_line_and_leaves_no_key_temporary(tmp_path):
    """A real tmpfs with no room (no injection): DiskFull naming a cache file, not "cannot be read"."""
    from lifesearch_local.errors import DiskFull
    from tests.helpers.diskfull import fill, small_tmpfs

    with small_tmpfs(tmp_path / "fs", 512) as fs:
        filler = fill(fs)
        with pytest.raises(DiskFull, match=r"/cache/(index\.sqlite|cache\.key|blobs): no space left on device"):
            WebCache(fs / "cache")
        assert [p.name for p in (fs / "cache").iterdir() if p.name.startswith(".cache.key")] == []
        filler.unlink()
        WebCache(fs / "cache").close()
