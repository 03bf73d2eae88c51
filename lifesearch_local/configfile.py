"""YAML config files: loaded and validated by pydantic, unknown keys rejected, errors located."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lifesearch_local.errors import InputError
from lifesearch_local.rundir.jsonl import require_file, validation_field

MAX_DEPTH = 64  # a config nests a few levels; pydantic and our walks recurse once per level
MAX_NODES = 1_000_000  # values once aliases are expanded: a YAML "billion laughs" is a few lines


def shape_problem(data: Any) -> str | None:
    """Why loaded YAML cannot be a config: nested deeper than MAX_DEPTH, or more than MAX_NODES
    values once its aliases (`*a`) are expanded, as validation would expand them. Walked without
    recursion, each shared value counted once per reference but sized once."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, int, bool]] = [(data, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if not isinstance(node, dict | list) or (id(node) in sizes and not done):
            continue
        kids = list(node.values()) if isinstance(node, dict) else node
        if not done:
            if depth > MAX_DEPTH:
                return f"nested deeper than a config can be (at most {MAX_DEPTH} levels)"
            sizes[id(node)] = 0  # in progress: an alias cycle counts as already sized
            stack.append((node, depth, True))
            stack.extend((k, depth + 1, False) for k in kids if isinstance(k, dict | list))
            continue
        sizes[id(node)] = 1 + sum(sizes.get(id(k), 0) if isinstance(k, dict | list) else 1 for k in kids)
        if sizes[id(node)] > MAX_NODES:
            return f"more than {MAX_NODES:,} values once its aliases are expanded: not a config"
    return None


def load_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    p = Path(path)
    require_file(p, "YAML")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise InputError(str(p), None if line is None else line + 1, None, f"malformed YAML: {e}") from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise InputError(str(p), None, None, f"nested deeper than a config can be (at most {MAX_DEPTH} levels)") from None
    problem = shape_problem(data)
    if problem:
        raise InputError(str(p), None, None, problem)
    if not isinstance(data, dict):
        raise InputError(str(p), None, None, "expected a mapping at the top level")
    return data


def validate_config(model: type[BaseModel], data: dict[str, Any], path: str | Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        field, msg = validation_field(e, model)
        raise InputError(str(path), None, field, msg) from None
