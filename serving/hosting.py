"""Where a phase's model runs: an engine in this process, or a pool of Ray actors hosting engines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .config import ModelConfig, RayConfig
from .engines import open_engine
from .protocol import Engine


@contextmanager
def host_engine(cfg: ModelConfig, ray: RayConfig | None = None, *, phase: str = "serve") -> Iterator[Engine]:
    """The model for one phase: in-process without `ray`, else a pool of Ray actors killed on exit.

    An endpoint (`openai`) is already remote, so it never goes through Ray.
    """
    if ray is None or cfg.backend == "openai":
        engine = open_engine(cfg)
        try:
            yield engine
        finally:
            engine.close()
            del engine
            release_memory()
        return
    from .ray.pool import RayPool

    with RayPool(cfg, ray, phase=phase) as pool:
        yield pool


def release_memory() -> None:
    """Free a closed in-process model's memory so the next phase (e.g. the judge after the agent)
    can load its own model on the same GPU."""
    import gc
    import sys

    gc.collect()
    torch = sys.modules.get("torch")  # only if this process ever imported it
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
