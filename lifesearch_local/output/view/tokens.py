"""The judge's own tokenizer, when it is on this machine, to place a report's cut exactly.

The judge stage records each judge's settings in the manifest (`stage_configs["judge/<id>"]`), its
model among them; that model's tokenizer is loaded from local files only (a tiny model is built as
the judge built it; nothing is downloaded), once per judge, on the first cut decision shown. An
endpoint's model, a model not on this machine or a tokenizer without character offsets gives None:
the page then places the cut at an assumed rate and says so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Offsets = Callable[[str], list[tuple[int, int]]]
"""Report text → the character span of each of its tokens, as the judge tokenized it."""


def judge_model(manifest: dict[str, Any] | None, judge_id: str) -> dict[str, Any] | None:
    """The model block the manifest records for judge `judge_id` (None: none recorded)."""
    cfg = ((manifest or {}).get("stage_configs") or {}).get(f"judge/{judge_id}")
    model = cfg.get("model") if isinstance(cfg, dict) else None
    return model if isinstance(model, dict) and isinstance(model.get("model"), str) else None


def load_offsets(model: dict[str, Any]) -> Offsets | None:
    """A token-offsets function from the model's tokenizer on this machine, or None (logged why)."""
    if model.get("backend") == "openai":
        return None
    try:
        from transformers import AutoTokenizer

        from lifesearch_local.llm.models import resolved_path

        path = resolved_path(model["model"], int(model.get("seed") or 0))
        tok = AutoTokenizer.from_pretrained(path, revision=model.get("revision"), local_files_only=True,
                                            trust_remote_code=bool(model.get("trust_remote_code")))
    except Exception as e:  # noqa: BLE001 - without the tokenizer the page estimates, and says so
        log.info("view: no tokenizer for %s (%s: %s)", model.get("model"), type(e).__name__, str(e)[:200])
        return None
    if not getattr(tok, "is_fast", False):
        return None

    def offsets(text: str) -> list[tuple[int, int]]:
        # as the engines tokenize data: no special tokens added, none matched inside the text
        got = tok(text, add_special_tokens=False, split_special_tokens=True, return_offsets_mapping=True, verbose=False)
        return [tuple(o) for o in got["offset_mapping"]]

    return offsets


class Tokenizers:
    """Offsets functions by judge id, each loaded on first use."""

    def __init__(self, manifest: dict[str, Any] | None):
        self.manifest = manifest
        self._got: dict[str, tuple[Offsets | None, str | None]] = {}
        self._lock = threading.Lock()

    def get(self, judge_id: str) -> tuple[Offsets | None, str | None]:
        """(offsets function or None, the model's name or None)."""
        with self._lock:
            if judge_id not in self._got:
                model = judge_model(self.manifest, judge_id)
                self._got[judge_id] = (load_offsets(model) if model else None, model["model"] if model else None)
            return self._got[judge_id]
