"""The stand-alone stages' run directories: an earlier version's `webcache/` is refused in one line."""

from __future__ import annotations

import pytest

from lifesearch_local.errors import LifesearchError
from lifesearch_local.run.standalone import default_web_cache


def test_the_web_cache_of_a_run_directory_is_web_cache(tmp_path):
    assert default_web_cache(tmp_path) == tmp_path / "web_cache"
    (tmp_path / "web_cache").mkdir()
    (tmp_path / "webcache").mkdir()  # beside the current one it is not read, and not in the way
    assert default_web_cache(tmp_path) == tmp_path / "web_cache"


def test_an_earlier_versions_webcache_is_refused_naming_how_to_use_it(tmp_path):
    (tmp_path / "webcache").mkdir()
    with pytest.raises(LifesearchError, match=r"earlier version.*--cache .*webcache, or use a fresh directory") as e:
        default_web_cache(tmp_path)
    assert "\n" not in str(e.value)
