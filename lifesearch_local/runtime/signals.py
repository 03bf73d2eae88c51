"""Graceful stop on SIGTERM/SIGINT (Slurm preemption): finish the current batch, flush, exit 0."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)


class StopFlag:
    """Set by the first SIGTERM; stages check it between batches. A second signal exits at once."""

    def __init__(self, armed: bool = True) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self.armed = armed
        """False until work has begun (a run directory opened, a stage started): till then SIGTERM
        ends the process as it would without a handler, since nothing is being written."""

    def __bool__(self) -> bool:
        return self.event.is_set()


# The outermost graceful_stop block open in the main thread: its flag and its handler.
_OPEN: list[tuple[StopFlag, Callable]] = []


@contextlib.contextmanager
def graceful_stop(signals: tuple[int, ...] = (signal.SIGTERM,), *, armed: bool = True) -> Iterator[StopFlag]:
    """Within the block, SIGTERM sets the flag instead of killing the process.

    Blocks nest: an inner block (a stage inside a command's run directory) shares the outermost
    one's flag and arms it, so the stages of one command stop together, and a signal that comes
    after the last stage still finds a handler: the command finishes what it was doing, not
    killed half-way through its last lines. `armed=False` (a whole command, from the CLI): until an
    inner block begins, SIGTERM ends the process as before (exit 143; nothing is written yet).
    """
    if threading.current_thread() is not threading.main_thread():
        yield _OPEN[0][0] if _OPEN else StopFlag()  # handlers can only be installed from the main thread
        return
    if _OPEN:
        with _reinstalled(*_OPEN[0], signals) as flag:
            yield flag
        return
    flag = StopFlag(armed)

    def handler(signum, frame):
        if not flag.armed:  # nothing begun: what the signal did before this block
            before = old[signum]
            if callable(before):
                before(signum, frame)
            elif before != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            return
        if flag:
            sys.exit(0)
        flag.signum = signum
        flag.event.set()
        log.warning("\nsignal %d: finishing the current batch, then stopping (rerun to resume)", signum)

    old = {s: signal.signal(s, handler) for s in signals}
    _OPEN.append((flag, handler))
    try:
        yield flag
    finally:
        _OPEN.clear()
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _reinstalled(flag: StopFlag, handler: Callable, signals: tuple[int, ...]) -> Iterator[StopFlag]:
    """An inner block: the outer flag, armed, and the outer handler back in place for the block if
    something (Ray's driver) replaced it meanwhile."""
    flag.armed = True
    replaced = {s: h for s in signals if (h := signal.getsignal(s)) is not handler}
    for s in replaced:
        signal.signal(s, handler)
    try:
        yield flag
    finally:
        for s, h in replaced.items():
            signal.signal(s, h)


@contextlib.contextmanager
def command_stop(*, program: bool) -> Iterator[StopFlag]:
    """SIGTERM over a whole command (the CLI's block): before it begins work, the signal ends the
    process (exit 143); once it has (a run directory opened, a stage started), the signal sets the
    flag its stages share, so one that comes just after the last record finds a finished stage
    and the command exits 0. With `program` (this process is the command), a SIGTERM after a
    command that did work is ignored: what is left is the interpreter's exit, nothing to save."""
    with graceful_stop(armed=False) as flag:
        yield flag
    if program and flag.armed:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
