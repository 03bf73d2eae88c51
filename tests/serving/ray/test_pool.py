"""The Ray pool on a real local cluster: whole groups per replica, in-process results, deaths, hangs, cleanup.

Ray starts once for the module (4 logical CPUs; the machine may have 2 busy cores). The
replicas host the tiny random-weight model on CPU, so results can be compared with the in-process
hf backend, within what fp32 sums at another thread count allow (tests/helpers/tolerances.py).
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.inputs import ROOT, rubric, task, write_jsonl
from tests.helpers.tolerances import P_TOL

ray = pytest.importorskip("ray")
pytest.importorskip("torch")

from lifesearch_local.cli import main  # noqa: E402
from lifesearch_local.judge.config import JudgeConfig  # noqa: E402
from lifesearch_local.judge.rubric import CHOICES, PREFILL  # noqa: E402
from lifesearch_local.judge.stage import judge_stage  # noqa: E402
from lifesearch_local.llm.models import engine_config  # noqa: E402
from lifesearch_local.records import Judgment, Report  # noqa: E402
from lifesearch_local.rundir.directory import RunDir  # noqa: E402
from lifesearch_local.rundir.jsonl import read_records  # noqa: E402
from lifesearch_local.tasks import load_tasks  # noqa: E402
from serving.config import RayConfig, model_config  # noqa: E402
from serving.engines.hf import HFEngine  # noqa: E402
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest, Engine  # noqa: E402
from serving.ray.actor import EngineHost  # noqa: E402
from serving.ray.pool import PoolError, RayPool, assign, group_cost  # noqa: E402
from serving.ray.session import connect, replica_resources  # noqa: E402

MODEL = engine_config(model_config(model="tiny-llama", device="cpu"))
N_TASKS, N_RUBRICS = 4, 3


@pytest.fixture(scope="module")
def cluster():
    """A local cluster started as the CLI starts one; reports whether our SIGTERM handler survived."""
    def ours(*_):
        pass

    before = signal.signal(signal.SIGTERM, ours)
    started = connect(RayConfig(num_cpus=4, namespace="lifesearch-test", object_store_memory_mb=200))
    kept = signal.getsignal(signal.SIGTERM) is ours
    signal.signal(signal.SIGTERM, before)
    # The fake hosts below live in this test module, which Ray workers cannot import.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield {"started": started, "kept_sigterm": kept}
    ray.shutdown()


@pytest.fixture(scope="module")
def local() -> HFEngine:
    return HFEngine(MODEL)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("pool-inputs")
    tasks = [task(f"t{i}", [rubric(f"R{k}", 0.5, criterion=f"The response should state fact {k} about topic {i}.")
                            for k in range(N_RUBRICS)]) for i in range(N_TASKS)]
    reports = [{"task_id": f"t{i}", "agent": a, "run": 0, "text": f"Report {a} on topic {i}. " + "Findings. " * (5 + 9 * i)}
               for i in range(N_TASKS) for a in ("a", "b")]
    return write_jsonl(d / "tasks.jsonl", tasks), write_jsonl(d / "reports.jsonl", reports)


@pytest.fixture(scope="module")
def reference(inputs, local, tmp_path_factory) -> dict:
    """In-process judgments of `inputs`: key -> p_true."""
    t, r = inputs
    rd = RunDir(tmp_path_factory.mktemp("ref"))
    judge_stage(rd, load_tasks(t), read_records(r, Report), JudgeConfig(id="tiny", model=MODEL), local, show=False)
    return {j.key: j.p_true for j in read_records(rd.file("judgments.jsonl"), Judgment)}


def groups(n: int = 6) -> list[ChoiceGroup]:
    return [ChoiceGroup(key=f"report-{g}", requests=[
        ChoiceRequest(messages=[{"role": "user", "content": f"Report {g}: " + "text " * (10 + 30 * g) + f"Rubric {k}?"}],
                      prefill=PREFILL) for k in range(2 + g % 3)]) for g in range(n)]


def gone(names: list[str], timeout_s: float = 30.0) -> bool:
    """True once no actor of these names is registered (bounded wait: kills are asynchronous)."""
    deadline = time.monotonic() + timeout_s
    left = list(names)
    while left and time.monotonic() < deadline:
        left = [n for n in left if _exists(n)]
        time.sleep(0.1 if left else 0)
    return not left


def _exists(name: str) -> bool:
    try:
        ray.get_actor(name, namespace="lifesearch")
        return True
    except ValueError:
        return False


# -- routing, without Ray -----------------------------------------------------------


def test_assign_balances_whole_items_longest_first():
    costs = [10, 1, 7, 3, 3, 6]
    shares = assign(costs, [0, 0])
    assert shares == [[0, 3, 4], [1, 2, 5]]  # 10, 7, 6, 3, 3, 1 each to the least loaded: 16 vs 14
    assert sorted(i for s in shares for i in s) == list(range(6))  # each item once, never split
    three = assign([1] * 7, [0, 0, 0])
    assert sorted(map(len, three)) == [2, 2, 3]
    assert assign([5, 5], [100, 0]) == [[], [0, 1]]  # work already in flight counts


def test_group_cost_counts_the_shared_prefix_once():
    long_prefix = "report " * 1000
    g = ChoiceGroup(key="k", requests=[ChoiceRequest(messages=[{"role": "user", "content": long_prefix + f"rubric {i}"}])
                                       for i in range(20)])
    one = ChoiceGroup(key="k", requests=g.requests[:1])
    assert group_cost(one) < group_cost(g) < 2 * group_cost(one)


def test_replica_resources_follow_the_engine():
    ray_cfg = RayConfig()
    assert replica_resources(model_config(backend="vllm", tensor_parallel_size=4), ray_cfg, 8)["num_gpus"] == 4
    assert replica_resources(model_config(device="cpu"), ray_cfg, 8)["num_gpus"] == 0
    assert replica_resources(model_config(device="auto"), ray_cfg, 0)["num_gpus"] == 0
    assert replica_resources(model_config(device="auto"), ray_cfg, 2)["num_gpus"] == 1
    pinned = RayConfig(num_gpus_per_replica=0.5, num_cpus_per_replica=3)
    assert replica_resources(model_config(backend="vllm"), pinned, 8) == {"num_cpus": 3, "num_gpus": 0.5}


# -- real replicas ------------------------------------------------------------------


def test_starting_ray_keeps_the_graceful_sigterm_handler(cluster):
    # Ray's driver replaces SIGTERM with a handler that exits at once; Slurm preemption must
    # still finish the batch and flush (see tests/run/test_standalone.py for the in-process path).
    if not cluster["started"]:
        pytest.skip("Ray was already running in this process")
    assert cluster["kept_sigterm"]



class DelayedHost(EngineHost):
    """The real engine host, slowed so that a kill lands while a call is in flight."""

    def score_choices(self, groups, choices):
        time.sleep(0.4)
        return super().score_choices(groups, choices)


class KillDuringSecondCall(Engine):
    """Wraps a pool; kills replica 0 while the judge's second batch is in flight on it."""

    def __init__(self, pool: RayPool):
        self.pool, self.calls, self.retried_in_call = pool, 0, {}

    def score_choices(self, groups, choices):
        self.calls += 1
        if self.calls == 2:
            threading.Timer(0.15, ray.kill, args=(self.pool.replicas[0].handle,)).start()
        before = self.pool.stats()["retried_items"]
        out = self.pool.score_choices(groups, choices)
        self.retried_in_call[self.calls] = self.pool.stats()["retried_items"] - before
        return out


