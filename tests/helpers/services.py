"""The one gate of the tests that need a real service (Slurm, a second host, vLLM's CPU build): skipped here
when it is missing, refused when CI said the service must be there."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest


def gate(why: str | None, flag: str, folder: str) -> Callable:
    """A `pytest_collection_modifyitems` hook that skips the tests under `folder` with the reason `why` (None: the
    service is there); with `flag`=1 in the environment a missing service stops the run instead (no silent skip)."""
    if why and os.environ.get(flag) == "1":
        raise pytest.UsageError(f"{flag}=1 but {why}")

    def pytest_collection_modifyitems(config, items):
        for item in items:
            if why and str(item.fspath).startswith(folder):
                item.add_marker(pytest.mark.skip(reason=why))

    return pytest_collection_modifyitems
