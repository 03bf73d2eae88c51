"""The inputs tests write and read: the repository's folders, task and rubric rows, JSONL files."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
AGREE = FIXTURES / "agree"  # three judges, three agents, hand-computed agreement (tests/analysis/test_agreement.py)
SAMPLE = ROOT / "data" / "sample"
CORPUS = ROOT / "data" / "web"


def rubric(rid: str, weight: float, **kw) -> dict:
    return {
        "id": rid,
        "criterion": kw.pop("criterion", f"The response should state {rid}."),
        "type": kw.pop("type", "Objective"),
        "necessity": kw.pop("necessity", "Explicit"),
        "priority": kw.pop("priority", "Must Have"),
        "weight": weight,
        **kw,
    }


def task(tid: str, rubrics: list[dict], **kw) -> dict:
    return {"id": tid, "language": kw.pop("language", "en"), "domain": kw.pop("domain", "company"),
            "question": kw.pop("question", f"Question {tid}?"), "rubrics": rubrics, **kw}


def write_jsonl(path: Path, rows: list, raw_lines: dict[int, str] | None = None) -> Path:
    """Write rows as JSONL; raw_lines replaces line N (1-based) with literal text."""
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    for n, text in (raw_lines or {}).items():
        lines[n - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# One valid row of each record kind (a judgment, a report, a label of task t0's rubric R0), to copy and break.
J = {"task_id": "t0", "agent": "a", "run": 0, "rubric_id": "R0", "judge": "j", "satisfied": True, "p_true": 0.9}
R = {"task_id": "t0", "agent": "a", "run": 0, "text": "A report."}
L = {"task_id": "t0", "agent": "a", "run": 0, "rubric_id": "R0", "satisfied": True}
HUGE = "1" * 5000  # beyond Python's 4300-digit limit for int() of a string


def judge_inputs(tmp_path: Path, n: int = 2) -> tuple[Path, Path]:
    """tasks.jsonl and reports.jsonl of n tasks (t0, t1, ...) with two rubrics each and one report each."""
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(2)]) for i in range(n)])
    reports = write_jsonl(tmp_path / "reports.jsonl", [{**R, "task_id": f"t{i}", "text": f"Report on t{i}."} for i in range(n)])
    return tasks, reports