def test_one_phase_on_two_replicas(cluster, local, inputs, reference, tmp_path):
    """Whole reports per replica, in-process results, a replica killed mid-run, a clear error
    when none is left, and no actor left after the phase. One pool: replicas take seconds to start."""
    gs = groups()
    want = local.score_choices(gs, CHOICES)
    reqs = [ChatRequest(messages=[{"role": "user", "content": f"Say {w}."}], max_tokens=6) for w in ("a", "b", "c")]
    want_text = [g.text for g in local.generate(reqs)]
    t, r = inputs
    with RayPool(MODEL, RayConfig(replicas=2, call_timeout_s=120), phase="test", host=DelayedHost) as pool:
        names = [rep.name for rep in pool.replicas]
        assert all(_exists(n) for n in names)
        assert pool.identity() == local.identity()  # the replicas' engine speaks for the pool (the judge's fingerprint)
        # routing: each report's rubrics go whole to one replica, both replicas get work
        got = pool.score_choices(gs, CHOICES)
        keys = [[k for call in rep for k in call] for rep in pool.served_keys()]
        assert all(keys) and sorted(k for rep in keys for k in rep) == sorted(g.key for g in gs)
        for ga, gb in zip(want, got):
            assert [abs(a.probs[0] - b.probs[0]) <= P_TOL for a, b in zip(ga, gb)] == [True] * len(ga)
        assert [g.text for g in pool.generate(reqs)] == want_text
        # a replica killed while the judge's second batch is on it: re-sent at once, the run completes
        killer = KillDuringSecondCall(pool)
        judge_stage(RunDir(tmp_path), load_tasks(t), read_records(r, Report),
                    JudgeConfig(id="tiny", model=MODEL, groups_per_call=2), killer, show=False)
        assert pool.stats()["replica_failures"] == 1 and killer.retried_in_call == {1: 0, 2: 1, 3: 0, 4: 0}
        # where the work ran: this one node, both replicas, each record returned counted once (the
        # killed replica's lost batch on the survivor only), the lost replica named with its node
        here = {"hostname": socket.gethostname(), "ip": ray.util.get_node_ip_address()}
        st = pool.stats()
        served = sum(len(g.requests) for g in gs) + len(reqs) + 2 * N_TASKS * N_RUBRICS
        assert st["nodes"] == [{**here, "replicas": 2, "records": served, "failures": 1}]
        assert [(x["replica"], x["hostname"], x["ip"]) for x in st["replicas_lost"]] == [(names[0], *here.values())]
        # the last replica dies too: a clear error, quickly
        ray.kill(pool.replicas[1].handle)
        t1 = time.monotonic()
        with pytest.raises(PoolError, match="no live replica left"):
            for _ in range(50):  # until the pool meets the second death (kills are asynchronous)
                pool.score_choices(groups(2), CHOICES)
        assert time.monotonic() - t1 < 100  # at once, not after call_timeout_s (1,800 s)
    js = read_records(tmp_path / "judgments.jsonl", Judgment)
    assert len(js) == len({j.key for j in js}) == len(reference) == 2 * N_TASKS * N_RUBRICS
    assert max(abs(reference[j.key] - j.p_true) for j in js) <= P_TOL
    assert gone(names)


