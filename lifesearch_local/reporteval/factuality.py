"""Factuality: each claim against each cited source, 1 / 0 / −1; the source text is the shared prompt prefix.

Aggregation over chunks: a long source is split into chunks that fit the context and the
claim is judged against each; the pair takes the best label over the chunks (supported if
any chunk supports it, else partially supported if any chunk partly does, else
unsupported), because a fact need only appear somewhere in the page. It is ungraded only
when no chunk gave a usable answer, or when some chunk gave none and no chunk supported it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.llm.generate import generate_parsed, parse_object
from lifesearch_local.llm.prompts import load_template, render
from lifesearch_local.reporteval.aggregate import factuality_stats
from lifesearch_local.reporteval.claims import extract_claims
from lifesearch_local.reporteval.items import ReportItem, argmax, as_int, evaluation, expected, user
from lifesearch_local.reporteval.records import Claim, ClaimSource, FactualityResult, ReportEvaluation
from lifesearch_local.reporteval.sources import Source, SourceKey, source_key
from serving import ChoiceGroup, Engine

LABELS = (1, 0, -1)
CHOICES = ("1", "0", "-1")
PREFILL = '{"support": '


@dataclass
class _Job:
    """One claim against one chunk of one source."""

    claim: Claim
    slot: ClaimSource
    key: SourceKey
    chunk: int
    label: int | None = None
    probs: list[float] | None = None
    evidence: str | None = None
    raw: str | None = None


def cited_sources(items: Sequence[ReportItem]) -> list[tuple[str, dt.date | None]]:
    """(url, as_of) of every citation of every report, for fetching ahead of judging."""
    return [(c.url, it.as_of) for it in items for cl in extract_claims(it.report.text) for c in cl.citations if c.url]


def factuality_prompt(source: Source, chunk: int, claim: str) -> str:
    return render("reporteval_factuality", url=source.url, title=source.title or "(none)", part=chunk + 1,
                  parts=len(source.chunks), source=source.chunks[chunk], claim=claim)[0]


def parse_support(text: str) -> tuple[int, str] | None:
    """(support 1/0/−1, evidence) from the judge's JSON answer, or None."""

    def accept(obj: dict) -> tuple[int, str] | None:
        s = as_int(obj.get("support"), LABELS)
        return None if s is None else (s, str(obj.get("evidence", "")))

    return parse_object(text, accept)


def _plan(items: Sequence[ReportItem], sources: dict[SourceKey, Source]) -> tuple[list[list[Claim]], list[_Job]]:
    claims_by_item, jobs = [], []
    for it in items:
        claims = extract_claims(it.report.text)
        for cl in claims:
            for c in cl.citations:
                slot = ClaimSource(url=c.url, status="unverifiable")
                cl.sources.append(slot)
                if c.url is None:
                    slot.failure = f"unresolved_reference: [{c.ref}] has no entry in the reference list"
                    continue
                key = source_key(c.url, it.as_of)
                src = sources.get(key) or Source(url=c.url, failure="not_fetched: the source was not fetched")
                if src.failure:
                    slot.failure = src.failure
                    continue
                slot.chunks = len(src.chunks)
                jobs += [_Job(cl, slot, key, k) for k in range(len(src.chunks))]
        claims_by_item.append(claims)
    return claims_by_item, jobs


def _choice(backend: Engine, jobs: list[_Job], sources: dict[SourceKey, Source]) -> None:
    by_prefix: dict[tuple[SourceKey, int], list[_Job]] = {}
    for j in jobs:
        by_prefix.setdefault((j.key, j.chunk), []).append(j)
    groups = [ChoiceGroup(key=f"source|{key[0]}|{key[1] or ''}#{chunk}",
                          requests=[user(factuality_prompt(sources[key], chunk, j.claim.text), PREFILL) for j in js])
              for (key, chunk), js in by_prefix.items()]
    results = backend.score_choices(groups, CHOICES) if groups else []
    for js, res in zip(by_prefix.values(), results):
        for j, r in zip(js, res):
            j.label, j.probs = LABELS[argmax(r.probs)], r.probs


def _generate(backend: Engine, cfg: JudgeConfig, jobs: list[_Job], sources: dict[SourceKey, Source]) -> None:
    prompts = [factuality_prompt(sources[j.key], j.chunk, j.claim.text) for j in jobs]
    for j, (parsed, raw) in zip(jobs, generate_parsed(backend, cfg, prompts, parse_support, max_tokens=cfg.max_tokens)):
        j.raw = raw
        if parsed is not None:
            j.label, j.evidence = parsed


def _decide(jobs: list[_Job]) -> None:
    """Fill each claim–source slot from its chunks' answers (best label wins; see the module docstring)."""
    by_slot: dict[int, list[_Job]] = {}
    for j in jobs:
        by_slot.setdefault(id(j.slot), []).append(j)
    for js in by_slot.values():
        slot = js[0].slot
        graded = [j for j in js if j.label is not None]
        best = max(graded, key=lambda j: j.label) if graded else None  # type: ignore[arg-type,return-value]
        if best is None or (len(graded) < len(js) and best.label != 1):
            slot.status, slot.failure = "ungraded", f"ungraded: {len(js) - len(graded)} of {len(js)} chunks without a valid answer"
            slot.raw = next((j.raw for j in js if j.label is None), None)
            continue
        slot.status, slot.support, slot.chunk = "judged", best.label, best.chunk
        slot.probs, slot.evidence, slot.raw = best.probs, best.evidence, best.raw
        slot.expected = expected(best.probs, LABELS) if best.probs else None


def judge_factuality(backend: Engine, cfg: JudgeConfig, items: Sequence[ReportItem],
                     sources: dict[SourceKey, Source]) -> list[ReportEvaluation]:
    """One record per report; the claims of the whole batch that cite one source chunk share one prompt group."""
    claims_by_item, jobs = _plan(items, sources)
    if cfg.mode == "choice":
        _choice(backend, jobs, sources)
    else:
        _generate(backend, cfg, jobs, sources)
    _decide(jobs)
    h = load_template("reporteval_factuality")[1]
    out = []
    for it, claims in zip(items, claims_by_item):
        note = None if claims else "no cited claims"
        out.append(evaluation(it, cfg, "factuality", h, note=note,
                              factuality=FactualityResult(claims=claims, stats=factuality_stats(claims))))
    return out
