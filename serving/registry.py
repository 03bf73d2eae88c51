"""Backend registry: name -> "module:attr", imported on use."""

from __future__ import annotations

import importlib

from .config import ModelConfig
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
