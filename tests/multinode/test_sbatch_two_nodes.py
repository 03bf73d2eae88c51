"""The multi-node sbatch script on two Slurm nodes, each its own host (tests/multinode/conftest.py):
a whole CPU run with work on both; the worker node lost mid-judge; the driver preempted while the
worker holds work; a worker that joins late, or never."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.inputs import ROOT
from tests.helpers.multinode import HEAD, HEAD_IP, WORKER, WORKER_IP, env_script, judge_config
from tests.helpers.slurm import FINAL, Job, job_env, lines, wait_for

pytestmark = pytest.mark.slow
SCRIPT = "slurm/lifesearch-multinode.sbatch"
TWO = ("--nodes=2", "--cpus-per-task=1")  # whole nodes of one CPU each: the two 1-CPU replicas land one on each
NOISE = re.compile(r"srun: error|CANCELLED|Traceback|slurmstepd.*error")


def env(tmp: Path) -> dict[str, str]:
    """The job's environment. Ray's memory monitor off: it kills replicas when the whole machine is
    short of memory, and the test machine is shared with other work."""
    return job_env(tmp, RAY_memory_monitor_refresh_ms="0")


def slow_worker_ray(tmp: Path, seconds: int) -> dict[str, str]:
    """A job environment in which Ray on the worker host starts `seconds` late (a node slow to boot)."""
    bin_ = tmp / "late-bin"
    bin_.mkdir()
    real = Path(sys.executable).parent / "ray"
    (bin_ / "ray").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = start ] && [ "$(hostname)" = {WORKER} ]; then\n'
        f"  sleep {seconds} & s=$!\n"
        "  trap 'kill $s; exit 143' TERM\n"
        "  wait $s\n"
        "fi\n"
        f'exec "{real}" "$@"\n')
    (bin_ / "ray").chmod(0o755)
    base = env(tmp)
    return {**base, "PATH": f"{bin_}:{base['PATH']}"}


def finish(job: Job, timeout: float = 400) -> str:
    try:
        return job.wait_final(timeout)
    finally:
        if job.state() not in FINAL:
            job.cancel()


def stage_nodes(run: Path) -> dict[str, dict]:
    """Per stage of the manifest: {hostname: its node row}."""
    stages = json.loads((run / "manifest.json").read_text())["stages"]
    return {name: {n["hostname"]: n for n in st.get("nodes", [])} for name, st in stages.items()}


def judgment_keys(run: Path) -> list[str]:
    return [json.dumps([r["task_id"], r["agent"], r["run"], r["rubric_id"], r["judge"]])
            for r in map(json.loads, (run / "judgments.jsonl").read_text().splitlines())]


def expected_judgments(run: Path) -> int:
    from lifesearch_local.records import Report
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    tasks = {t.id: t for t in load_tasks(run / "tasks.jsonl")}
    return sum(sum(1 for r in tasks[rep.task_id].rubrics if r.weight > 0)
               for rep in read_records(run / "reports.jsonl", Report))


def assert_each_record_once(run: Path) -> None:
    keys = judgment_keys(run)
    assert len(keys) == len(set(keys)) == expected_judgments(run) > 0
    assert (run / "scores.json").exists() and (run / "report.html").exists()


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory) -> Job:
    """One whole run (agents, judge, ReportEval) of the shipped script on both nodes; the worker's
    Ray starts 10 s late, so the job waits for it (a node that joins late)."""
    tmp = tmp_path_factory.mktemp("whole")
    job = Job(tmp, SCRIPT, *TWO, env=slow_worker_ray(tmp, 10))
    finish(job)
    return job


def test_a_whole_run_on_two_nodes_with_work_on_both(whole_run):
    job = whole_run
    info = job.info()
    assert (info["JobState"], info["ExitCode"]) == ("COMPLETED", "0:0"), (info, job.log()[-3000:])
    assert "2 node(s)" in job.log() and "2 Ray nodes alive" in job.log()
    assert not NOISE.search(job.log()), job.log()[-3000:]
    nodes = stage_nodes(job.run)
    here = socket.gethostname()
    for stage in ("agent/tiny-qwen3-agent", "judge/tiny-llama-choice", "reporteval/tiny-llama-choice"):
        assert set(nodes[stage]) == {here, WORKER}, (stage, nodes[stage])
        assert {n["ip"] for n in nodes[stage].values()} == {HEAD_IP, WORKER_IP}
        assert all(n["records"] > 0 and n["failures"] == 0 for n in nodes[stage].values()), (stage, nodes[stage])
    judged = sum(n["records"] for n in nodes["judge/tiny-llama-choice"].values())
    assert judged == lines(job.run / "judgments.jsonl")  # each decision counted on the node that made it
    page = (job.run / "report.html").read_text()
    assert 'id="nodes"' in page and f">{WORKER}<" in page and f">{WORKER_IP}<" in page


def test_the_web_cache_after_agents_on_both_nodes_verifies(whole_run):
    # Fetches run in the driver (the agents' tools), on the head: the replicas on either node only
    # generate text. The cache the agents left is whole.
    cache = whole_run.run / "web_cache"
    assert cache.is_dir()
    r = subprocess.run([sys.executable, "-m", "lifesearch_local", "cache", "verify", str(cache)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def judging(job: Job) -> None:
    """Until the judge has flushed its first records (the job failing first fails the test at once)."""
    wait_for(lambda: lines(job.run / "judgments.jsonl") >= 20 or job.state() in FINAL, 300, "the judge's first records",
             job, poll=0.1)
    assert job.state() == "RUNNING", job.log()[-3000:]


def documented_writers() -> list[str]:
    """The files (and folders, ending in /) of docs/slurm.md's table of who writes what."""
    text = (ROOT / "docs" / "slurm.md").read_text().split("### Who writes which file", 1)[1].split("\n## ", 1)[0]
    return [name for row in text.splitlines() if row.startswith("| `") for name in re.findall(r"`([^`]+)`", row.split("|")[1])]


