"""Run directories for the viewer's tests: the report fixtures with a cut report, a replay and hostile text."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.report_runs import make_run_dir

LONG_TEXT = "HEAD-OF-REPORT " + " ".join(f"w{i}" for i in range(400)) + " TAIL-OF-REPORT"
"""The text of the report of t1 · alpha · run 0: its first judgment is recorded as cut by 100 tokens."""
CUT = 100
REPLAY = {"at": "2026-01-02T00:00:00+00:00", "seed": 0, "sampled": 12, "eligible": 90, "max_abs_dp": 0.0123,
          "flips": 1, "judges": {"choice-a": []}, "wall_s": 3.0}


def make_view_run(root: Path) -> Path:
    """make_run_dir (tasks, reports, judgments of three judges, human labels, manifest, config), then:
    the first decision (choice-a on t1 · alpha · 0 · r1) cut by CUT tokens with a hostile reason, that
    report made long, and a replay in the manifest."""
    run = make_run_dir(root)
    lines = (run / "judgments.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first.update(truncated_tokens=CUT, reason='<img src=x onerror="alert(1)"> cut & read')
    lines[0] = json.dumps(first)
    (run / "judgments.jsonl").write_text("\n".join(lines) + "\n")
    reports = [json.loads(x) for x in (run / "reports.jsonl").read_text().splitlines()]
    for r in reports:
        if (r["task_id"], r["agent"], r["run"]) == ("t1", "alpha", 0):
            r["text"] = LONG_TEXT
    (run / "reports.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reports))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["replays"] = [REPLAY]
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run
