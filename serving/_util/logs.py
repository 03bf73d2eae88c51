"""The one logging setup of a process's entry point (the CLI, a Ray actor): records as bare lines on stderr."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

OURS = ("lifesearch_local", "serving")


class StderrLines(logging.Handler):
    """Each record as its message alone, as a print to stderr wrote it (a debug record
    names its logger), on whatever sys.stderr is when it is written: a test or a redirection may
    have swapped the stream since the handler was made."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if record.levelno < logging.INFO:
                text = f"{record.name}: {text}"
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def log_to_stderr(level: int = logging.INFO, ours: Iterable[str] = OURS) -> None:
    """Our packages' records from `level` up, and every other library's warnings (as Python's
    last-resort handler showed them), on stderr; calling it again replaces the earlier setup."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, StderrLines)]:
        root.removeHandler(old)
    root.addHandler(StderrLines())
    for name in ours:
        logging.getLogger(name).setLevel(level)
