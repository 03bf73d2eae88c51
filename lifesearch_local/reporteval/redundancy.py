"""Redundancy: pairs of sections judged 0–4 (4 = no repetition), a seeded sample of at most 30 per report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.llm.generate import generate_parsed_fitted, parse_object
from lifesearch_local.llm.prompts import load_template, render
from lifesearch_local.reporteval.aggregate import mean
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.items import (
    SCORE_PREFILL,
    SCORES,
    ReportItem,
    argmax,
    as_int,
    evaluation,
    expected,
    user,
)
from lifesearch_local.reporteval.records import (
    RedundancyPair,
    RedundancyResult,
    ReportEvaluation,
    SectionInfo,
)
from lifesearch_local.reporteval.sections import Section, pair_seed, sample_pairs, split_sections
from serving import ChoiceGroup, Engine

_VALUES = tuple(range(5))


@dataclass
class _Plan:
    item: ReportItem
    result: RedundancyResult
    kept: list[Section]
    truncated_tokens: int = 0


def plan_pairs(item: ReportItem, rcfg: ReportEvalConfig) -> tuple[RedundancyResult, list[Section]]:
    """The report's sections and its sampled pairs (not yet judged)."""
    mode, sections = split_sections(item.report.text)
    kept = [s for s in sections if s.excluded is None]
    r = item.report
    pairs = sample_pairs(len(kept), rcfg.max_pairs, pair_seed(rcfg.seed, r.task_id, r.agent, r.run))
    n = len(kept)
    return RedundancyResult(
        mode=mode,  # type: ignore[arg-type]
        sections=[SectionInfo(title=s.title, chars=len(s.text), excluded=s.excluded) for s in sections],
        possible_pairs=n * (n - 1) // 2,
        pairs=[RedundancyPair(a=a, b=b) for a, b in pairs],
    ), kept


def redundancy_prompt(first: str, second: str) -> str:
    return render("reporteval_redundancy", first=first, second=second)[0]


def parse_redundancy(text: str) -> tuple[int, str] | None:
    """(score 0–4, reason) from the judge's JSON answer, or None."""

    def accept(obj: dict) -> tuple[int, str] | None:
        s = as_int(obj.get("score"), _VALUES)
        return None if s is None else (s, str(obj.get("reason", "")))

    return parse_object(text, accept)


def _choice(backend: Engine, plans: Sequence[_Plan]) -> None:
    # One group per report. Grouping by (report, first section) would put passage A in the
    # shared prefix, but measured on CPU it saved 8% of the tokens and tripled the passes.
    live = [p for p in plans if p.result.pairs]
    groups = [ChoiceGroup(
        key=f"redundancy|{p.item.report.task_id}|{p.item.report.agent}|{p.item.report.run}",
        requests=[user(redundancy_prompt(p.kept[x.a].text, p.kept[x.b].text), SCORE_PREFILL) for x in p.result.pairs],
    ) for p in live]
    results = backend.score_choices(groups, SCORES) if groups else []
    for p, res in zip(live, results):
        p.truncated_tokens = max(r.truncated_tokens for r in res)
        for pair, r in zip(p.result.pairs, res):
            pair.score, pair.label, pair.probs = expected(r.probs, _VALUES), argmax(r.probs), r.probs


def _generate(backend: Engine, cfg: JudgeConfig, plans: Sequence[_Plan]) -> None:
    jobs = [(p, pair) for p in plans for pair in p.result.pairs]
    prompts = [redundancy_prompt(p.kept[x.a].text, p.kept[x.b].text) for p, x in jobs]
    for (p, pair), (parsed, raw, cut) in zip(jobs, generate_parsed_fitted(backend, cfg, prompts, parse_redundancy,
                                                                          max_tokens=cfg.max_tokens)):
        pair.raw = raw
        p.truncated_tokens = max(p.truncated_tokens, cut)
        if parsed is not None:
            pair.score, pair.label, pair.reason = float(parsed[0]), parsed[0], parsed[1]


def judge_redundancy(backend: Engine, cfg: JudgeConfig, rcfg: ReportEvalConfig,
                     items: Sequence[ReportItem]) -> list[ReportEvaluation]:
    """One record per report: the pairs of all reports of the batch go to the engine in one call."""
    plans = [_Plan(it, *plan_pairs(it, rcfg)) for it in items]
    if cfg.mode == "choice":
        _choice(backend, plans)
    else:
        _generate(backend, cfg, plans)
    h = load_template("reporteval_redundancy")[1]
    out = []
    for p in plans:
        p.result.mean = mean([x.score for x in p.result.pairs if x.score is not None])
        note = None if p.result.pairs else "fewer than two sections after leaving out introduction, conclusion and references"
        out.append(evaluation(p.item, cfg, "redundancy", h, seed=rcfg.seed, note=note, truncated_tokens=p.truncated_tokens,
                              redundancy=p.result))
    return out
