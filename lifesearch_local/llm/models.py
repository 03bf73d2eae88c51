"""Model names the library resolves before an engine sees them: tiny-* random models trained on bundled text."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from lifesearch_local.resources import resource_path
from serving import ModelConfig

# The files a tiny model learns from, named: a new prompt or sample file must not silently change
# every tiny model (and every figure and test made with one).
TINY_PROMPTS = ("agent_system", "curate_domain_en", "curate_domain_zh", "curate_filter", "curate_rewrite", "judge_en",
                "judge_zh", "reporteval_factuality", "reporteval_quality", "reporteval_quality_all",
                "reporteval_quality_one", "reporteval_redundancy")
TINY_SAMPLES = ("labels", "queries", "reports", "tasks")


@functools.lru_cache(maxsize=1)
def tiny_training_texts() -> tuple[str, ...]:
    """The bundled English and Chinese text a tiny model's tokenizer learns from, in a fixed order:
    the prompts, the sample tasks and reports, the sample web corpus, and the judge's JSON answer."""
    root = resource_path("prompts").parent
    texts = [(root / "prompts" / f"{name}.txt").read_text(encoding="utf-8") for name in TINY_PROMPTS]
    for p in (root / "data" / "sample" / f"{name}.jsonl" for name in TINY_SAMPLES):
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.extend(_strings(json.loads(line)))
    for p in sorted((root / "data" / "web").rglob("*.html")):
        raw = p.read_bytes()
        enc = "gb18030" if b"charset=gbk" in raw[:2000].lower() else "utf-8"
        texts.append(re.sub(r"<[^>]+>", " ", raw.decode(enc, errors="replace")))
    texts.append('{"satisfied": true, "reason": "ok"} {"satisfied": false, "reason": "no"}')
    return tuple(texts)


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def tiny_model_dir(name: str, seed: int = 0) -> Path:
    """The directory of the tiny random model `name` (built on first use, then cached)."""
    from serving import build_tiny

    return build_tiny(name, tiny_training_texts(), seed=seed)


def engine_config(cfg: ModelConfig) -> ModelConfig:
    """`cfg` as an engine takes it: a tiny-* name becomes its built directory (on a multi-node
    Ray cluster, LIFESEARCH_CACHE must then be a shared directory)."""
    from serving import TINY_MODELS

    if cfg.model not in TINY_MODELS:
        return cfg
    return cfg.model_copy(update={"model": str(tiny_model_dir(cfg.model, cfg.seed))})


def resolved_path(name: str, seed: int = 0) -> str:
    """The directory (or hub id) a model name loads from: tiny-* built here, smollm2-135m converted."""
    from serving import TINY_MODELS, resolve_model_path

    return resolve_model_path(str(tiny_model_dir(name, seed)) if name in TINY_MODELS else name)


def is_tiny(name: str) -> bool:
    """Whether `name` is a built-in tiny random-weight model (tiny-llama, …)."""
    from serving import TINY_MODELS

    return name in TINY_MODELS


def random_weights(cfg: ModelConfig) -> bool:
    """Whether the model serves random weights: a built-in tiny model, or vLLM's `dummy` load format."""
    from serving import VLLMConfig

    return is_tiny(cfg.model) or (isinstance(cfg, VLLMConfig) and cfg.load_format == "dummy")
