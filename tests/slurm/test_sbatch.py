"""The shipped sbatch scripts on a real Slurm: a run completes; preemption (batch SIGTERM, `scontrol
requeue`, the time-limit signal) requeues, resumes and ends with exactly an uninterrupted run's
records; the multi-node script runs; a Ray head that fails fails the job at once, in one line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.slurm import FINAL, Job, assert_same_records, job_env, lines, wait_for

pytestmark = pytest.mark.slow


NOISE = re.compile(r"srun: error|CANCELLED|Traceback|slurmstepd.*error")


def assert_clean_end(job: Job) -> None:
    info = job.info()
    assert (info["JobState"], info["ExitCode"]) == ("COMPLETED", "0:0"), (info, job.log()[-3000:])
    assert (job.run / "scores.json").exists() and (job.run / "report.html").exists()
    assert not NOISE.search(job.log()), job.log()[-3000:]  # a normal end logs no error


def wait_requeued(job: Job, n: int, timeout: float = 240) -> None:
    """The job has been requeued `n` times and runs again (its rerun resumes the run directory). The waits
    here are bounds for a failure, generous because CI runs these beside the vLLM tests on 2 cores."""
    wait_for(lambda: job.restarts() >= n and job.state() == "RUNNING", timeout, f"restart {n} of job {job.id}", job)


def test_the_shipped_script_completes(baseline):
    assert_clean_end(baseline)
    assert baseline.restarts() == 0
    assert lines(baseline.run / "judgments.jsonl") > 0 and lines(baseline.run / "reports.jsonl") == 2
    assert "1 Ray nodes alive" in baseline.log()


def test_batch_sigterm_mid_agent_then_mid_judge(baseline, tmp_path):
    job = Job(tmp_path, "slurm/lifesearch.sbatch")
    try:
        # mid-agent: the driver has joined Ray and opened the agent's replicas, no report yet
        wait_for(lambda: "Ray nodes alive" in job.log(), 120, "the cluster", job, poll=0.1)
        time.sleep(2)
        assert lines(job.run / "reports.jsonl") < 2
        job.term_batch()
        wait_for(lambda: job.restarts() >= 1, 240, "the requeue after SIGTERM", job)
        stopped = job.log()
        assert "SIGTERM: stopping the run for requeue" in stopped
        assert not (job.run / "scores.json").exists()
        wait_requeued(job, 1)
        # mid-judge: the rerun finished the agents' reports, the judge has none flushed yet
        wait_for(lambda: lines(job.run / "reports.jsonl") == 2 and job.restarts() == 1, 300, "the reports", job, poll=0.1)
        assert lines(job.run / "judgments.jsonl") == 0
        job.term_batch()
        wait_requeued(job, 2)
        assert job.wait_final(300) == "COMPLETED"
    finally:
        if job.state() not in FINAL:
            job.cancel()
    assert job.log().count("SIGTERM: stopping the run for requeue") == 2
    assert_clean_end_after_requeues(job)
    assert_same_records(job.run, baseline.run)


def hold_first_run(tmp: Path) -> dict[str, str]:
    """A job environment whose first `lifesearch run` waits (up to 200 s) before starting, as a
    slow model load would: Slurm checks time limits every ~30 s, so a signal due at once can land
    after a fast run has finished, and the test would no longer show a stop and a requeue."""
    real = Path(sys.executable).parent / "lifesearch"
    hold = tmp / "hold-bin"
    hold.mkdir()
    wrapper = hold / "lifesearch"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = run ] && mkdir "{tmp}/held" 2>/dev/null; then\n'
        "  sleep 200 & pid=$!\n"
        "  trap 'kill $pid; exit 143' TERM\n"
        "  wait $pid\n"
        "fi\n"
        f'exec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    env = job_env(tmp)
    return {**env, "PATH": f"{hold}:{env['PATH']}"}


def test_time_limit_signal_then_scontrol_requeue(baseline, tmp_path):
    # --time=2 with the script's --signal=B:TERM@120: the signal is due at once. It can come while
    # Ray starts or, later, while the first run is held (hold_first_run), so the stop is certain. A requeued job
    # keeps its limit, so after the first signal the limit is raised, as a user would for a job
    # that cannot finish in its slot.
    job = Job(tmp_path, "slurm/lifesearch.sbatch", "--time=2", env=hold_first_run(tmp_path))
    try:
        wait_for(lambda: job.restarts() >= 1, 240, "the time-limit signal and the requeue", job)
        assert "SIGTERM: stopping the run for requeue" in job.log()
        # The signal may land while Ray starts (before `lifesearch run`) or while the run is held.
        assert not (job.run / "scores.json").exists()
        subprocess.run(["scontrol", "update", f"JobId={job.id}", "TimeLimit=30"], check=True, timeout=30)
        wait_requeued(job, 1)
        # `scontrol requeue` mid-judge: Slurm signals every step at once (the Ray nodes too)
        wait_for(lambda: lines(job.run / "reports.jsonl") == 2, 300, "the reports", job, poll=0.1)
        flushed = lines(job.run / "judgments.jsonl")
        r = subprocess.run(["scontrol", "requeue", job.id], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        wait_requeued(job, 2)
        assert lines(job.run / "judgments.jsonl") >= flushed
        assert job.wait_final(300) == "COMPLETED"
    finally:
        if job.state() not in FINAL:
            job.cancel()
    assert_clean_end_after_requeues(job)
    assert_same_records(job.run, baseline.run)


def assert_clean_end_after_requeues(job: Job) -> None:
    info = job.info()
    assert (info["JobState"], info["ExitCode"]) == ("COMPLETED", "0:0"), (info, job.log()[-3000:])
    assert (job.run / "scores.json").exists() and (job.run / "report.html").exists()
    last = job.log().rsplit("ray head:", 1)[1]  # the last instance's own lines
    assert not NOISE.search(last), last[-3000:]


def test_the_multinode_script_on_one_node(baseline, tmp_path):
    # The baseline's agent reports, judged again on the cluster this script starts.
    run = tmp_path / "run"
    run.mkdir()
    for name in ("reports.jsonl", "tasks.jsonl"):
        shutil.copy(baseline.run / name, run / name)
    shutil.copytree(baseline.run / "trajectories", run / "trajectories")
    job = Job(tmp_path, "slurm/lifesearch-multinode.sbatch", "--nodes=1", out=run)
    try:
        job.wait_final(300)
    finally:
        if job.state() not in FINAL:
            job.cancel()
    assert_clean_end(job)
    assert "1 node(s)" in job.log() and "1 Ray nodes alive" in job.log()
    assert_same_records(run, baseline.run)


def test_a_ray_head_that_fails_fails_the_job_in_seconds(tmp_path):
    # A mistyped node-local scratch directory (here a file): `ray start --head` cannot start.
    (tmp_path / "scratch").write_text("not a directory")
    job = Job(tmp_path, "slurm/lifesearch.sbatch", env=job_env(tmp_path, LIFESEARCH_RAY_TMP=str(tmp_path / "scratch")))
    try:
        wait_for(lambda: job.state() != "PENDING", 60, "the job to start", job)
        t0 = time.monotonic()
        state = job.wait_final(120)
        took = time.monotonic() - t0
    finally:
        if job.state() not in FINAL:
            job.cancel()
    assert state == "FAILED", job.log()
    log = job.log().splitlines()
    errors = [ln for ln in log if "error" in ln.lower()]
    head_log = tmp_path / f"ray-{job.id}-{job.info()['BatchHost']}.log"
    assert len(errors) == 1 and errors[0].startswith("error: the Ray head on "), job.log()
    assert "exited" in errors[0] and str(head_log) in errors[0], errors
    assert head_log.exists() and "Not a directory" in head_log.read_text()
    assert took < 100, f"the job took {took:.0f} s to fail"  # at once, not after the cluster wait (600 s)
    assert "Ray nodes alive" not in job.log() and len(log) == 2, job.log()  # the head's line, the error
