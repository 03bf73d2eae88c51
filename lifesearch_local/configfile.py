"""YAML config files: loaded and validated by pydantic, unknown keys rejected, errors located."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lifesearch_local.errors import InputError
from lifesearch_local.rundir.jsonl import require_file, validation_field


def load_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    p = Path(path)
    require_file(p, "YAML")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise InputError(str(p), None if line is None else line + 1, None, f"malformed YAML: {e}") from None
    if not isinstance(data, dict):
        raise InputError(str(p), None, None, "expected a mapping at the top level")
    return data


def validate_config(model: type[BaseModel], data: dict[str, Any], path: str | Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        field, msg = validation_field(e, model)
        raise InputError(str(path), None, field, msg) from None
