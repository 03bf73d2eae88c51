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


def excerpt(value: object, limit: int = 24, *, quote: bool = True) -> str:
    """A short, printable excerpt of a value the user typed (an argument), quoted, for an error:
    control characters escaped, cut at `limit` characters. Never for a file's contents: an error
    about those names the file, line and field instead (a private file must not be echoed)."""
    text = str(value)
    shown = printable(text[:limit])
    shown += "…" if len(text) > limit else ""
    return f"'{shown}'" if quote else shown


def printable(text: str) -> str:
    """`text` with every character that is not printable (controls, a terminal's escape codes)
    escaped as Python would (`\\x1b`): what an error may show of a name it did not choose."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
