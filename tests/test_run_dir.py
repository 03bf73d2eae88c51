"""Run-directory hardening (issue 16): one writer at a time, config changes refused on resume,
judgments saved report by report, located manifest errors, `lifesearch repair`, injective
trajectory names, empty reports not judged."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, rubric, task, write_jsonl
from doubles import ScriptedBackend

from lifesearch_local.agent.trajectory import trajectory_name
from lifesearch_local.analysis.scoring import score_by_judge
from lifesearch_local.cli import main
from lifesearch_local.errors import InputError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.llm.models import engine_config  # noqa: E402
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.lock import LOCK_FILE, RunDirBusy
from lifesearch_local.rundir.manifest import ConfigChanged
from serving.config import model_config

HOLD = ("import sys, time\nfrom lifesearch_local.rundir.directory import RunDir\n"
        "with RunDir(sys.argv[1]).locked('judge'):\n    print('held', flush=True)\n    time.sleep(120)\n")


@pytest.fixture
def holder(tmp_path):
    """A second process holding the lock of tmp_path/run."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "run")], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_a_second_process_is_refused_naming_the_holder(tmp_path, holder):
    rd = RunDir(tmp_path / "run")
    with pytest.raises(RunDirBusy, match=rf"in use by another lifesearch process \(pid {holder.pid}, "
                       r"`lifesearch judge` since "), rd.locked():
        pass
    with pytest.raises(RunDirBusy):  # every write needs the lock
        rd.append("judgments.jsonl", [Judgment(task_id="t", agent="a", rubric_id="R", judge="j", satisfied=True)])
    assert not rd.file("judgments.jsonl").exists()


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path, holder):
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    rd = RunDir(tmp_path / "run")
    with rd.locked("judge"):
        assert json.loads(rd.file(LOCK_FILE).read_text())["pid"] == os.getpid()
        with rd.locked():  # reentrant within the process
            rd.update_manifest(hashes={"x": "1"})
    assert not rd.holds_lock()


def sample_args(out: Path, *extra: str) -> list[str]:
    return ["judge", "--tasks", str(ROOT / "data/sample/tasks.jsonl"), "--reports",
            str(ROOT / "data/sample/reports.jsonl"), "--out", str(out), "--quiet", "--limit", "1", *extra]


def cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lifesearch_local", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_judge_cli_refuses_a_run_dir_in_use(tmp_path, holder):
    res = cli(sample_args(tmp_path / "run", "--model", "tiny-llama"))
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and f"pid {holder.pid}" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "run" / "judgments.jsonl").exists()


# -- config changes under one judge id -------------------------------------------------------------------------

def tiny_inputs(n_tasks: int = 2, texts: list[str] | None = None) -> tuple[list[Task], list[Report]]:
    tasks = [Task.model_validate(task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(3)])) for i in range(n_tasks)]
    texts = texts or [f"Report on t{i}: the facts." for i in range(n_tasks)]
    return tasks, [Report(task_id=f"t{i}", agent="a", text=t) for i, t in enumerate(texts)]


def judge(model: str = "tiny-llama", jid: str = "j", **kw) -> JudgeConfig:
    return JudgeConfig(id=jid, model=model_config(model=model, **kw.pop("model_kw", {})), **kw)


