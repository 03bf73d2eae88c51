"""Reference labels: index them by rubric key, or import another judge's decisions as labels."""

from __future__ import annotations

from collections.abc import Iterable

from lifesearch_local.analysis.scoring import judge_name
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import Judgment, Label

Key = tuple[str, str, int, str]  # task_id, agent, run, rubric_id


def key_of(x: Judgment | Label) -> Key:
    return (x.task_id, x.agent, x.run, x.rubric_id)


def fmt_key(k: Key) -> str:
    return f"task {k[0]}, agent {k[1]}, run {k[2]}, rubric {k[3]}"


def label_index(labels: Iterable[Label], source: str | None = None) -> dict[Key, bool]:
    """key → reference decision; `source` keeps one label source; a conflict is an error."""
    out: dict[Key, bool] = {}
    for lab in labels:
        if source is not None and lab.source != source:
            continue
        k = key_of(lab)
        if k in out and out[k] != lab.satisfied:
            raise LifesearchError(
                f"conflicting labels for {fmt_key(k)}; pick one source with --label-source"
            )
        out[k] = lab.satisfied
    if not out:
        raise LifesearchError("no labels" + (f" with source {source!r}" if source else ""))
    return out


def labels_from_judgments(judgments: Iterable[Judgment], judge: str) -> tuple[list[Label], int]:
    """Import another judge's decisions as reference labels (source = that judge id).

    `judge` is a judge id (its first run is used) or a judge name such as `gemini#1`.
    Returns the labels and the number of ungraded judgments skipped.
    """
    js = list(judgments)
    mine = [j for j in js if judge_name(j) == judge]
    if not mine:
        runs = [j.judge_run for j in js if j.judge == judge]
        mine = [j for j in js if j.judge == judge and j.judge_run == min(runs)] if runs else []
    if not mine:
        found = ", ".join(dict.fromkeys(j.judge for j in js)) or "none"
        raise LifesearchError(f"no judgments by judge {judge!r} to import as labels (found: {found})")
    labels: dict[Key, Label] = {}
    skipped = 0
    for j in mine:
        if j.satisfied is None:
            skipped += 1
            continue
        k = key_of(j)
        if k in labels and labels[k].satisfied != j.satisfied:
            raise LifesearchError(f"judge {judge!r} gives conflicting decisions for {fmt_key(k)}")
        labels[k] = Label(
            task_id=j.task_id, agent=j.agent, run=j.run, rubric_id=j.rubric_id, satisfied=j.satisfied, source=j.judge
        )
    return list(labels.values()), skipped
