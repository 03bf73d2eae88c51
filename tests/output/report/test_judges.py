"""The report's judges section: fingerprints, panels, the last replay; absent when a run has none of them."""

from __future__ import annotations

from pathlib import Path

from lifesearch_local.output.report.data import RunData
from lifesearch_local.output.report.judges import section_judges
from lifesearch_local.records import Judgment, Panel

FP = {"judge": "j<1>", "weights_hash": "abc", "engine": "hf", "engine_version": "5.0", "dtype": "float32",
      "prompt_hashes": {"judge_en": "p1"}, "schema_hash": None, "kernel_form": "shared"}


def data(manifest=None, judgments=()) -> RunData:
    return RunData(run_dir=Path("."), tasks=[], reports=[], judgments=list(judgments), manifest=manifest)


def test_nothing_to_show_is_no_section():
    assert section_judges(data()) == section_judges(data({"fingerprints": {}, "replays": []})) == ""


def test_fingerprints_escaped_one_column_per_judge():
    html = section_judges(data({"fingerprints": {"j<1>": FP}}))
    assert "j&lt;1&gt;" in html and "<1>" not in html
    for cell in ("abc", "hf", "5.0", "float32", "shared", "Prompt judge_en", "p1"):
        assert f">{cell}<" in html, cell


def test_the_last_replay_is_the_one_shown():
    replays = [{"at": "t1", "seed": 0, "sampled": 5, "eligible": 9, "max_abs_dp": 0.5, "flips": 2, "judges": {}},
               {"at": "t2", "seed": 4, "sampled": 7, "eligible": 9, "max_abs_dp": 2.5e-07, "flips": 0,
                "judges": {"j": [], "k": ["dtype: 'float32' != 'bfloat16'"]}}]
    html = section_judges(data({"replays": replays}))
    assert ">t2<" in html and ">t1<" not in html and "7 of 9 (seed 4)" in html and ">2.5e-07<" in html
    assert "same as recorded" in html and "dtype: &#x27;float32&#x27; != &#x27;bfloat16&#x27;" in html
    assert "2 replays recorded" in html


def test_panels_are_listed_with_their_members_and_even_splits():
    panel = Panel(members=["a", "b"], combine="majority", votes=[True, False], tie=True)
    js = [Judgment(task_id="t", agent="x", rubric_id=r, judge="p", satisfied=True, panel=panel) for r in ("R1", "R2")]
    html = section_judges(data(judgments=[*js, Judgment(task_id="t", agent="x", rubric_id="R1", judge="a", satisfied=True)]))
    assert 'id="panels"' in html and ">a, b<" in html and ">majority<" in html and ">2<" in html


def test_a_clean_replay_is_not_shown_for_settings_edited_since():
    from lifesearch_local.rundir.manifest import settings_hash

    judged = {"id": "j", "mode": "choice", "threshold": 0.7}
    h = settings_hash(judged)
    clean = {"at": "t1", "seed": 0, "sampled": 2, "eligible": 2, "max_abs_dp": 0.0, "flips": 0, "judges": {"j": []}}
    rows = [Judgment(task_id="t", agent="a", rubric_id=f"r{i}", judge="j", satisfied=p >= 0.7, p_true=p, settings=h)
            for i, p in enumerate((0.6, 0.9))]
    manifest = {"stage_configs": {"judge/j": judged}, "hashes": {"resume/judge/j": h}, "replays": [clean]}
    assert "Flipped verdicts" in section_judges(data(manifest, rows))  # untouched: the replay is shown
    edited = {**manifest, "stage_configs": {"judge/j": {**judged, "threshold": 0.0}}}
    forged = [r.model_copy(update={"satisfied": True}) for r in rows]
    for m, js in ((edited, rows), (manifest, forged)):  # the threshold edited; the verdicts edited
        html = section_judges(data(m, js))
        assert "cannot vouch" in html and "Flipped verdicts" not in html and "same as recorded" not in html