def test_another_model_under_the_same_judge_id_is_refused(tmp_path, capsys):
    rd = RunDir(tmp_path)
    tasks, reports = tiny_inputs()
    judge_stage(rd, tasks, reports, judge("tiny-llama"), ScriptedBackend(), show=False)
    before = rd.file("judgments.jsonl").read_bytes()
    with pytest.raises(ConfigChanged, match=r"judge/j has records made with another config \(hash (\w+), now (\w+): "
                       r'model.model "tiny-llama" -> "tiny-qwen2"\).*--force-config'):
        judge_stage(rd, tasks, reports, judge("tiny-qwen2"), ScriptedBackend(), show=False)
    assert rd.manifest().stage_configs["judge/j"]["model"]["model"] == "tiny-llama"  # not rewritten
    # where and how fast it runs is not what it computes
    stats = judge_stage(rd, tasks, reports, judge("tiny-llama", groups_per_call=3, model_kw={"device": "cpu"}),
                        ScriptedBackend(), show=False)
    assert stats["decisions"] == 0 and rd.file("judgments.jsonl").read_bytes() == before
    # more reports under the old id with the new model only when asked, and said
    more_tasks, more = tiny_inputs(3)
    stats = judge_stage(rd, more_tasks, more, judge("tiny-qwen2"), ScriptedBackend(), show=False, force_config=True)
    assert stats["decisions"] == 3 and "--force-config: judge/j" in capsys.readouterr().err
    assert rd.manifest().stage_configs["judge/j"]["model"]["model"] == "tiny-qwen2"
    # a new id is a new judge
    assert judge_stage(rd, tasks, reports, judge("tiny-mistral", "k"), ScriptedBackend(), show=False)["decisions"] == 6


def test_judge_cli_refuses_another_model_under_the_same_id(tmp_path):
    out = tmp_path / "run"
    first = cli(sample_args(out, "--model", "tiny-llama", "--id", "j"))
    assert first.returncode == 0, first.stderr
    again = cli(sample_args(out, "--model", "tiny-qwen2", "--id", "j"))
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "judge/j has records made with another config (hash" in again.stderr
    assert 'model.model "tiny-llama" -> "tiny-qwen2"' in again.stderr
    assert json.loads((out / "manifest.json").read_text())["stages"]["judge/j"]["model"] == "tiny-llama"


# -- judgments saved as they exist -----------------------------------------------------------------------------

class Streaming(ScriptedBackend):
    """Yields report by report, recording how many judgment lines were on disk as each report started."""

    def __init__(self, path: Path):
        super().__init__()
        self.path, self.seen = path, []

    def _lines(self) -> int:
        return self.path.read_text().count("\n") if self.path.exists() else 0

    def score_choices(self, groups, choices):
        self.seen.append(self._lines())
        return super().score_choices(groups, choices)

    def iter_score_choices(self, groups, choices):
        for i, g in enumerate(groups):
            yield [i], self.score_choices([g], choices)


def test_each_reports_judgments_are_appended_as_soon_as_they_exist(tmp_path):
    rd = RunDir(tmp_path)
    tasks, reports = tiny_inputs(4)
    backend = Streaming(rd.file("judgments.jsonl"))
    judge_stage(rd, tasks, reports, judge(), backend, show=False)  # groups_per_call 8: one call
    assert backend.seen == [0, 3, 6, 9]  # report k starts with the k reports before it saved


def test_hf_backend_streams_the_same_results_group_by_group():
    from lifesearch_local.judge.rubric import choice_group, pending_work
    from serving.engines.hf import HFEngine

    tasks, reports = tiny_inputs(3)
    work = pending_work({t.id: t for t in tasks}, reports, set(), "j", 0)
    groups = [choice_group(p)[0] for p in work]
    backend = HFEngine(engine_config(model_config(model="tiny-llama", device="cpu")))
    whole = backend.score_choices(groups, ["true", "false"])
    parts = list(backend.iter_score_choices(groups, ["true", "false"]))
    assert [idx for idx, _ in parts] == [[0], [1], [2]]
    for (i,), (res,) in parts:
        assert all(math.isclose(a.probs[0], b.probs[0], abs_tol=1e-6) for a, b in zip(res, whole[i]))


# -- empty reports -------------------------------------------------------------------------------------------

def test_an_empty_report_is_not_judged_and_scores_zero(tmp_path):
    rd = RunDir(tmp_path)
    tasks, reports = tiny_inputs(3, ["A full report.", "", " \n\t "])
    backend = ScriptedBackend(p_true_fn=lambda key, i, req: 0.99)
    judge_stage(rd, tasks, reports, judge(), backend, show=False)
    sent = [g.key for call in backend.choice_calls for g in call]
    assert sent == ["t0|a|0"]
    got = rd.load("judgments.jsonl", Judgment)
    empty = [j for j in got if j.task_id in ("t1", "t2")]
    assert len(empty) == 6 and all(j.satisfied is False and j.reason == "empty report" and j.p_true is None
                                   and j.raw is None for j in empty)
    score = score_by_judge(tasks, got)["j"]["a"]  # eq. 1: t0 satisfied everywhere, the empty ones 0
    assert score.tasks == {"t0": 1.0, "t1": 0.0, "t2": 0.0} and math.isclose(score.overall_mean, 1 / 3)


