"""Stop requests that long model calls honour between chunks, so SIGTERM stops a judge within seconds."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

_EVENTS: list[threading.Event] = []


class Stopped(RuntimeError):
    """A model call gave up part-way because a stop was requested; its results are discarded."""


@contextlib.contextmanager
def honoured(event: threading.Event) -> Iterator[None]:
    """Within the block, in-process model calls raise `Stopped` soon after `event` is set
    (between prefill chunks, packed passes and generated tokens). Callers that opt in must
    catch `Stopped`; others (the agent, which stops between steps) are left alone."""
    _EVENTS.append(event)
    try:
        yield
    finally:
        _EVENTS.remove(event)


def requested() -> bool:
    return any(e.is_set() for e in _EVENTS)


def check() -> None:
    """Raise `Stopped` if a stop was requested."""
    if requested():
        raise Stopped("stop requested (SIGTERM): model call abandoned; rerun to resume")


def until_stopped(items: Iterable[T]) -> Iterator[T]:
    """`items` until a model call raises `Stopped`, then end quietly (the caller's stop flag is set)."""
    try:
        yield from items
    except Stopped:
        return
