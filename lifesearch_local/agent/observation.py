"""What a tool call returns: text for the model, and ok/failure/summary for the trajectory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Observation:
    """One tool result. `text` goes to the model; the rest goes to the trajectory log."""

    text: str
    """What the model reads."""
    ok: bool = True
    """False when the call produced no usable result."""
    failure: str | None = None
    """Failure kind (timeout, not_found, after_cutoff, memory_limit, invalid_arguments, …)."""
    summary: str = ""
    """One line for the trajectory (never the whole page)."""
    data: dict[str, Any] = field(default_factory=dict)
    """Structured details for the trajectory: urls, counts, exit codes, cache hits."""

    @classmethod
    def fail(cls, kind: str, message: str, **data: Any) -> Observation:
        """A failure the model sees as `[error: kind] message`."""
        return cls(text=f"[error: {kind}] {message}", ok=False, failure=kind, summary=f"{kind}: {message}"[:300], data=data)


def clip(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters: head and tail kept, the middle replaced by a marker."""
    if len(text) <= limit:
        return text
    head = max(0, limit * 2 // 3)
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut} characters cut …]\n{text[len(text) - tail:] if tail else ''}"
