"""Typed records of the benchmark: tasks, rubrics, reports, judgments, labels, manifests."""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, field_validator


class Domain(str, Enum):
    """The seven LifeSearch domains (paper §3.1)."""

    company = "company"
    academic = "academic"
    financial = "financial"
    policy = "policy"
    industry = "industry"
    technical = "technical"
    everyday = "everyday"


DOMAIN_TITLES: dict[Domain, str] = {
    Domain.company: "Company and competitor research",
    Domain.academic: "Academic and professional literature",
    Domain.financial: "Financial market analysis",
    Domain.policy: "Policy and government data",
    Domain.industry: "Industry news and trend aggregation",
    Domain.technical: "Technical tools and developer resources",
    Domain.everyday: "Everyday facts",
}

# The paper's Table 4 column abbreviations, in its order.
DOMAIN_ABBREV: dict[Domain, str] = {
    Domain.company: "Comp.",
    Domain.academic: "Acad.",
    Domain.financial: "Fin.",
    Domain.policy: "Pol.",
    Domain.industry: "Ind.",
    Domain.technical: "Tech.",
    Domain.everyday: "Everyd.",
}

RubricType = Literal["Objective", "Subjective"]
Necessity = Literal["Explicit", "Implicit"]
Priority = Literal["Must Have", "Nice to Have"]
Language = Literal["en", "zh"]
ReportStatus = Literal["completed", "clarification", "budget", "error"]


def _number(value: Any) -> Any:
    # pydantic's lax mode reads true as 1.0 and "0.5" as 0.5: a record that says so is wrong.
    if isinstance(value, (bool, str)):
        raise ValueError(f"expected a number, got {type(value).__name__} {value!r}")
    return value


def _probability(value: Any) -> Any:
    value = _number(value)
    if isinstance(value, (int, float)):
        if not -1e-9 <= value <= 1 + 1e-9:  # NaN fails this too; a rounding hair outside [0, 1] is clamped
            raise ValueError(f"a probability must lie in [0, 1], got {value!r}")
        return min(1.0, max(0.0, float(value)))
    return value


# Strict scalar types for every number and flag read from a record file.
Number = Annotated[float, BeforeValidator(_number)]
Probability = Annotated[float, BeforeValidator(_probability)]
Integer = Annotated[int, BeforeValidator(_number)]
Flag = Annotated[bool, Strict()]

# Format and separator characters that show nothing: a text of zero-width spaces is empty too.
_INVISIBLE = frozenset({"Cf", "Zs", "Zl", "Zp", "Cc"})
# C0 controls, DEL and C1 controls: never part of a name, and a \r splits a CSV row in two.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def is_blank(text: str) -> bool:
    """Nothing visible: whitespace, zero-width spaces and joiners, BOMs, other format characters."""
    return all(unicodedata.category(c) in _INVISIBLE for c in text)


def id_problem(value: str) -> str | None:
    """What is wrong with `value` as an id (task, rubric, agent, judge), or None."""
    if is_blank(value):
        return "empty (or only whitespace and invisible characters)"
    bad = _CONTROL.search(value)
    if bad:
        return (f"control character U+{ord(bad.group()):04X} at character {bad.start()}: ids never hold "
                "control characters (a carriage return would split a CSV row in two)")
    return None


def _id(value: str) -> str:
    problem = id_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _visible(value: str) -> str:
    if is_blank(value):
        raise ValueError("empty (or only whitespace and invisible characters)")
    return value


Id = Annotated[str, AfterValidator(_id)]
"""An id: some visible text, no control characters (C0, DEL, C1)."""
Text = Annotated[str, AfterValidator(_visible)]
"""Text a judge or an agent must read: not empty, nor only whitespace or invisible characters."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Rubric(_Record):
    """One expert-written Pass/Fail requirement of a task (paper Table 2)."""

    id: Id
    """Rubric id, unique within its task (the paper numbers them R1, R2, …)."""
    criterion: Text
    """The self-contained acceptance statement the judge checks."""
    type: RubricType
    """Objective (verifiable fact or requirement) or Subjective (involves preference)."""
    necessity: Necessity
    """Explicit (stated in the question) or Implicit (reasonably implied by it)."""
    priority: Priority
    """Qualitative label shown to the judge; the score uses `weight`, not this."""
    weight: Number = Field(ge=0.0, le=1.0)
    """Annotator-assigned importance in [0, 1] (one decimal in the paper); 0 drops the rubric."""
    dimension: str | None = None
    """The source benchmark's grouping of the rubric, kept for breakdowns and the way back
    (DeepResearch Bench II: info_recall, analysis or presentation; ProfBench: its criterion type);
    None for LifeSearch's own rubrics."""


class BlockedSources(_Record):
    """A source the agent must not use and a report must not cite (DeepResearch Bench II's
    `blocked`: the expert article its rubrics were drawn from)."""

    title: str | None = None
    """Title of the blocked article."""
    authors: list[str] = Field(default_factory=list)
    """Its authors, as the benchmark lists them."""
    urls: list[str] = Field(default_factory=list)
    """Addresses where it can be read."""


