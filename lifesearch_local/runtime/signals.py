"""Graceful stop on SIGTERM/SIGINT (Slurm preemption): finish the current batch, flush, exit 0."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator

log = logging.getLogger(__name__)


class StopFlag:
    """Set by the first SIGTERM; stages check it between batches. A second signal exits at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None

    def __bool__(self) -> bool:
        return self.event.is_set()


@contextlib.contextmanager
def graceful_stop(signals: tuple[int, ...] = (signal.SIGTERM,)) -> Iterator[StopFlag]:
    """Within the block, SIGTERM sets the flag instead of killing the process."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag  # handlers can only be installed from the main thread
        return

    def handler(signum, frame):
        if flag:
            sys.exit(0)
        flag.signum = signum
        flag.event.set()
        log.warning("\nsignal %d: finishing the current batch, then stopping (rerun to resume)", signum)

    old = {s: signal.signal(s, handler) for s in signals}
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)
