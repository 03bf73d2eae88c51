"""A whole run's configuration (`lifesearch run --config`): RunConfig and the YAML loaders built on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lifesearch_local.agent.config import AgentConfig
from lifesearch_local.configfile import load_yaml, validate_config
from lifesearch_local.judge.config import MAX_RUNS, JudgeConfig
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.web.config import WebConfig
from serving import Execution, RayConfig, Result


def load_judge_configs(path: str | Path) -> list[JudgeConfig]:
    """Judge configs from a YAML holding `judge:` (one), `judges:` (several) or a bare judge (`load_judge_file`)."""
    return load_judge_file(path)[0]


def load_judge_file(path: str | Path) -> tuple[list[JudgeConfig], dict[str, Any] | None]:
    """The judge configs of a YAML holding `judge:` (one), `judges:` (several) or a bare judge, and its
    top-level `ray:` block as written (None if absent), from one reading of the file.

    A file with a `judge:` or `judges:` block is validated whole, as `run` does (an unknown key
    anywhere is an error, located by its block: `judge.mdoe`, `agents[0].max_token`)."""
    data = load_yaml(path)
    if "judges" in data or "judge" in data:
        return validate_config(RunConfig, data, path).all_judges(), data.get("ray")
    return [validate_config(JudgeConfig, data, path)], data.get("ray")


class RunConfig(BaseModel):
    """A whole run (`lifesearch run --config`): tasks, agents, web, judges, and where models live.

    Sections owned by later stages start as plain mappings and are validated by their own
    models (web layer, agent harness, Ray pool) when those stages read them.
    """

    model_config = ConfigDict(extra="forbid")

    name: Execution[str] = "run"
    """Run name; the default output directory is runs/<name>."""
    out: Execution[str | None] = None
    """Run directory (default runs/<name>); reused to resume."""
    tasks: Result[str] = "data/sample/tasks.jsonl"
    """Tasks JSONL (the real LifeSearch release, or the bundled samples)."""
    task_ids: Result[list[str] | None] = None
    """Only these tasks (default: all)."""
    runs: Result[int] = Field(1, ge=1, le=MAX_RUNS)
    """Independent agent runs per task (the paper uses 3); at most MAX_RUNS (judge/config.py)."""
    reports: Result[str | None] = None
    """Existing reports JSONL to judge (sweeps, re-judging) instead of running agents."""
    agents: Result[list[AgentConfig]] = Field(default_factory=list)
    """Agent configurations: model, budgets, tools, concurrency (each id tags its reports)."""
    web: Result[WebConfig] = Field(default_factory=WebConfig)
    """Web layer settings shared by the agents: search backend, cache mode, corpus, limits."""
    judge: Result[JudgeConfig | None] = None
    """The judge that grades the reports."""
    judges: Result[list[JudgeConfig]] = Field(default_factory=list)
    """Several judges (sweeps); `judge` is shorthand for one."""
    ray: Execution[RayConfig | None] = None
    """Ray cluster settings; absent means models run in-process."""
    reporteval: Result[ReportEvalConfig | None] = None
    """ReportEval metrics (quality, redundancy, factuality) of every report with each judge;
    absent means the stage is skipped."""
    labels: Result[str | None] = None
    """Reference labels for the agreement table in the report."""
    seed: Result[int] = 0
    """Base seed of the run."""

    def all_judges(self) -> list[JudgeConfig]:
        return ([self.judge] if self.judge else []) + list(self.judges)

    def out_dir(self) -> str:
        return self.out or f"runs/{self.name}"


def load_run_config(path: str | Path) -> RunConfig:
    """Validate a run YAML (unknown keys are errors naming the field)."""
    return validate_config(RunConfig, load_yaml(path), path)


class CertifySettings(BaseModel):
    """What `lifesearch certify` takes beside its files that changes the study: declared once here, marked as the
    config fields are; the CLI's defaults read these fields."""

    model_config = ConfigDict(extra="forbid")

    margin: Result[float] = Field(2.0, ge=0, le=100)
    """Non-inferiority / equivalence margin in points of accuracy."""
    category_field: Result[str] = "type"
    """The rubric attribute the per-category view groups by (analysis.certify.CATEGORY_FIELDS)."""
    alpha: Result[float] = Field(0.025, gt=0, lt=0.5)
    """One-sided level of the non-inferiority test (0.025: the regulatory convention, the same as the lower end
    of a two-sided 95% interval clearing −margin)."""