class Task(_Record):
    """One research task with its rubrics."""

    id: Id
    """Task id, unique within the task file."""
    language: Language
    """`en` or `zh`; picks the judge prompt."""
    domain: Domain
    """One of the seven LifeSearch domains."""
    question: Text
    """The research request given to the agent and shown to the judge."""
    as_of: dt.date | None = None
    """Time cutoff: the agent's 'today' and the latest date the web layer may serve."""
    rubrics: list[Rubric]
    """The task's rubrics; their positive weights must sum to more than zero."""
    blocked: BlockedSources | None = None
    """Sources the agent may not read or cite (DeepResearch Bench II); None when the task has none.
    Stored for tools and judges that enforce it; the imported question states it in words too."""

    @property
    def total_weight(self) -> float:
        return sum(r.weight for r in self.rubrics if r.weight > 0)


class Report(_Record):
    """The final answer an agent wrote for one task in one run."""

    task_id: Id
    """The task this report answers."""
    agent: Id
    """Name of the agent configuration (model + harness settings) that wrote it."""
    run: Integer = 0
    """Index of the independent agent run (the paper runs each task three times)."""
    text: str
    """The report itself, usually markdown; empty when the agent produced none."""
    status: ReportStatus = "completed"
    """completed, clarification (asked the user instead), budget (a limit hit), or error."""
    iterations: Integer | None = None
    """Model decision steps taken (Table 4's Iter.)."""
    output_tokens: Integer | None = None
    """Tokens the model generated over the whole run, not only the report."""
    tool_calls: Integer | None = None
    """Tool calls the agent ran (search, fetch, python; a malformed call that never ran not counted);
    0 means the report was written without any research. None for reports not written here (imported)."""
    pages_read: Integer | None = None
    """web_fetch calls that returned a page (a failed fetch not counted); None for imported reports."""
    wall_s: Number | None = None
    """Wall-clock seconds the run took."""
    trajectory: str | None = None
    """Path of the step log, relative to the run directory."""
    error: str | None = None
    """What went wrong, when status is error or budget."""

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task_id, self.agent, self.run)


PanelRule = Literal["majority", "mean"]


class Panel(_Record):
    """How a panel judge's decision was made from its members' decisions (`lifesearch panel`)."""

    members: list[str]
    """The member judges by name (`id`, or `id#k` for a repetition), in the order given."""
    combine: PanelRule
    """majority: most member verdicts (a split broken by the mean p_true); mean: the mean p_true ≥ 0.5."""
    votes: list[Flag | None]
    """Each member's decision, in member order (null: that member left it ungraded)."""
    tie: Flag = False
    """majority: the graded votes split evenly and the mean p_true decided."""


class Judgment(_Record):
    """One judge decision on one rubric of one report."""

    task_id: Id
    """Task of the judged report."""
    agent: Id
    """Agent that wrote the judged report."""
    run: Integer = 0
    """Agent run of the judged report."""
    rubric_id: Id
    """The rubric decided."""
    judge: Id
    """Judge configuration id (model + mode + settings)."""
    judge_run: Integer = 0
    """Repetition of the judge on the same report (for self-consistency); 0 for a single pass."""
    satisfied: Flag | None
    """The decision; null when the judge gave no usable answer (ungraded)."""
    p_true: Probability | None = None
    """Probability the judge gives to `true` (choice mode), renormalised over true/false."""
    reason: str | None = None
    """The judge's stated reason (generate mode)."""
    raw: str | None = None
    """Raw judge output, kept for audit."""
    prompt_hash: str | None = None
    """sha256 (first 16 hex) of the prompt template used."""
    truncated_tokens: Integer = 0
    """Report tokens elided (head and tail kept, a marker between) to fit the judge's context;
    0 when the whole report was read."""
    settings: str | None = None
    """Hash (16 hex) of the judge settings the decision was made with (the manifest's
    `resume/judge/<id>`): a resume under the same id with other settings is refused from the
    records themselves, even when the manifest is lost. Null in imported judgments (another
    evaluator's); the judge stage refuses to add to such records under their id."""
    rubric_hash: str | None = None
    """Hash (16 hex) of what the judge read of the task and rubric (question, language, criterion,
    type, necessity, priority): a verdict on a rubric edited since is stale. Null in imported judgments."""
    panel: Panel | None = None
    """For a panel judge's decision: its members, their votes and the rule that combined them;
    null for a single judge's."""

    @property
    def key(self) -> tuple[str, int, str, str, int, str]:
        return (self.judge, self.judge_run, self.task_id, self.agent, self.run, self.rubric_id)


