"""YAML configuration, validated by pydantic with unknown keys rejected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from serving.config import RayConfig

from .agent.config import AgentConfig
from .errors import InputError
from .jsonl import require_file, validation_field
from .judge.config import JudgeConfig
from .reporteval.config import ReportEvalConfig
from .web.config import WebConfig


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
        field, msg = validation_field(e)
        raise InputError(str(path), None, field, msg) from None


def load_judge_configs(path: str | Path) -> list[JudgeConfig]:
    """Judge configs from a YAML holding `judge:` (one), `judges:` (several) or a bare judge.

    A file with a `judge:` or `judges:` block is validated whole, as `run` does (an unknown key
    anywhere is an error, located by its block: `judge.mdoe`, `agents[0].max_token`)."""
    data = load_yaml(path)
    if "judges" in data or "judge" in data:
        return validate_config(RunConfig, data, path).all_judges()
    return [validate_config(JudgeConfig, data, path)]


class RunConfig(BaseModel):
    """A whole run (`lifesearch run --config`): tasks, agents, web, judges, and where models live.

    Sections owned by later stages start as plain mappings and are validated by their own
    models (web layer, agent harness, Ray pool) when those stages read them.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = "run"
    """Run name; the default output directory is runs/<name>."""
    out: str | None = None
    """Run directory (default runs/<name>); reused to resume."""
    tasks: str = "data/sample/tasks.jsonl"
    """Tasks JSONL (the real LifeSearch release, or the bundled samples)."""
    task_ids: list[str] | None = None
    """Only these tasks (default: all)."""
    runs: int = Field(1, ge=1)
    """Independent agent runs per task (the paper uses 3)."""
    reports: str | None = None
    """Existing reports JSONL to judge (sweeps, re-judging) instead of running agents."""
    agents: list[AgentConfig] = Field(default_factory=list)
    """Agent configurations: model, budgets, tools, concurrency (each id tags its reports)."""
    web: WebConfig = Field(default_factory=WebConfig)
    """Web layer settings shared by the agents: search backend, cache mode, corpus, limits."""
    judge: JudgeConfig | None = None
    """The judge that grades the reports."""
    judges: list[JudgeConfig] = Field(default_factory=list)
    """Several judges (sweeps); `judge` is shorthand for one."""
    ray: RayConfig | None = None
    """Ray cluster settings; absent means models run in-process."""
    reporteval: ReportEvalConfig | None = None
    """ReportEval metrics (quality, redundancy, factuality) of every report with each judge;
    absent means the stage is skipped."""
    labels: str | None = None
    """Reference labels for the agreement table in the report."""
    seed: int = 0
    """Base seed of the run."""

    def all_judges(self) -> list[JudgeConfig]:
        return ([self.judge] if self.judge else []) + list(self.judges)

    def out_dir(self) -> str:
        return self.out or f"runs/{self.name}"


def load_run_config(path: str | Path) -> RunConfig:
    """Validate a run YAML (unknown keys are errors naming the field)."""
    return validate_config(RunConfig, load_yaml(path), path)
