"""The prompt a judge read, rebuilt, with the part of the report its context cut marked.

The prompt text comes from the judge's own renderer (passed in by the command: this layer may not
import the judge). A report too long for the judge lost its middle in tokens: head and tail kept,
the marker below between them, the count recorded as `truncated_tokens`. With the judge's tokenizer
(tokens.py) the cut is placed where the judge's fitting put it; without it, in characters at an
assumed characters-per-token rate, and the page says so: the marker and the count are exact, where
the cut falls is then an estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from lifesearch_local.output.view.tokens import Offsets
from lifesearch_local.records import Report, Rubric, Task

MARKER = "\n\n[… {n} tokens omitted here to fit the model's context …]\n\n"
"""The marker the engines put where they elide (serving's chat fitting; a test holds the two equal)."""
CHARS_PER_TOKEN = {"en": 4.0, "zh": 1.4}
"""Assumed characters per token to place a cut without the tokenizer (typical of BPE tokenizers on
English prose and on Chinese text)."""

PromptRenderer = Callable[[Task, Rubric, str], tuple[str, str, Any]]
"""(task, rubric, report text) → (prompt text, template hash, span with `.start`/`.end` of the report in it)."""
GroupOf = Callable[[Task, Report], tuple[Any, list[str]]]
"""(task, report) → the choice group the judge builds for the report's judged rubrics, and their ids in order."""

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
    """The rate the cut was placed at (None: nothing was cut, or it was placed by the tokenizer)."""
    exact: bool = False
    """The cut was placed with the judge's tokenizer."""


def fitted_prompt(render: PromptRenderer, task: Task, rubric: Rubric, report_text: str,
                  truncated_tokens: int, offsets: Offsets | None = None) -> FittedPrompt:
    """The judge's prompt for one decision; when `truncated_tokens` > 0, the report's middle split
    off as the judge's fitting splits it (kept tokens halved, the head one longer): at the token
    boundaries `offsets` gives (the judge's tokenizer), else at an assumed characters-per-token rate."""
    text, digest, span = render(task, rubric, report_text)
    before, report, after = text[:span.start], text[span.start:span.end], text[span.end:]
    if truncated_tokens <= 0:
        return FittedPrompt([Piece("text", before), Piece("report", report), Piece("text", after)], digest, 0, None)
    tokens = offsets(report) if offsets is not None else None
    if tokens:
        n = len(tokens)
        keep = n - min(truncated_tokens, n)
        head, tail = (keep + 1) // 2, keep // 2
        a, b = tokens[head - 1][1] if head else 0, tokens[n - tail][0] if tail else len(report)
        rate = None
    else:
        rate = CHARS_PER_TOKEN.get(task.language, CHARS_PER_TOKEN["en"])
        cut = min(len(report), round(truncated_tokens * rate))
        a = (len(report) - cut + 1) // 2
        b = a + cut
    pieces = [Piece("text", before), Piece("report", report[:a]), Piece("marker", MARKER.format(n=truncated_tokens)),
              Piece("elided", report[a:b]), Piece("report", report[b:]), Piece("text", after)]
    return FittedPrompt([p for p in pieces if p.text or p.kind == "marker"], digest, truncated_tokens, rate,
                        exact=bool(tokens))
