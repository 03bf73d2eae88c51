"""stderr as a terminal, so that a progress bar is drawn into a buffer the test reads."""

from __future__ import annotations

import io


class Terminal(io.StringIO):
    """stderr as a terminal, so that the bar is drawn (into this buffer)."""

    def isatty(self) -> bool:
        return True
