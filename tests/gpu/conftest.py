"""GPU tests: skipped as a folder where CUDA is not available (CI, laptops)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _needs_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
