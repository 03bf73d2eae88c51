"""The real vLLM engine (its CPU build) with the real smollm2-135m model: one engine for the folder.

These tests run in the second CI environment that `scripts/ci/vllm_cpu_env.sh` builds (vllm-cpu
next to this project). Elsewhere vLLM is not installed and the folder is skipped, unless
LIFESEARCH_REQUIRE_VLLM=1 (set by that script), which makes a missing engine or model an error.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from tests.helpers.services import gate
from tests.helpers.vllm_cpu import API_KEY_ENV, Server, start_server, stop_server, vllm_config


def _unavailable() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (scripts/ci/vllm_cpu_env.sh builds the environment with vllm-cpu)"
    from serving.models.real_models import SMOLLM2, real_model_problem

    return real_model_problem(SMOLLM2)


pytest_collection_modifyitems = gate(_unavailable(), "LIFESEARCH_REQUIRE_VLLM", os.path.dirname(__file__))


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
