"""Errors that the CLI turns into exit code 2 with a precise message."""

from __future__ import annotations


class LifesearchError(Exception):
    """A user-facing error: bad input, incomplete run, bad configuration."""


class InputError(LifesearchError):
    """Bad input located in a file: `path:line: field: message`."""

    def __init__(self, path: str, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class IncompleteRunError(LifesearchError):
    """Some rubric of some report has no judgment at all."""
