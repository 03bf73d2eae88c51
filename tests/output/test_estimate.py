"""The estimate as terminal lines: the phases' work and time, the total, memory, the basis and assumptions."""

from __future__ import annotations

from lifesearch_local.output.estimate import estimate_lines

PHASE = {"kind": "judge", "model": "m", "runs": None, "decisions": 12, "decisions_per_repetition": [6, 6], "records": None,
         "requests": 12, "tokens": 3400, "prompt_tokens": 9000, "output_tokens": None,
         "seconds": {"estimate": 10.0, "low": 8.5, "high": 12.0}, "gpus": 0.0, "gpu_hours": 0.0, "memory_gib": 0.5,
         "basis": "calibrated now (load 0.5, in-process)", "assumptions": ["something assumed"]}
EST = {"command": "judge", "phases": {"judge/j": PHASE}, "startup_seconds": 4.0, "finish_seconds": 0.0,
       "total_seconds": 14.0, "total_low_seconds": 12.5, "total_high_seconds": 16.0, "gpu_hours": 0.0,
       "memory": {"needed_gib": 0.5, "free_gib": 0.25, "fits": False, "device": "cpu"}, "load_average": [0.5, 1.0, 1.5],
       "notes": []}


def test_the_lines_say_the_work_the_time_and_what_does_not_fit():
    text = "\n".join(estimate_lines(EST, "judge"))
    assert "12 decisions (6 + 6)" in text and "3,400" in text and "10.0 (8.5–12.0)" in text
    assert "total 14.0 s (12.5–16.0), start-up 4.0 s" in text
    assert "DOES NOT FIT" in text and "assumes something assumed" in text and "calibrated now" in text


def test_an_unknown_time_is_said_not_shown_as_zero():
    est = {**EST, "phases": {"judge/j": {**PHASE, "seconds": None}}, "total_seconds": None}
    text = "\n".join(estimate_lines(est, "judge"))
    assert "unknown" in text and "total: unknown" in text


def test_a_busy_machine_is_said_under_the_heading():
    lines = estimate_lines({**EST, "busy": "machine busy: load average 3 …"}, "judge")
    assert lines[1] == "machine busy: load average 3 …"
    assert not any(line.startswith("machine busy") for line in estimate_lines(EST, "judge"))
