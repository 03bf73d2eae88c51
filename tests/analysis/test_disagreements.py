"""The disagreement list: confident mistakes first, ungraded last, reference judges left out."""

from __future__ import annotations

import pytest


def test_disagreements_order_and_content():
    from lifesearch_local.analysis.disagreements import disagreements
    from lifesearch_local.records import Judgment, Task

    task = Task.model_validate({"id": "t", "language": "en", "domain": "company", "question": "q", "rubrics": [
        {"id": f"r{i}", "criterion": f"c{i}", "type": "Objective", "necessity": "Explicit", "priority": "Must Have",
         "weight": 1.0} for i in range(5)]})
    labels = {("t", "a", 0, f"r{i}"): True for i in range(5)}
    js = [Judgment(task_id="t", agent="a", rubric_id="r0", judge="j", satisfied=True, p_true=0.9),   # right
          Judgment(task_id="t", agent="a", rubric_id="r1", judge="j", satisfied=False, p_true=0.4),  # conf .6
          Judgment(task_id="t", agent="a", rubric_id="r2", judge="j", satisfied=False, p_true=0.05),  # conf .95
          Judgment(task_id="t", agent="a", rubric_id="r3", judge="j", satisfied=None, reason="no JSON"),
          Judgment(task_id="t", agent="a", rubric_id="r4", judge="ref", satisfied=False, p_true=0.0)]  # excluded
    got = disagreements([task], js, labels, exclude=["ref"])
    assert [d["rubric_id"] for d in got] == ["r2", "r1", "r3"]
    assert got[0]["confidence"] == pytest.approx(0.95) and got[0]["criterion"] == "c2" and got[0]["label"] is True
    assert got[2]["verdict"] is None and got[2]["confidence"] is None and got[2]["reason"] == "no JSON"
