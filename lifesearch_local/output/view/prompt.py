"""The prompt a judge read, rebuilt, with the part of the report its context cut marked.

The prompt text comes from the judge's own renderer (passed in by the command: this layer may not
import the judge). A report too long for the judge lost its middle in tokens: head and tail kept,
the marker below between them, the count recorded as `truncated_tokens`. Without the judge's
tokenizer the viewer places that cut in characters, at an assumed characters-per-token rate, and
says so on the page: the marker and the count are exact, where the cut falls is an estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from lifesearch_local.records import Rubric, Task

MARKER = "\n\n[… {n} tokens omitted here to fit the model's context …]\n\n"
"""The marker the engines put where they elide (serving's chat fitting; a test holds the two equal)."""
CHARS_PER_TOKEN = {"en": 4.0, "zh": 1.4}
"""Assumed characters per token to place a cut without the tokenizer (typical of BPE tokenizers on
English prose and on Chinese text)."""

PromptRenderer = Callable[[Task, Rubric, str], tuple[str, str, Any]]
"""(task, rubric, report text) → (prompt text, template hash, span with `.start`/`.end` of the report in it)."""

PieceKind = Literal["text", "report", "marker", "elided"]


@dataclass
class Piece:
    """A stretch of the rebuilt prompt: template text, report text the judge read, the marker, or
    report text it did not read."""

    kind: PieceKind
    text: str


@dataclass
class FittedPrompt:
    """The rebuilt prompt in pieces, and how the cut was placed."""

    pieces: list[Piece]
    template_hash: str
    truncated_tokens: int
    chars_per_token: float | None
    """The rate the cut was placed at (None: nothing was cut)."""


def fitted_prompt(render: PromptRenderer, task: Task, rubric: Rubric, report_text: str,
                  truncated_tokens: int) -> FittedPrompt:
    """The judge's prompt for one decision; when `truncated_tokens` > 0, the report's middle split
    off as the judge's fitting splits it (kept part halved, the head one longer)."""
    text, digest, span = render(task, rubric, report_text)
    before, report, after = text[:span.start], text[span.start:span.end], text[span.end:]
    if truncated_tokens <= 0:
        return FittedPrompt([Piece("text", before), Piece("report", report), Piece("text", after)], digest, 0, None)
    rate = CHARS_PER_TOKEN.get(task.language, CHARS_PER_TOKEN["en"])
    cut = min(len(report), round(truncated_tokens * rate))
    keep = len(report) - cut
    head = (keep + 1) // 2
    pieces = [Piece("text", before), Piece("report", report[:head]), Piece("marker", MARKER.format(n=truncated_tokens)),
              Piece("elided", report[head:head + cut]), Piece("report", report[head + cut:]), Piece("text", after)]
    return FittedPrompt([p for p in pieces if p.text or p.kind == "marker"], digest, truncated_tokens, rate)
