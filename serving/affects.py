"""What each config field affects, declared once on the field: the result, or only where and how fast it runs.

Every field of every config class carries one marker (`Result[...]`, `Execution[...]`,
`ChoiceOnly[...]`, `GenerateOnly[...]`) in its annotation. The resume guard (what a stage's
records are checked against), the run-config check of `lifesearch run` and the derived judge id
all read it through `result_settings`; tests/serving/test_affects.py fails when a field has none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


@dataclass(frozen=True)
class Affects:
    """The marker in a config field's `Annotated` metadata."""

    what: Literal["result", "execution"]
    """result: another value can change what a stage writes; execution: only where or how fast it runs."""
    mode: Literal["choice", "generate"] | None = None
    """A result setting read in this judging mode only (the derived judge id leaves it out in the other)."""


Result = Annotated[T, Affects("result")]
Execution = Annotated[T, Affects("execution")]
ChoiceOnly = Annotated[T, Affects("result", "choice")]
GenerateOnly = Annotated[T, Affects("result", "generate")]


def affects(cls: type[BaseModel], name: str) -> Affects | None:
    """The marker of `cls`'s field `name`, or None when it has none."""
    return next((m for m in cls.model_fields[name].metadata if isinstance(m, Affects)), None)


def unclassified(cls: type[BaseModel]) -> list[str]:
    """The fields of `cls` without a marker (a test keeps this empty for every config class)."""
    return [name for name in cls.model_fields if affects(cls, name) is None]


def left_out(cls: type[BaseModel], mode: str | None = None) -> set[str]:
    """The fields of `cls` that `result_settings` leaves out: execution-only ones, and with `mode`
    the result settings of the other mode. An unmarked field counts as a result setting."""
    out = set()
    for name in cls.model_fields:
        mark = affects(cls, name)
        if mark is not None and (mark.what == "execution" or (mode is not None and mark.mode not in (None, mode))):
            out.add(name)
    return out


def result_settings(cfg: BaseModel, *, mode: str | None = None, exclude_defaults: bool = False,
                    exclude: Iterable[str] = ()) -> dict[str, Any]:
    """`cfg` as JSON without what `left_out` names, nested configs (and lists of them) likewise:
    what two runs must share for their records to be one result. `exclude_defaults` also drops
    fields at their default (so a new setting added with a default changes nothing)."""
    data = cfg.model_dump(mode="json", exclude_defaults=exclude_defaults, exclude=left_out(type(cfg), mode) | set(exclude))
    for name in data:
        value = getattr(cfg, name)
        if isinstance(value, BaseModel):
            data[name] = result_settings(value, mode=mode, exclude_defaults=exclude_defaults)
        elif isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
            data[name] = [result_settings(v, mode=mode, exclude_defaults=exclude_defaults) for v in value]
    return data
