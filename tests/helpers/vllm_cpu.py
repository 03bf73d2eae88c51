"""vLLM's CPU build in tests: the engine settings, real judge prompts, and vLLM's OpenAI server."""

from __future__ import annotations

import os

from lifesearch_local.judge.rubric import Pending, choice_group, judged_rubrics
from lifesearch_local.records import Report
from lifesearch_local.resources import resource_path
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from serving.protocol import ChoiceGroup

KV_CACHE_GIB = 1.0


def vllm_config(**kw):
    """smollm2-135m on vLLM's CPU build: fp32 (as the hf backend on CPU), no torch.compile (minutes on
    two cores), a KV cache of a fixed size (the default would reserve 90% of the machine's RAM)."""
    from serving.config import model_config

    base = dict(backend="vllm", model="smollm2-135m", dtype="float32", enforce_eager=True,
                kv_cache_gib=KV_CACHE_GIB, max_model_len=8192)
    return model_config(**{**base, **kw})


# -- vLLM's OpenAI-compatible server (tests/vllm_cpu/conftest.py starts one for the folder) -------------------------------

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

    from serving.models.real_models import smollm2_dir

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


QUESTION = "What is the capital of France? Answer in one word."


def judge_groups(reports: int = 2, rubrics: int = 3, chars: int = 2500) -> list[ChoiceGroup]:
    """Real judge prompts for the first sample reports (cut to `chars` to keep CI short)."""
    tasks = {t.id: t for t in load_tasks(resource_path("data", "sample", "tasks.jsonl"))}
    out = []
    for rep in read_records(resource_path("data", "sample", "reports.jsonl"), Report)[:reports]:
        task = tasks[rep.task_id]
        short = rep.model_copy(update={"text": rep.text[:chars]})
        out.append(choice_group(Pending(task, short, judged_rubrics(task)[:rubrics]))[0])
    return out


def p_true(groups) -> list[float]:
    return [r.probs[0] for g in groups for r in g]
