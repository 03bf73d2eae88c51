"""A judge's configuration and the id derived from the settings that can change its verdicts."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from lifesearch_local.records import Id
from serving import ChoiceOnly, Execution, GenerateOnly, HFConfig, ModelConfig, Result, result_settings

MAX_RUNS = 1000
"""The most runs a config may ask for (agent runs per task, judge repetitions): the paper uses 1 to 3, and a
count past this is a typo that would make every command enumerate it; refused where the config is read."""

class JudgeConfig(BaseModel):
    """A judge configuration: one model, one mode, its settings. Its `id` tags every judgment."""

    model_config = ConfigDict(extra="forbid")

    id: Result[Id | None] = None
    """Name recorded in judgments and every table; default `<model name>/<mode>/<6 hex>`, the hex
    hashing the settings that change verdicts (`derived_judge_id`). A given id is kept as written."""
    model: Result[ModelConfig] = Field(default_factory=HFConfig)
    """The model and the engine hosting it."""
    mode: Result[Literal["choice", "generate"]] = "choice"
    """choice: one forward pass reading p(true) vs p(false); generate: full JSON with a reason."""
    runs: Execution[int] = Field(1, ge=1, le=MAX_RUNS)
    """Repetitions over the same reports (self-consistency); the paper grades with one. At most MAX_RUNS."""
    threshold: ChoiceOnly[float] = Field(0.5, ge=0.0, le=1.0)
    """choice mode: satisfied when p_true ≥ threshold."""
    max_tokens: GenerateOnly[int] = Field(512, ge=8)
    """generate mode: token cap of the JSON answer (reasoning judges need more)."""
    temperature: GenerateOnly[float] = Field(0.0, ge=0.0)
    """generate mode: sampling temperature of the first attempt."""
    retries: GenerateOnly[int] = Field(2, ge=0, le=10)
    """generate mode: extra attempts (new seed) after unparseable JSON; then ungraded."""
    groups_per_call: Execution[int] = Field(8, ge=1)
    """Reports sent to the engine per call (the kernel packs them up to its token budget)."""
    _derived: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _fill_id(self) -> JudgeConfig:
        if self.id is None:
            self.id = derived_judge_id(self)
            self._derived = True
        return self

    @property
    def derived(self) -> bool:
        """Whether the id was derived from the settings (not given)."""
        return self._derived

    def updated(self, model: dict[str, Any] | None = None, **fields: Any) -> JudgeConfig:
        """A copy with some fields (and model fields) changed; a derived id is derived again,
        since `model_copy(update=...)` would keep the old one for the new settings."""
        data = self.model_dump(exclude={"id"} if self._derived and "id" not in fields else set())
        data.update(fields)
        data["model"] = {**data["model"], **(model or {})}
        return JudgeConfig.model_validate(data)


# Leaf directory names that say nothing about the model: the parent is named as well.
_GENERIC_DIRS = {"hf", "model", "models", "weights", "checkpoint", "final", "latest", "main", "merged", "export"}


def model_name(model: str) -> str:
    """A short name for a model: the last part of a hub id or the directory name (with its parent
    when the leaf is generic such as `hf`, or the repository of a Hugging Face cache snapshot)."""
    parts = [p for p in Path(model).expanduser().parts if p not in ("/", ".")]
    if not parts:
        return "model"
    name = parts[-1]
    cache = [p for p in parts if p.startswith("models--")]
    if cache and "snapshots" in parts:
        name = cache[-1].split("--")[-1]
    elif len(parts) > 1 and (name.lower() in _GENERIC_DIRS or re.fullmatch(r"[0-9a-f]{40}|checkpoint-\d+", name)):
        name = f"{parts[-2]}-{name}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "model"


def model_ref(model: str) -> str:
    """The model as the derived id hashes it: an existing local directory by its absolute path
    (the same directory named from another working directory is the same judge)."""
    p = Path(model).expanduser()
    return str(p.resolve()) if p.is_dir() else model


def derived_judge_id(cfg: JudgeConfig) -> str:
    """`<model name>/<mode>/<6 hex>`: the hex hashes the judge settings that can change a verdict
    in its mode (the fields marked so, serving.affects), those set to other than their defaults
    (so a new setting with a default keeps existing ids), and in generate mode the verdict's
    schema; where and how fast it runs (device, kernel, batching, endpoint, runs) is left out."""
    data = result_settings(cfg, mode=cfg.mode, exclude_defaults=True, exclude={"id", "model", "mode"})
    data["model"] = result_settings(cfg.model, exclude_defaults=True)
    data["model"]["model"] = model_ref(cfg.model.model)
    data["mode"] = cfg.mode
    if cfg.mode == "generate":
        from lifesearch_local.judge.verdict import verdict_schema_hash

        data["verdict_schema"] = verdict_schema_hash()
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:6]
    return f"{model_name(cfg.model.model)}/{cfg.mode}/{digest}"


def claimed_id_problem(settings: dict[str, Any]) -> str | None:
    """Why recorded judge settings cannot be the ones its id was derived from, else None.

    An id of the derived shape (`<model name>/<mode>/<6 hex>`) hashes the verdict settings: the
    settings derived again must give it back. An id given by hand, or a model named by a relative
    directory (which the id hashed as the absolute path of the day), cannot be checked this way."""
    claimed = settings.get("id")
    model = (settings.get("model") or {}).get("model") if isinstance(settings.get("model"), dict) else None
    if not isinstance(claimed, str) or not isinstance(model, str):
        return None
    if not re.fullmatch(rf"{re.escape(model_name(model))}/(choice|generate)/[0-9a-f]{{6}}", claimed):
        return None
    p = Path(model).expanduser()
    if not p.is_absolute() and (p.is_dir() or model.startswith((".", "~"))):
        return None
    derived = JudgeConfig.model_validate({**settings, "id": None}).id
    if derived == claimed:
        return None
    return f"its recorded settings derive the id {derived}, not {claimed} (edited since it judged)"
