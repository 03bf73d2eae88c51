"""Decisions reported from inside long model calls, so a caller's progress bar moves within a batch."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

_HOOKS: list[Callable[[int], None]] = []


@contextlib.contextmanager
def reporting(hook: Callable[[int], None]) -> Iterator[None]:
    """Within the block, in-process scorers call `hook(n)` as each n decisions are computed."""
    _HOOKS.append(hook)
    try:
        yield
    finally:
        _HOOKS.remove(hook)


def decided(n: int) -> None:
    """n more decisions are computed (called by the kernel after each report or packed pass)."""
    for hook in list(_HOOKS):
        hook(n)
