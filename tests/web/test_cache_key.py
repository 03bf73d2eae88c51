"""The cache's key: private to its owner, shared by concurrent openers, and never silently recreated."""

from __future__ import annotations

import threading

import pytest

from lifesearch_local.errors import LifesearchError
from lifesearch_local.web.cache import WebCache
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
