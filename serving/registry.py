"""Backend registry: name -> "module:attr", imported on use; `open_backend` adds the Ray pool."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager

from .config import ModelConfig, RayConfig
from .protocol import ModelBackend

BACKENDS: dict[str, str] = {
    "hf": "serving.hf:HFBackend",
    "vllm": "serving.vllm_backend:VLLMBackend",
    "openai": "serving.openai_backend:OpenAIBackend",
}


def load_backend(cfg: ModelConfig) -> ModelBackend:
    """Instantiate the engine named by `cfg.backend`."""
    module, attr = BACKENDS[cfg.backend].split(":")
    return getattr(importlib.import_module(module), attr).from_config(cfg)


@contextmanager
def open_backend(cfg: ModelConfig, ray: RayConfig | None = None, *, phase: str = "serve") -> Iterator[ModelBackend]:
    """The model for one phase: in-process without `ray`, else a pool of Ray actors killed on exit.

    An endpoint (`openai`) is already remote, so it never goes through Ray.
    """
    if ray is None or cfg.backend == "openai":
        backend = load_backend(cfg)
        try:
            yield backend
        finally:
            close = getattr(backend, "close", None)
            if close is not None:
                close()
            del backend
            _release_memory()
        return
    from .pool import RayPool

    with RayPool(cfg, ray, phase=phase) as pool:
        yield pool


def _release_memory() -> None:
    """Free an in-process model's memory so the next phase (e.g. the judge after the agent)
    can load its own model on the same GPU."""
    import gc
    import sys

    gc.collect()
    torch = sys.modules.get("torch")  # only if this process ever imported it
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
