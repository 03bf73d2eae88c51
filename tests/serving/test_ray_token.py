"""A local Ray cluster starts with token authentication set up explicitly: no warning from Ray about it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("ray")

SCRIPT = """
import ray
from serving.config import RayConfig
from serving.ray.session import connect
connect(RayConfig(num_cpus=1, object_store_memory_mb=100))
assert ray.get(ray.put(7)) == 7
ray.shutdown()
print("ok")
"""


def test_local_cluster_uses_a_token_without_rays_warning(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    env["HOME"] = str(tmp_path)  # Ray keeps its token in ~/.ray/auth_token
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr
    assert "Token authentication" not in r.stderr and "token-auth" not in r.stderr, r.stderr
    assert (tmp_path / ".ray" / "auth_token").read_text().strip()  # the token Ray created and uses


def test_a_users_own_auth_mode_is_respected(monkeypatch):
    from serving.ray.session import token_auth_for_local_cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    token_auth_for_local_cluster()
    assert os.environ["RAY_AUTH_MODE"] == "disabled"
