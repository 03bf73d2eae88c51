"""Replaying a run's decisions (`rejudge`): the recorded settings, the sample, Δp and flips, the manifest."""

from __future__ import annotations

import contextlib
import json

import pytest

from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.records import Report
from lifesearch_local.run.rejudge import rejudge
from lifesearch_local.rundir.directory import RunDir
from serving.protocol import EngineInfo
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.inputs import write_jsonl
from tests.helpers.judging import two_rubric_inputs


def r1(req) -> bool:
    return "should state R1." in req.messages[0]["content"]


def p_of(key: str, i: int, req) -> float:
    """A deterministic judge: p_true by what it reads (a replay sends only the sampled rubrics, so
    not by position), 0.6 on every R1 (between 0.5 and 0.7)."""
    return 0.6 if r1(req) else 0.9 - 0.1 * int(key.split("|")[0][1:])


def made_run(tmp_path, cfg: JudgeConfig, reports=None):
    tasks, default_reports = two_rubric_inputs(4)
    reports = default_reports if reports is None else reports
    write_jsonl(tmp_path / "tasks.jsonl", [t.model_dump() for t in tasks])
    write_jsonl(tmp_path / "reports.jsonl", [r.model_dump() for r in reports])
    judge_stage(RunDir(tmp_path), tasks, reports, cfg, ScriptedBackend(p_true_fn=p_of), show=False)
    return tmp_path


def opener(backend):
    calls = []

    def open_model(model, ray):
        calls.append(model)
        return contextlib.nullcontext(backend)
    return open_model, calls


def test_the_same_judge_reproduces_and_the_replay_is_recorded(tmp_path):
    run = made_run(tmp_path, JudgeConfig(id="j", threshold=0.7))
    backend = ScriptedBackend(p_true_fn=p_of)
    open_model, calls = opener(backend)
    replay = rejudge(run, 5, seed=3, open_model=open_model)
    assert (replay.sampled, replay.eligible, replay.max_abs_dp, replay.flips) == (5, 8, 0.0, 0)
    # the recorded threshold (0.7) was used: at the default 0.5 every R1 (p 0.6) would have flipped
    sent = [req for call in backend.choice_calls for g in call for req in g.requests]
    assert len(sent) == 5 and any(r1(req) for req in sent) and len(calls) == 1
    assert replay.judges == {"j": []}  # the same (scripted) engine as recorded
    m = RunDir(run).manifest()
    assert m.replays[-1] == replay
    assert rejudge(run, 5, seed=3, open_model=opener(ScriptedBackend(p_true_fn=p_of))[0]).model_dump(
        exclude={"at", "wall_s"}) == replay.model_dump(exclude={"at", "wall_s"})
    assert len(RunDir(run).manifest().replays) == 2  # every replay kept, the last one last


def test_a_judge_that_moved_shows_its_largest_dp_and_its_flips(tmp_path):
    run = made_run(tmp_path, JudgeConfig(id="j"))

    def moved(key, i, req):  # the first task's R0 drops below the threshold; everything else moves by 0.01
        return 0.2 if key.startswith("t0|") and not r1(req) else p_of(key, i, req) - 0.01

    replay = rejudge(run, 100, open_model=opener(ScriptedBackend(p_true_fn=moved))[0])
    assert replay.sampled == 8 and replay.flips == 1
    assert replay.max_abs_dp == pytest.approx(0.9 - 0.2)


def test_the_fingerprint_of_the_replaying_engine_is_compared_with_the_recorded_one(tmp_path):
    run = made_run(tmp_path, JudgeConfig(id="j"))

    class Other(ScriptedBackend):
        def identity(self) -> EngineInfo:
            return EngineInfo(engine="hf", dtype="bfloat16")

    replay = rejudge(run, 2, open_model=opener(Other(p_true_fn=p_of))[0])
    assert replay.judges["j"] == ["engine: 'scripted' != 'hf'", "dtype: None != 'bfloat16'"]


def test_decisions_the_model_did_not_make_are_not_sampled(tmp_path):
    tasks, reports = two_rubric_inputs(4)
    reports[1] = Report(task_id="t1", agent="a", text="  ")  # an empty report: judged without the model
    run = made_run(tmp_path, JudgeConfig(id="j"), reports)
    lines = (run / "judgments.jsonl").read_text().splitlines()
    imported = json.loads(lines[0]) | {"judge": "gemini", "settings": None}  # another evaluator's: no settings here
    (run / "judgments.jsonl").write_text("\n".join([*lines, json.dumps(imported)]) + "\n")
    backend = ScriptedBackend(p_true_fn=p_of)
    replay = rejudge(run, 100, open_model=opener(backend)[0])
    assert (replay.eligible, replay.sampled) == (6, 6)
    assert {g.key for call in backend.choice_calls for g in call} == {"t0|a|0", "t2|a|0", "t3|a|0"}
    with pytest.raises(LifesearchError, match="no recorded settings for judge 'gemini'"):
        rejudge(run, 1, judge="gemini", open_model=opener(backend)[0])


