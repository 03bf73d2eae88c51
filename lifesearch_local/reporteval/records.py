"""Records of the ReportEval stage: one line per (judge, metric, report) in `reporteval.jsonl`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Metric = Literal["quality", "redundancy", "factuality"]
METRICS: tuple[Metric, ...] = ("quality", "redundancy", "factuality")
PairStatus = Literal["judged", "unverifiable", "ungraded"]
CitationStyle = Literal["numbered", "link", "url"]


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DimensionScore(_Rec):
    """One quality dimension of one report."""

    dimension: str
    """comprehensiveness, coherence, clarity, insightfulness or overall."""
    score: float | None = None
    """0–4: the judge's integer (generate mode) or the expected score Σ k·p(k) (choice mode); null if ungraded."""
    label: int | None = None
    """The integer score: as written (generate) or the most probable one (choice)."""
    probs: list[float] | None = None
    """choice mode: probabilities of the scores 0, 1, 2, 3, 4 (renormalised over the five)."""
    justification: str | None = None
    """generate mode: the judge's justification for this dimension."""


class QualityResult(_Rec):
    """The five quality dimensions of one report."""

    dimensions: list[DimensionScore]
    """In the order comprehensiveness, coherence, clarity, insightfulness, overall."""
    raw: str | None = None
    """generate mode: the judge's last raw answer, kept for audit."""


class SectionInfo(_Rec):
    """A section or paragraph of a report as the redundancy metric saw it."""

    title: str
    """Heading text, or the first words of a paragraph."""
    chars: int
    """Length of the section text in characters."""
    excluded: str | None = None
    """Why it was left out of the pairs (introduction, conclusion, references), or null if kept."""


class RedundancyPair(_Rec):
    """One judged pair of sections."""

    a: int
    """Index of the first section among the kept sections."""
    b: int
    """Index of the second section among the kept sections (a < b)."""
    score: float | None = None
    """0–4, 4 = no redundancy: the integer (generate) or Σ k·p(k) (choice); null if ungraded."""
    label: int | None = None
    """The integer score: as written (generate) or the most probable one (choice)."""
    probs: list[float] | None = None
    """choice mode: probabilities of the scores 0–4."""
    reason: str | None = None
    """generate mode: the judge's reason."""
    raw: str | None = None
    """generate mode: the judge's last raw answer."""


class RedundancyResult(_Rec):
    """The sections of one report, the sampled pairs and their mean."""

    mode: Literal["headings", "paragraphs"]
    """How the report was split: at markdown headings, or into paragraphs when it has none."""
    sections: list[SectionInfo]
    """Every section found, in order, with the reason it was excluded if it was."""
    possible_pairs: int
    """Pairs of kept sections there were to choose from."""
    pairs: list[RedundancyPair]
    """The sampled pairs (all of them when there are no more than the cap)."""
    mean: float | None = None
    """Mean score of the graded pairs; null when there is no graded pair."""


class Citation(_Rec):
    """One citation attached to a claim."""

    style: CitationStyle
    """numbered (`[n]` resolved through the reference list), link (markdown link) or url (bare URL)."""
    url: str | None
    """The cited address; null for a `[n]` with no entry n in the reference list."""
    ref: int | None = None
    """The reference number, for numbered citations."""


class ClaimSource(_Rec):
    """The verdict on one claim against one of its cited sources."""

    url: str | None
    """The cited address (null for an unresolved reference number)."""
    status: PairStatus
    """judged, unverifiable (the source could not be obtained) or ungraded (no usable verdict)."""
    support: int | None = None
    """1 supported, 0 partially supported, −1 unsupported (best over the source's chunks); null unless judged."""
    expected: float | None = None
    """choice mode: Σ v·p(v) over the labels 1, 0, −1 for the deciding chunk."""
    probs: list[float] | None = None
    """choice mode: probabilities of 1, 0, −1 for the deciding chunk."""
    chunk: int | None = None
    """Index of the chunk that decided (the one with the best label)."""
    chunks: int = 0
    """Number of chunks the source was split into."""
    failure: str | None = None
    """Why the pair is unverifiable or ungraded: `kind: message` (fetch failure kinds, replay_miss, unresolved_reference)."""
    evidence: str | None = None
    """generate mode: the source sentences the judge quoted."""
    raw: str | None = None
    """generate mode: the judge's raw answer for the deciding chunk."""


class Claim(_Rec):
    """A sentence (or table row) of the report that carries at least one citation."""

    index: int
    """Position of the claim in the report (0-based)."""
    text: str
    """The sentence with citation markers removed and markdown links reduced to their text."""
    citations: list[Citation]
    """Its citations, in order, one per distinct source."""
    sources: list[ClaimSource] = Field(default_factory=list)
    """Verdicts against each distinct cited source."""


class FactualityStats(_Rec):
    """Aggregates of claim–source pairs (see aggregate.factuality_stats)."""

    claims: int
    """Claims (cited sentences) counted."""
    pairs: int
    """Claim–source pairs in all."""
    judged: int
    """Pairs with a verdict."""
    unverifiable: int
    """Pairs whose source could not be obtained: kept apart, never counted as unsupported."""
    ungraded: int
    """Pairs whose source was read but the judge gave no usable verdict."""
    mean_support: float | None
    """Mean of the support labels (1/0/−1) over judged pairs."""
    full_support_rate: float | None
    """Share of judged pairs labelled 1."""
    unverifiable_share: float | None
    """Unverifiable pairs / all pairs."""


class FactualityResult(_Rec):
    """Claims of one report with their verdicts."""

    claims: list[Claim]
    """Every cited claim extracted from the report."""
    stats: FactualityStats
    """This report's aggregates."""


class ReportEvaluation(_Rec):
    """One metric of one report under one judge: a line of `reporteval.jsonl`."""

    task_id: str
    """Task of the evaluated report."""
    agent: str
    """Agent that wrote it."""
    run: int = 0
    """Agent run of the report."""
    judge: str
    """Judge configuration id."""
    metric: Metric
    """quality, redundancy or factuality."""
    mode: Literal["choice", "generate"]
    """Judge mode used."""
    prompt_hash: str
    """sha256[:16] of the prompt template(s) used (joined with '+' when several)."""
    seed: int | None = None
    """redundancy: the base seed of the pair sampler (per report: Random(f"{seed}:{task}:{agent}:{run}"))."""
    note: str | None = None
    """Why a metric could not be computed (e.g. empty report)."""
    truncated_tokens: int = 0
    """Most prompt tokens elided from one of this metric's prompts to fit the judge's context
    (head and tail kept around a marker); 0 when every prompt was read whole."""
    quality: QualityResult | None = None
    """The quality result (metric quality)."""
    redundancy: RedundancyResult | None = None
    """The redundancy result (metric redundancy)."""
    factuality: FactualityResult | None = None
    """The factuality result (metric factuality)."""
    settings: str | None = None
    """Hash of the judge and ReportEval settings the record was made with (the manifest's
    `resume/reporteval/<id>`): a resume with other settings is refused from the records even when
    the manifest is lost."""

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        return (self.judge, self.metric, self.task_id, self.agent, self.run)
