"""Two hosts on one machine (scripts/ci/multinode_env.sh): a head here and a worker in its own network,
UTS and mount namespaces, with a two-node Slurm and a standing two-node Ray cluster on them.

`scripts/ci/multinode_env.sh test` starts them and runs this folder with SLURM_CONF and the
LIFESEARCH_MN_* variables set and LIFESEARCH_REQUIRE_MULTINODE=1, which turns "no second host
here" into an error. Elsewhere the folder is skipped.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from tests.helpers.multinode import ENV_SCRIPT, HEAD, RAY_ADDRESS, WORKER, env_script
from tests.helpers.services import gate


def _unavailable() -> str | None:
    if not ENV_SCRIPT or not RAY_ADDRESS:
        return "no second host (scripts/ci/multinode_env.sh start sets LIFESEARCH_MN_ENV and LIFESEARCH_MN_RAY_ADDRESS)"
    if not shutil.which("sbatch"):
        return "Slurm is not installed (scripts/ci/multinode_env.sh installs it)"
    try:
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 20 s"
    nodes = dict(line.split() for line in r.stdout.splitlines() if line.strip())
    if r.returncode != 0 or set(nodes) != {HEAD, WORKER}:
        return f"no two-node Slurm (SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')}): {(r.stdout + r.stderr).strip()[:200]}"
    host, _, port = RAY_ADDRESS.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        return f"no Ray head at {RAY_ADDRESS}: {e}"
    return None


pytest_collection_modifyitems = gate(_unavailable(), "LIFESEARCH_REQUIRE_MULTINODE", os.path.dirname(__file__))


@pytest.fixture
def worker_back():
    """Whatever a test does to the second host, it is up again (slurmd idle, Ray worker joined) after."""
    yield
    env_script("worker-up")