def test_changed_inputs_are_refused(tmp_path):
    run = tmp_path / "run"
    tasks, reports = two_rubric_inputs(2)
    src = tmp_path / "reports.jsonl"
    write_jsonl(src, [r.model_dump() for r in reports])
    write_jsonl(run.parent / "tasks.jsonl", [t.model_dump() for t in tasks])
    rd = RunDir(run)
    from lifesearch_local.rundir.directory import open_run

    with open_run(run, "judge", inputs={"tasks": tmp_path / "tasks.jsonl", "reports": src}):
        judge_stage(rd, tasks, reports, JudgeConfig(id="j"), ScriptedBackend(p_true_fn=p_of), show=False)
    assert rejudge(run, 2, open_model=opener(ScriptedBackend(p_true_fn=p_of))[0]).flips == 0  # found by the manifest
    src.write_text(src.read_text().replace("Report on t0", "Edited report on t0"))
    with pytest.raises(LifesearchError, match="changed since"):
        rejudge(run, 2, open_model=opener(ScriptedBackend(p_true_fn=p_of))[0])


def edit_run(run, *, threshold=None, all_satisfied=False, rehash=False):
    """What a tamperer does to a run: a threshold in the manifest's stage_configs, every verdict
    set to satisfied, and (`rehash`) every recorded settings hash made to agree with the edit."""
    from lifesearch_local.rundir.manifest import settings_hash

    m = json.loads((run / "manifest.json").read_text())
    stage = next(s for s in m["stage_configs"] if s.startswith("judge/"))
    if threshold is not None:
        m["stage_configs"][stage]["threshold"] = threshold
    h = settings_hash(m["stage_configs"][stage])
    if rehash:
        m["hashes"][f"resume/{stage}"] = h
    (run / "manifest.json").write_text(json.dumps(m))
    rows = [json.loads(line) for line in (run / "judgments.jsonl").read_text().splitlines()]
    for r in rows:
        r["satisfied"] = True if all_satisfied else r["satisfied"]
        r["settings"] = h if rehash else r["settings"]
    write_jsonl(run / "judgments.jsonl", rows)


@pytest.mark.parametrize("edit", [
    dict(threshold=0.0, all_satisfied=True),  # the manifest's threshold and the verdicts, hashes left alone
    dict(threshold=0.0, all_satisfied=True, rehash=True),  # every hash made to agree: the derived id does not
    dict(all_satisfied=True),  # verdicts alone: p_true and the threshold say otherwise
])
def test_a_run_edited_after_judging_is_refused_and_no_replay_is_recorded(tmp_path, edit):
    run = made_run(tmp_path, JudgeConfig(threshold=0.7))  # a derived id: it hashes the threshold
    edit_run(run, **edit)
    backend = ScriptedBackend(p_true_fn=p_of)
    with pytest.raises(LifesearchError, match="cannot vouch for the recorded settings") as e:
        rejudge(run, 5, open_model=opener(backend)[0])
    assert "\n" not in str(e.value) and backend.choice_calls == []
    assert RunDir(run).manifest().replays == []


def test_an_untouched_run_with_a_derived_id_replays(tmp_path):
    run = made_run(tmp_path, JudgeConfig(threshold=0.7))
    assert rejudge(run, 3, open_model=opener(ScriptedBackend(p_true_fn=p_of))[0]).flips == 0


def test_a_config_yaml_nested_100k_deep_falls_back_to_the_manifest_in_one_line(tmp_path, caplog):
    run = made_run(tmp_path, JudgeConfig(id="j", threshold=0.7))
    (run / "config.yaml").write_text("judge: " + "[" * 100_000 + "]" * 100_000 + "\n")
    replay = rejudge(run, 3, open_model=opener(ScriptedBackend(p_true_fn=p_of))[0])
    assert replay.sampled == 3 and replay.flips == 0  # the manifest's settings (threshold 0.7) were used
    assert "nested deeper than a config can be" in caplog.text and "using the manifest's recorded settings" in caplog.text
