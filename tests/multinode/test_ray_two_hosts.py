"""The standing two-node Ray cluster (head here, worker on the second host): a judge joined through
RAY_ADDRESS loses the worker node mid-run; agents on both nodes leave one writer per file (the driver)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lifesearch_local.agent.stage import agent_stage
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.tasks import load_tasks
from serving.config import RayConfig
from serving.protocol import Generation
from serving.ray.actor import this_node
from tests.helpers.agent import agent_config, call, turn, web_config
from tests.helpers.inputs import ROOT
from tests.helpers.multinode import ENV_SCRIPT, RAY_ADDRESS, WORKER, WORKER_IP, env_script, judge_config
from tests.helpers.web_server import LoopbackServer, Reply

pytestmark = pytest.mark.slow


def ray_env() -> dict[str, str]:
    """A shell joined to the standing cluster as a user would join it: RAY_ADDRESS and the token."""
    return {**os.environ, "RAY_ADDRESS": RAY_ADDRESS, "RAY_AUTH_MODE": "token", "OMP_NUM_THREADS": "1",
            "RAY_AUTH_TOKEN_PATH": os.environ.get("LIFESEARCH_MN_RAY_TOKEN", ""), "RAY_USAGE_STATS_ENABLED": "0"}


def judge(cfg: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lifesearch_local", "judge", "--config", str(cfg), "--out", str(out),
                             "--tasks", "data/sample/tasks.jsonl", "--reports", "data/sample/reports.jsonl"],
                            env=ray_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_judge_joined_through_ray_address_loses_the_worker_node(tmp_path, worker_back):
    cfg, out = judge_config(tmp_path), tmp_path / "run"
    proc = judge(cfg, out)
    f, deadline = out / "judgments.jsonl", time.monotonic() + 300
    while (not f.exists() or f.read_text().count("\n") < 20) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the judge ended before the node could be lost: " + proc.stderr.read()[-2000:]
    env_script("kill-worker")
    _, err = proc.communicate(timeout=300)
    if proc.returncode != 0 or "stopped" in err:  # stopped resumably: the same command finishes it
        again = judge(cfg, out)
        _, err2 = again.communicate(timeout=300)
        assert again.returncode == 0, err2[-3000:]
    assert proc.returncode == 0, err[-3000:]
    rows = [json.loads(x) for x in f.read_text().splitlines()]
    keys = {(r["task_id"], r["agent"], r["run"], r["rubric_id"]) for r in rows}
    assert len(rows) == len(keys) == 342  # every record of the sample reports, exactly once
    stage = json.loads((out / "manifest.json").read_text())["stages"]["judge/tiny-llama-choice"]
    nodes = {n["hostname"]: n for n in stage["nodes"]}
    assert set(nodes) == {socket.gethostname(), WORKER} and nodes[WORKER]["ip"] == WORKER_IP
    assert nodes[WORKER]["failures"] == 1 and nodes[socket.gethostname()]["failures"] == 0
    assert sum(n["records"] for n in nodes.values()) == 342
    assert [(x["hostname"], x["ip"]) for x in stage["replicas_lost"]] == [(WORKER, WORKER_IP)]
    assert f"on node {WORKER} ({WORKER_IP}) out of the pool" in err


# -- agents on both nodes, one writer ----------------------------------------------------------------


class FetchingHost:
    """A replica whose model reads one page per task (`pages`: question -> URL), then answers.
    Pickled by value (the worker host cannot import the tests)."""

    pages: dict[str, str] = {}

    def __init__(self, cfg, threads=None):
        self.served = 0

    def ready(self):
        return {"model_hash": "fetching", **this_node()}

    def generate(self, requests):
        self.served += len(requests)
        return [Generation(text=call("web_fetch", url=self.pages[r.messages[1]["content"]]) if turn(r) == 0
                           else "Final answer: the page says what it says.") for r in requests]

    def stats(self):
        return {"requests_served": self.served}


def test_agents_on_both_nodes_leave_the_web_cache_to_the_driver(worker_back):
    import ray

    # tasks without an as-of cutoff: their pages are fetched live (a cutoff asks the archive instead)
    tasks = [t for t in load_tasks(ROOT / "data/sample/tasks.jsonl") if t.as_of is None][:4]
    # the run directory on this host's own /tmp, which the worker host does not share: a worker that
    # wrote any file of the run (the cache's index, a page) would fail or leave it on its own /tmp
    run = Path(tempfile.mkdtemp(prefix="lsmn-agents-", dir="/tmp"))
    try:
        with LoopbackServer({f"/page/{i}": Reply(body=f"<html><body><h1>Page {i}</h1><p>{'Fact. ' * 40}</p>"
                                                  f"</body></html>".encode()) for i in range(len(tasks))}) as server:
            FetchingHost.pages = {t.question: server.url(f"/page/{i}") for i, t in enumerate(tasks)}
            os.environ.update({k: v for k, v in ray_env().items() if k.startswith("RAY_AUTH")})
            from ray._raylet import Config

            Config.initialize("")  # this process read Ray's settings at import, before the token was named
            ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

            def pool(model, ray_cfg):
                from serving.ray.pool import RayPool

                return RayPool(model, ray_cfg, phase="agent-fetching", host=FetchingHost)

            web = web_config(cache_dir=run / "web_cache").model_copy(update={"mode": "record"})
            stats = agent_stage(RunDir(run), tasks, agent_config(id="fetching", max_iterations=3, concurrency=4),
                                None, web, show=False, open_model=pool,
                                ray=RayConfig(address=RAY_ADDRESS, replicas=2, num_cpus_per_replica=1,
                                              startup_timeout_s=120, call_timeout_s=120))
            assert sorted(server.hits.values()) == [1] * len(tasks)  # each page fetched once, live
        reports = [json.loads(x) for x in (run / "reports.jsonl").read_text().splitlines()]
        assert len(reports) == len(tasks) and all(r["status"] == "completed" for r in reports), stats
        nodes = {n["hostname"]: n for n in json.loads((run / "manifest.json").read_text())["stages"]["agent/fetching"]["nodes"]}
        assert set(nodes) == {socket.gethostname(), WORKER} and all(n["records"] > 0 for n in nodes.values()), nodes
        r = subprocess.run([sys.executable, "-m", "lifesearch_local", "cache", "verify", "--json", str(run / "web_cache")],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["pages"] == len(tasks)
        on_worker = subprocess.run([ENV_SCRIPT, "on-worker", "test", "-e", str(run)], capture_output=True, timeout=60)
        assert on_worker.returncode == 1, "the run directory's path exists on the worker host"
    finally:
        subprocess.run(["rm", "-rf", str(run)], timeout=60)
