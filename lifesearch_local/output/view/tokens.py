"""The judge's own tokenizer, when it is on this machine: to place a report's cut, and to re-run the fitting.

The judge stage records each judge's settings in the manifest (`stage_configs["judge/<id>"]`), its
model among them; that model's tokenizer and config are loaded from local files only (a tiny model is
built as the judge built it; nothing is downloaded), once per judge, on the first decision that needs
them. An endpoint's model or a model not on this machine gives none: the page then places the cut at an
assumed rate and says so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Offsets = Callable[[str], list[tuple[int, int]]]
"""Report text → the character span of each of its tokens, as the judge tokenized it."""


@dataclass
class JudgeTokenizer:
    """A judge model's tokenizer and context limit, as its engine loads them."""

    model: str
    """The model's name in the judge's settings."""
    tokenizer: Any = None
    """The tokenizer (None: not on this machine)."""
    limit: int | None = None
    """Positions the judge could take: the model's, lowered by its `max_model_len`."""

    def offsets(self, text: str) -> list[tuple[int, int]] | None:
        """The character span of each token of `text` as data (no special token added or matched);
        None without a tokenizer that gives offsets."""
        if self.tokenizer is None or not getattr(self.tokenizer, "is_fast", False):
            return None
        got = self.tokenizer(text, add_special_tokens=False, split_special_tokens=True, return_offsets_mapping=True,
                             verbose=False)
        return [tuple(o) for o in got["offset_mapping"]]

    def refit(self, group: Any, choices: Sequence[str], position: int) -> tuple[int, str]:
        """The judge's choice group fitted again by the engines' own code (`serving.choice_group_items`):
        the tokens it cuts, and the prompt at `position` decoded from the ids the model would read."""
        from serving import choice_group_items

        items, cut = choice_group_items(self.tokenizer, group, choices, self.limit)
        return cut, self.tokenizer.decode(items[position].ids)


def judge_settings(manifest: dict[str, Any] | None, judge_id: str) -> dict[str, Any]:
    """The settings the manifest records for judge `judge_id` ({} when none)."""
    cfg = ((manifest or {}).get("stage_configs") or {}).get(f"judge/{judge_id}")
    return cfg if isinstance(cfg, dict) else {}


def judge_model(manifest: dict[str, Any] | None, judge_id: str) -> dict[str, Any] | None:
    """The model block the manifest records for judge `judge_id` (None: none recorded)."""
    model = judge_settings(manifest, judge_id).get("model")
    return model if isinstance(model, dict) and isinstance(model.get("model"), str) else None


def load_tokenizer(model: dict[str, Any]) -> JudgeTokenizer:
    """The model's tokenizer and limit from this machine's files (tokenizer None when not here; logged why)."""
    out = JudgeTokenizer(model=model["model"])
    if model.get("backend") == "openai":
        return out
    try:
        from transformers import AutoConfig, AutoTokenizer

        from lifesearch_local.llm.models import resolved_path
        from serving import context_limit

        path = resolved_path(model["model"], int(model.get("seed") or 0))
        kw = {"revision": model.get("revision"), "local_files_only": True,
              "trust_remote_code": bool(model.get("trust_remote_code"))}
        out.tokenizer = AutoTokenizer.from_pretrained(path, **kw)
        out.limit = context_limit(AutoConfig.from_pretrained(path, **kw), model.get("max_model_len"))
    except Exception as e:  # noqa: BLE001 - without the tokenizer the page estimates, and says so
        log.info("view: no tokenizer for %s (%s: %s)", model.get("model"), type(e).__name__, str(e)[:200])
        out.tokenizer = None
    return out


class Tokenizers:
    """Each judge's tokenizer, loaded on first use."""

    def __init__(self, manifest: dict[str, Any] | None):
        self.manifest = manifest
        self._got: dict[str, JudgeTokenizer | None] = {}
        self._lock = threading.Lock()

    def get(self, judge_id: str) -> JudgeTokenizer | None:
        """The judge's tokenizer (its `.tokenizer` None when not on this machine); None when the manifest
        records no model for it."""
        with self._lock:
            if judge_id not in self._got:
                model = judge_model(self.manifest, judge_id)
                self._got[judge_id] = load_tokenizer(model) if model else None
            return self._got[judge_id]