def test_every_file_of_the_run_has_its_writer_documented(whole_run):
    names = documented_writers()
    assert "web_cache/index.sqlite" in names and "trajectories/" in names
    files = [p.relative_to(whole_run.run).as_posix() for p in whole_run.run.rglob("*") if p.is_file()]
    undocumented = [f for f in files if f not in names and not any(n.endswith("/") and f.startswith(n) for n in names)]
    assert not undocumented, f"docs/slurm.md does not say who writes {undocumented}"


def test_the_worker_node_dies_mid_judge(tmp_path, worker_back):
    job = Job(tmp_path, SCRIPT, *TWO, config=str(judge_config(tmp_path)), env=env(tmp_path))
    try:
        judging(job)
        env_script("kill-worker")  # every process of the worker host (its slurmd, Ray, replica): kill -9
        # the node comes back once Slurm has seen it go (a reboot); the job finishes on the head
        # or is requeued by Slurm for the lost node, and its rerun finishes
        wait_for(lambda: job.state() in FINAL or job.restarts() > 0 or node_state(WORKER).startswith(("down", "idle*")),
                 120, "Slurm to see the node go", job)
        env_script("worker-up")
        state = finish(job)
    finally:
        if job.state() not in FINAL:
            job.cancel()
    if state != "COMPLETED":  # it stopped resumably: the same command again completes it
        rerun = Job(tmp_path, SCRIPT, *TWO, config=str(judge_config(tmp_path)), out=job.run, env=env(tmp_path))
        assert finish(rerun) == "COMPLETED", rerun.log()[-3000:]
    assert_each_record_once(job.run)
    lost = json.loads((job.run / "manifest.json").read_text())["stages"]["judge/tiny-llama-choice"]["replicas_lost"]
    assert any(x["hostname"] == WORKER and x["ip"] == WORKER_IP for x in lost), lost
    assert f"on node {WORKER} ({WORKER_IP}) out of the pool" in job.log(), job.log()[-3000:]


def node_state(node: str) -> str:
    r = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return r.stdout.strip()


def test_the_driver_preempted_while_the_worker_holds_work(tmp_path):
    job = Job(tmp_path, SCRIPT, *TWO, config=str(judge_config(tmp_path)), env=env(tmp_path))
    try:
        judging(job)
        job.term_batch()  # the head's batch shell: the driver stops, flushes, the job is requeued
        wait_for(lambda: job.restarts() >= 1, 240, "the requeue after SIGTERM", job)
        assert not (job.run / "scores.json").exists()
        # the stopped invocation recorded its stage: the worker had been serving the judge's calls
        first = stage_nodes(job.run)["judge/tiny-llama-choice"]
        assert first[WORKER]["records"] > 0 and first[WORKER]["failures"] == 0, first
        state = finish(job)
    finally:
        if job.state() not in FINAL:
            job.cancel()
    assert state == "COMPLETED", job.log()[-3000:]
    assert job.log().count("SIGTERM: stopping the run for requeue") == 1
    assert_each_record_once(job.run)
    nodes = stage_nodes(job.run)["judge/tiny-llama-choice"]
    assert set(nodes) == {socket.gethostname(), WORKER} and all(n["records"] > 0 for n in nodes.values())
    assert sum(n["records"] for n in nodes.values()) == lines(job.run / "judgments.jsonl")


def test_a_worker_that_never_joins_fails_the_job_naming_it(tmp_path):
    late = {**slow_worker_ray(tmp_path, 100000), "LIFESEARCH_RAY_JOIN_TIMEOUT": "15"}
    job = Job(tmp_path, SCRIPT, *TWO, env=late)
    assert finish(job, 240) == "FAILED", job.log()[-3000:]
    errors = [ln for ln in job.log().splitlines() if "error" in ln.lower()]
    log = tmp_path / f"ray-{job.id}-{WORKER}.log"
    assert errors == [f"error: the Ray worker on {WORKER} ({WORKER_IP}) did not join: 1 of 2 Ray nodes joined "
                      f"within 15 s; its log: {log}"], job.log()
    assert f"ray head: {HEAD}" in job.log() and "2 Ray nodes alive" not in job.log()
