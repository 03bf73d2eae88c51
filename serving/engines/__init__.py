"""The engines, one factory each (its import inside, so only the chosen engine's libraries load)."""

from __future__ import annotations

from collections.abc import Callable

from ..config import ModelConfig
from ..protocol import Engine


def _hf(cfg: ModelConfig) -> Engine:
    from .hf import HFEngine

    return HFEngine(cfg)


def _vllm(cfg: ModelConfig) -> Engine:
    from .vllm import VLLMEngine

    return VLLMEngine(cfg)


def _openai(cfg: ModelConfig) -> Engine:
    from .openai import OpenAIEngine

    return OpenAIEngine(cfg)


ENGINES: dict[str, Callable[[ModelConfig], Engine]] = {"hf": _hf, "vllm": _vllm, "openai": _openai}


def open_engine(cfg: ModelConfig) -> Engine:
    """The engine named by `cfg.backend`, in this process, its model loaded."""
    return ENGINES[cfg.backend](cfg)
