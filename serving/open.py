"""Open the engine a phase needs: in-process, or a Ray pool of replicas; released when the phase ends."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

from .config import ModelConfig
from .protocol import ModelBackend
from .registry import load_backend


@contextlib.contextmanager
def open_backend(cfg: ModelConfig, ray: Any | None = None) -> Iterator[ModelBackend]:
    """Yield a ModelBackend for one phase. With a Ray config, replicas are Ray actors
    (serving.pool.RayPool) that are killed on exit, so one GPU can host the agent phase
    and then the judge phase; without one, the model is loaded in this process."""
    if ray is not None:
        from .pool import RayPool

        with RayPool(cfg, ray) as pool:
            yield pool
        return
    backend = load_backend(cfg)
    try:
        yield backend
    finally:
        del backend
        gc.collect()
        _empty_cuda_cache()


def _empty_cuda_cache() -> None:
    import sys

    torch = sys.modules.get("torch")  # only if this process ever imported it
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
