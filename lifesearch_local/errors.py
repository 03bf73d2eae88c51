"""Errors that the CLI turns into one line and an exit code (2, or the error's own `exit_code`)."""

from __future__ import annotations


class LifesearchError(Exception):
    """A user-facing error: bad input, incomplete run, bad configuration."""

    exit_code = 2
    """What the CLI exits with: 2 for what the user must change before rerunning."""


class InputError(LifesearchError):
    """Bad input located in a file: `path:line: field: message`."""

    def __init__(self, path: str, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class IncompleteRunError(LifesearchError):
    """Some rubric of some report has no judgment at all."""

    def __init__(self, message: str, complete: list[str] | None = None, n_tasks: int = 0):
        super().__init__(message)
        self.head = message
        """What is missing (the first gap), without advice."""
        self.complete = complete or []
        """Ids of the tasks that were judged in full (what `--task-ids` can score)."""
        self.n_tasks = n_tasks
        """Tasks scored (judged or not)."""


class DiskFull(LifesearchError):
    """A write found no space left on device: nothing half-written stays, the same command resumes
    once space is freed (exit 1, as a failure that passes on another attempt)."""

    exit_code = 1
