"""report.html's "Estimate vs actual": each phase's estimate beside what it took, and the whole run's ratio."""

from __future__ import annotations

from lifesearch_local.output.report.estimate import section_estimate

EST = {"phases": {"judge/j": {"kind": "judge", "decisions": 12, "tokens": 3400,
                              "seconds": {"estimate": 10.0, "low": 8.5, "high": 12.0}}},
       "startup_seconds": 4.0, "total_seconds": 14.0, "total_low_seconds": 12.5, "total_high_seconds": 16.0,
       "load_average": [0.5, 1.0, 1.5]}
ACTUAL = {"phases": {"judge/j": {"seconds": 12.5, "decisions": 12, "tokens": 3400, "ratio": 1.25}},
          "run_seconds": 13.0, "ratio": 1.3}


def test_the_section_puts_the_actual_beside_the_estimate():
    html = section_estimate({"estimate": {"estimate": EST, "actual": ACTUAL}})
    row = html[html.index("judge/j"):html.index("</tr>", html.index("judge/j"))]
    assert "10.0 (8.5–12.0)" in row and "12.5" in row and "1.25" in row
    run = html[html.index("<b>run</b>"):]
    assert "10.0 (8.5–12.0)" in run and "13.0" in run and "1.30" in run  # after start-up: 14 − 4


def test_no_estimate_no_section_and_a_run_not_finished_shows_dashes():
    assert section_estimate({}) == "" and section_estimate(None) == ""
    html = section_estimate({"estimate": {"estimate": EST, "actual": None}})
    assert "Estimate vs actual" in html and "—" in html