# -- manifest, repair, file names ------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "where"), [
    ('{"package_version": "0.1",\n "python": "3.11", oops}', r"manifest.json:2: malformed JSON"),
    ('{"package_version": 1, "python": "3", "created": "x", "updated": "y"}', r"manifest.json: package_version: "),
    ("[1, 2]", r"manifest.json: expected a JSON object, got list"),
])
def test_a_damaged_manifest_is_a_located_error(tmp_path, capsys, text, where):
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text(text)
    with pytest.raises(InputError, match=where):
        RunDir(out).manifest()
    assert main(sample_args(out, "--model", "tiny-llama")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json" in err and f"lifesearch repair {out}" in err


def judgment(i: int, satisfied: bool = True) -> dict:
    return Judgment(task_id=f"t{i}", agent="a", rubric_id="R1", judge="j", satisfied=satisfied).model_dump(mode="json")


def test_repair_keeps_every_valid_line_and_reports_the_rest(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    rows = [judgment(0), judgment(1), judgment(2), judgment(1, satisfied=False), judgment(3), judgment(0), judgment(4)]
    write_jsonl(out / "judgments.jsonl", rows, raw_lines={3: '{"task_id": "t2", "agent": "a", "rub',
                                                           5: json.dumps({**judgment(3), "satisfied": "maybe"})})
    (out / "manifest.json").write_text("{torn")
    with pytest.raises(InputError, match=r"judgments.jsonl:3: malformed JSON.*lifesearch repair"):
        RunDir(out).load("judgments.jsonl", Judgment)
    assert main(["repair", str(out)]) == 0
    said = capsys.readouterr().out
    assert "judgments.jsonl: kept 3, dropped 4" in said
    for line in ("line 3: malformed JSON", "line 4: duplicate of line 2 (conflicting)", "line 5: satisfied: ",
                 "line 6: duplicate of line 1 (identical)", "manifest.json: kept 0, dropped 1 (renamed manifest.json.corrupt-"):
        assert line in said
    kept = RunDir(out).load("judgments.jsonl", Judgment)
    assert [(j.task_id, j.satisfied) for j in kept] == [("t0", True), ("t1", True), ("t4", True)]
    dropped = [json.loads(x) for x in (out / "judgments.jsonl.dropped").read_text().splitlines()]
    assert [d["line"] for d in dropped] == [3, 4, 5, 6] and dropped[0]["raw"].startswith('{"task_id": "t2"')
    assert not (out / "manifest.json").exists() and list(out.glob("manifest.json.corrupt-*"))
    assert main(["repair", str(out)]) == 0
    assert "nothing to repair" in capsys.readouterr().out


def test_trajectory_names_are_injective():
    names = {trajectory_name(t, a, 0) for t, a in [("a/b", "x"), ("a_b", "x"), ("a b", "x"), ("a", "b/x"), ("a", "b_x")]}
    assert len(names) == 5
    assert all(n.startswith("trajectories/") and "/" not in n.removeprefix("trajectories/") for n in names)
    assert trajectory_name("a/b", "x", 0) == trajectory_name("a/b", "x", 0)  # stable: a resume finds its log


@pytest.mark.slow
def test_two_concurrent_judge_runs_one_refused(tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "lifesearch_local", *sample_args(out, "--model", "tiny-llama")]
    procs = [subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], results
    loser = results[[p.returncode for p in procs].index(2)][1]
    assert "in use by another lifesearch process (pid" in loser
    rows = RunDir(out).load("judgments.jsonl", Judgment)
    assert len(rows) == len({r.key for r in rows}) > 0
