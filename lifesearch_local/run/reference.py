"""The reference verdicts a study holds a judge against: Label records, or another judge's judgments."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Reference:
    """Reference verdicts by decision key, and where they came from."""

    index: dict
    """Verdict by (task, agent, run, rubric) key (analysis.labels.label_index)."""
    source: str
    """What they are: the labels' source(s), or the reference judge's id."""
    skipped: int = 0
    """Ungraded judgments of the reference judge left out (they carry no verdict)."""


def load_reference(labels: str | None, labels_from_judgments: str | None, label_judge: str | None,
                   label_source: str | None) -> Reference:
    """The reference of `agree` and `certify`: the Label records of `labels` (those of `label_source` only, when
    given), else the graded judgments of `label_judge` in `labels_from_judgments`."""
    from lifesearch_local.analysis.labels import label_index
    from lifesearch_local.analysis.labels import labels_from_judgments as from_judgments
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.records import Judgment
    from lifesearch_local.rundir.jsonl import read_records

    if labels:
        records = read_labels(labels)
        return Reference(label_index(records, label_source),
                         label_source or ", ".join(sorted({lab.source for lab in records})))
    if not label_judge:
        raise LifesearchError("--labels-from-judgments needs --label-judge ID (the judge to use as reference)")
    records, skipped = from_judgments(read_records(labels_from_judgments, Judgment), label_judge)
    return Reference(label_index(records), label_judge, skipped)


def read_labels(path: str) -> list:
    """The Label records of --labels; a judgments file there is named as such, with the option that takes it."""
    from lifesearch_local.errors import InputError, LifesearchError
    from lifesearch_local.records import Judgment, Label
    from lifesearch_local.rundir.jsonl import iter_json_lines, read_records

    try:
        return read_records(path, Label)
    except InputError:
        first = next(iter_json_lines(path, skip_tail=True), (0, None))[1]
        if isinstance(first, dict) and "judge" in first and _is(Judgment, first):
            raise LifesearchError(f"{path} holds judgments (judge {first['judge']!r}), not labels: use it as the "
                                  f"reference with --labels-from-judgments {path} --label-judge {first['judge']}") from None
        raise


def _is(model: type, obj: dict) -> bool:
    from pydantic import ValidationError

    try:
        model.model_validate(obj)
    except ValidationError:
        return False
    return True
