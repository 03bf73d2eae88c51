"""A real Slurm (Debian's slurm-wlm + munge, one node here) running the shipped sbatch scripts.

`scripts/ci/slurm_env.sh test` starts the daemons and runs this folder with SLURM_CONF set and
LIFESEARCH_REQUIRE_SLURM=1, which turns "no Slurm here" into an error. Elsewhere (no `sbatch`, or
no controller answering) the folder is skipped. Jobs run the shipped scripts unchanged, with
`--gpus-per-node=0 --cpus-per-task=2` and the job log in the test's temporary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.helpers.services import gate
from tests.helpers.slurm import FINAL, Job


def _unavailable() -> str | None:
    if not shutil.which("sbatch"):
        return "Slurm is not installed (scripts/ci/slurm_env.sh installs and starts a one-node Slurm)"
    try:
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 20 s"
    if r.returncode != 0:
        return f"no Slurm controller answers (SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')}): {r.stderr.strip()[:200]}"
    if "idle" not in r.stdout and "mix" not in r.stdout:
        return f"no idle Slurm node: {r.stdout.strip()[:200]}"
    return None


pytest_collection_modifyitems = gate(_unavailable(), "LIFESEARCH_REQUIRE_SLURM", os.path.dirname(__file__))


@pytest.fixture(scope="session")
def baseline(tmp_path_factory) -> Job:
    """One uninterrupted run of the shipped script, shared by every comparison."""
    tmp = tmp_path_factory.mktemp("baseline")
    job = Job(tmp, "slurm/lifesearch.sbatch")
    try:
        job.wait_final(300)
    finally:
        if job.state() not in FINAL:
            job.cancel()
    return job