class SlowHost:
    """A replica whose engine hangs."""

    def __init__(self, cfg, threads=None):
        pass

    def ready(self):
        return {"model_hash": "slow"}

    def score_choices(self, groups, choices):
        time.sleep(60)

    def stats(self):
        return {}


class BrokenHost(SlowHost):
    """A replica whose model fails to load."""

    def __init__(self, cfg, threads=None):
        raise RuntimeError("weights file is truncated")


def test_a_hung_replica_is_killed_and_the_call_fails_clearly_in_bounded_time(cluster):
    ray_cfg = RayConfig(replicas=2, num_cpus_per_replica=0.5, call_timeout_s=1.0, max_task_retries=1)
    with RayPool(MODEL, ray_cfg, phase="test", host=SlowHost) as pool:
        t0 = time.monotonic()
        with pytest.raises(PoolError, match=r"took over 1 s"):
            pool.score_choices(groups(3), CHOICES)
        assert time.monotonic() - t0 < 50  # after call_timeout_s 1 s, not the hung call's 60 s
        assert pool.stats()["replica_failures"] == 2 and not any(r.alive for r in pool.replicas)
        assert gone([r.name for r in pool.replicas])


def test_replicas_that_cannot_load_fail_the_start_with_the_cause(cluster):
    with pytest.raises(PoolError, match=r"no replica of \S*tiny-llama\S* started.*weights file is truncated"):
        RayPool(MODEL, RayConfig(replicas=2, num_cpus_per_replica=0.5), phase="test", host=BrokenHost).start()