class Label(_Record):
    """A reference decision (human or another judge) for one rubric of one report."""

    task_id: Id
    """Task of the labelled report."""
    agent: Id
    """Agent that wrote the labelled report."""
    run: Integer = 0
    """Agent run of the labelled report."""
    rubric_id: Id
    """The rubric labelled."""
    satisfied: Flag
    """The reference decision."""
    source: Id = "human"
    """Where the label comes from: human, gemini, another judge id, …"""

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.task_id, self.agent, self.run, self.rubric_id)


class JudgeIdentity(BaseModel):
    """A judge's fingerprint, what makes two judge runs "the same judge": compared before their verdicts are put together
    (`certify`, `leaderboard`), shown in report.html, written to the manifest by the judge stage."""

    model_config = ConfigDict(extra="forbid")

    judge: str
    """The judge config id (`Judgment.judge`)."""
    weights_hash: str | None = None
    """sha256 (16 hex) of the model's weights as the engine loaded them (None: an endpoint that does not say)."""
    engine: str
    """The engine that ran it: hf, vllm or openai."""
    engine_version: str | None = None
    """Version of the engine's library (transformers, vllm) or the endpoint's reported model id."""
    dtype: str | None = None
    """Compute dtype (float32, bfloat16, …), where the engine knows it."""
    prompt_hashes: dict[str, str] = Field(default_factory=dict)
    """sha256 (16 hex) of each judge prompt file used, by prompt name."""
    schema_hash: str | None = None
    """sha256 (16 hex) of the generate-mode verdict schema (None in choice mode)."""
    kernel_form: str | None = None
    """The choice-scoring form that ran (shared, two_stage, …; None for engines without the packed kernel)."""

    def differences(self, other: JudgeIdentity) -> list[str]:
        """`field: a != b` for every field that differs between two fingerprints (the id aside)."""
        mine, theirs = self.model_dump(exclude={"judge"}), other.model_dump(exclude={"judge"})
        return [f"{k}: {mine[k]!r} != {theirs[k]!r}" for k in mine if mine[k] != theirs[k]]


class Replay(BaseModel):
    """One `lifesearch rejudge`: recorded decisions of a run judged again with the recorded settings."""

    model_config = ConfigDict(extra="forbid")

    at: str
    """UTC timestamp of the replay."""
    seed: int
    """Seed of the sample of decisions."""
    sampled: int
    """Decisions judged again."""
    eligible: int = 0
    """Recorded decisions the sample was drawn from (those a model made, on rubrics unchanged since)."""
    max_abs_dp: float | None
    """Largest |p_true now − p_true recorded| over the sampled decisions (None: none has a p_true, generate mode)."""
    flips: int
    """Sampled decisions whose verdict differs from the recorded one."""
    judges: dict[str, list[str]] = Field(default_factory=dict)
    """Per judge id replayed: how its fingerprint now differs from the recorded one ([]: the same judge)."""
    wall_s: float = 0.0
    """Seconds the replay took, model loading included."""


class Manifest(BaseModel):
    """What a run directory was produced from, so a rerun can be checked to be the same."""

    model_config = ConfigDict(extra="allow")

    package_version: str
    """Version of lifesearch-local."""
    git_sha: str | None = None
    """Commit of the source tree, with `+dirty` when it had uncommitted changes."""
    python: str
    """Python version."""
    torch: str | None = None
    """Installed torch version, if any."""
    transformers: str | None = None
    """Installed transformers version, if any."""
    vllm: str | None = None
    """Installed vLLM version, if any."""
    created: str
    """UTC timestamp of the first write."""
    updated: str
    """UTC timestamp of the latest write."""
    hashes: dict[str, str] = Field(default_factory=dict)
    """sha256 (16 hex) of inputs by name: tasks, reports, config, prompts/…, models/…"""
    seeds: dict[str, int] = Field(default_factory=dict)
    """Every seed used, by purpose."""
    stages: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per stage (agent, judge, …): counts, tokens, tokens/s, decisions/s, wall seconds, backend; on Ray,
    `nodes` (each node that did work: hostname, ip, replicas, records, failures; added up over a
    resumed stage's invocations) and `replicas_lost` (each replica dropped, with its node and why)."""
    stage_configs: dict[str, Any] = Field(default_factory=dict)
    """Per stage (`judge/<id>`, …): the settings its records were made with, less the ones that
    only change where and how fast it runs; a resume with other settings is refused."""
    fingerprints: dict[str, JudgeIdentity] = Field(default_factory=dict)
    """Per judge id: the fingerprint of the judge that made its judgments in this directory."""
    replays: list[Replay] = Field(default_factory=list)
    """Every `lifesearch rejudge` of this directory, the latest last."""
    estimate: dict[str, Any] | None = None
    """The latest invocation's estimate made at its start (`estimate`: `lifesearch estimate --json`'s
    fields, from stored profiles) and, once it ended, what it actually took (`actual`: per phase its
    seconds, decisions and tokens, and the ratio actual / estimate)."""

    @field_validator("hashes")
    @classmethod
    def _hex(cls, v: dict[str, str]) -> dict[str, str]:
        return {k: str(h) for k, h in v.items()}
