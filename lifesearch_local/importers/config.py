"""What an import takes beside its files that changes the records it writes: declared once here, marked as the
config fields are (serving's Result), and the CLI's defaults read from these fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from serving import Result


class Drb2ImportConfig(BaseModel):
    """`lifesearch import drb2`'s settings that change the imported reports."""

    model_config = ConfigDict(extra="forbid")

    max_chars: Result[int] = Field(150_000, ge=0)
    """Cut each report at this many characters, as DeepResearch Bench II's evaluator does before grading (its
    run_evaluation.py's MAX_PAPER_CHARS default: the text Gemini read); 0 keeps it whole."""