def test_replicas_that_cannot_fit_in_a_local_cluster_fail_at_once(cluster):
    t0 = time.monotonic()
    with pytest.raises(PoolError, match=r"8 replicas of \S*tiny-llama\S* do not fit: 8 x 1 CPU > 4"):
        RayPool(MODEL, RayConfig(replicas=8, num_cpus_per_replica=1, startup_timeout_s=600), phase="test").start()
    assert time.monotonic() - t0 < 100  # at once, not after startup_timeout_s (600 s)


def test_cli_judge_with_the_cpu_small_config_runs_on_ray_and_matches_in_process(cluster, inputs, reference, tmp_path, capsys):
    t, r = inputs
    out = tmp_path / "ray"
    assert main(["judge", "--config", str(ROOT / "configs" / "cpu_small.yaml"), "--tasks", str(t), "--reports", str(r),
                 "--out", str(out), "--quiet", "--id", "tiny"]) == 0
    assert "2 Ray replicas" in capsys.readouterr().out
    js = read_records(out / "judgments.jsonl", Judgment)
    assert {j.key for j in js} == set(reference)
    assert max(abs(reference[j.key] - j.p_true) for j in js) <= P_TOL
    stage = json.loads((out / "manifest.json").read_text())["stages"]["judge/tiny"]
    assert stage["ray_replicas"] == 2 and stage["decisions"] == len(reference) and stage["groups_served"] == 2 * N_TASKS
    fp = json.loads((out / "manifest.json").read_text())["fingerprints"]["tiny"]
    assert (fp["engine"], fp["dtype"]) == ("hf", "float32") and fp["weights_hash"]  # told by the replicas
    assert ray.is_initialized()  # the CLI reused this cluster and left it up


class FakeRay:
    """What `_create_actors` asks of ray: the cluster's resources, and actors created with options."""

    def __init__(self):
        self.options = []

    def cluster_resources(self):
        return {"CPU": 4.0, "GPU": 0.0}

    def remote(self, cls):
        fake = self

        class Actor:
            @staticmethod
            def options(**kw):
                fake.options.append(kw)
                return SimpleNamespace(remote=lambda *a: SimpleNamespace(args=a))

        return Actor


@pytest.mark.parametrize(("given", "driver", "address", "expected"), [
    ({}, {}, None, None),  # an idle machine: the default wait
    ({}, {"OMP_WAIT_POLICY": "PASSIVE", "LIFESEARCH_OMP_WAIT": "PASSIVE"}, None, "PASSIVE"),  # the driver chose
    ({}, {}, "10.0.0.1:6379", "PASSIVE"),  # a remote cluster's nodes are shared by design
    ({"OMP_WAIT_POLICY": "ACTIVE"}, {}, "10.0.0.1:6379", "ACTIVE"),  # the config's own env_vars win
])
def test_cpu_actors_get_the_wait_policy_in_their_runtime_env(monkeypatch, given, driver, address, expected):
    for k in ("OMP_WAIT_POLICY", "LIFESEARCH_OMP_WAIT"):
        monkeypatch.delenv(k, raising=False)
    for k, v in driver.items():
        monkeypatch.setenv(k, v)
    cfg = RayConfig(replicas=2, num_cpus_per_replica=2, env_vars=given, address=address)
    pool = RayPool(MODEL, cfg, phase="test")
    fake = FakeRay()
    pool._create_actors(fake)
    envs = [(o.get("runtime_env") or {}).get("env_vars", {}).get("OMP_WAIT_POLICY") for o in fake.options]
    assert envs == [expected, expected] and [r.handle.args[1] for r in pool.replicas] == [2, 2]
