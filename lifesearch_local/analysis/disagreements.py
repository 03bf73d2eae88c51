"""The disagreement list: every labelled decision where a judge and the reference labels differ."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lifesearch_local.analysis.labels import Key, key_of
from lifesearch_local.records import Judgment, Task


def confidence(verdict: bool | None, p_true: float | None) -> float | None:
    """The probability the judge gave to the verdict it returned (None without p_true or a verdict)."""
    if verdict is None or p_true is None:
        return None
    return p_true if verdict else 1.0 - p_true


def disagreements(tasks: Sequence[Task], judgments: Iterable[Judgment], labels: dict[Key, bool], *,
                  exclude: Iterable[str] = ()) -> list[dict]:
    """Every judgment (every judge run) on a labelled rubric whose verdict is not the label, an
    ungraded verdict included; most confident mistakes first (confidence = the probability the judge
    gave its own verdict), those without p_true after them; ties in a fixed key order."""
    criteria = {(t.id, r.id): r.criterion for t in tasks for r in t.rubrics}
    skip = set(exclude)
    out = []
    for j in judgments:
        k = key_of(j)
        if j.judge in skip or k not in labels or j.satisfied == labels[k]:
            continue
        out.append({
            "judge": j.judge, "judge_run": j.judge_run, "task_id": j.task_id, "agent": j.agent, "run": j.run,
            "rubric_id": j.rubric_id, "criterion": criteria.get((j.task_id, j.rubric_id)), "label": labels[k],
            "verdict": j.satisfied, "p_true": j.p_true, "confidence": confidence(j.satisfied, j.p_true),
            "reason": j.reason,
        })  # fmt: skip
    out.sort(key=lambda d: (d["confidence"] is None, -(d["confidence"] or 0.0), d["judge"], d["task_id"], d["agent"],
                            d["run"], d["rubric_id"], d["judge_run"]))  # fmt: skip
    return out
