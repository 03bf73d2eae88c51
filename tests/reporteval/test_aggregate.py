"""Aggregates on hand-computed cases: support, full-support rate, unverifiable share, quality, redundancy."""

from __future__ import annotations

import pytest

from lifesearch_local.reporteval.aggregate import (
    factuality_stats,
    factuality_summary,
    mean,
    quality_summary,
    redundancy_summary,
    summarize,
    support_stats,
)
from lifesearch_local.reporteval.records import (
    Citation,
    Claim,
    ClaimSource,
    DimensionScore,
    FactualityResult,
    QualityResult,
    RedundancyPair,
    RedundancyResult,
    ReportEvaluation,
)


def claim(*slots: tuple[str, int | None]) -> Claim:
    return Claim(index=0, text="c", citations=[Citation(style="url", url=f"https://x.example/{i}") for i in range(len(slots))],
                 sources=[ClaimSource(url="u", status=st, support=v) for st, v in slots])  # type: ignore[arg-type]


def test_support_stats_by_hand():
    s = support_stats([1, 1, 0, -1], claims=3, unverifiable=2, ungraded=1)
    assert (s.pairs, s.judged, s.unverifiable, s.ungraded) == (7, 4, 2, 1)
    assert s.mean_support == pytest.approx(0.25)  # (1 + 1 + 0 − 1) / 4
    assert s.full_support_rate == pytest.approx(0.5)  # 2 of 4 judged
    assert s.unverifiable_share == pytest.approx(2 / 7)


def test_unverifiable_is_not_unsupported():
    only_unverifiable = support_stats([], claims=2, unverifiable=3)
    assert only_unverifiable.mean_support is None and only_unverifiable.full_support_rate is None
    assert only_unverifiable.unverifiable_share == 1.0
    # Adding unverifiable pairs leaves mean support and full-support rate unchanged.
    assert support_stats([1, -1], claims=2, unverifiable=5).mean_support == support_stats([1, -1], claims=2).mean_support == 0.0


def test_support_stats_empty_and_invalid():
    s = support_stats([], claims=0)
    assert s.pairs == 0 and s.mean_support is None and s.unverifiable_share is None
    with pytest.raises(ValueError):
        support_stats([2], claims=1)


def test_factuality_stats_and_pooled_summary():
    r1 = [claim(("judged", 1), ("judged", -1)), claim(("unverifiable", None))]
    r2 = [claim(("judged", 0)), claim(("judged", 1), ("ungraded", None)), claim(("judged", 1))]
    s1 = factuality_stats(r1)
    assert (s1.claims, s1.pairs, s1.mean_support, s1.full_support_rate) == (2, 3, 0.0, 0.5)
    res = [FactualityResult(claims=r1, stats=s1), FactualityResult(claims=r2, stats=factuality_stats(r2)),
           FactualityResult(claims=[], stats=factuality_stats([]))]
    s = factuality_summary(res)
    # pooled over judged pairs: 1, −1, 0, 1, 1 → mean 2/5, full 3/5; pairs 7, unverifiable 1
    assert s["mean_support"] == pytest.approx(0.4) and s["full_support_rate"] == pytest.approx(0.6)
    assert (s["pairs"], s["unverifiable"], s["ungraded"], s["claims"], s["reports"]) == (7, 1, 1, 5, 3)
    assert s["unverifiable_share"] == pytest.approx(1 / 7)
    assert s["claims_per_report"] == pytest.approx(5 / 3) and s["pairs_per_report"] == pytest.approx(7 / 3)


def quality(*scores: float | None) -> QualityResult:
    names = ("comprehensiveness", "coherence", "clarity", "insightfulness", "overall")
    return QualityResult(dimensions=[DimensionScore(dimension=n, score=s) for n, s in zip(names, scores)])


def test_quality_summary_skips_ungraded():
    s = quality_summary([quality(4, 3, 2, 1, 3), quality(2, 3, 4, 2, 2.5), quality(None, None, None, None, None)])
    assert s["comprehensiveness"] == 3.0 and s["clarity"] == 3.0 and s["overall"] == pytest.approx(2.75)
    assert (s["reports"], s["graded"], s["ungraded"]) == (3, 2, 1)


def redundancy(*scores: float | None) -> RedundancyResult:
    pairs = [RedundancyPair(a=0, b=i + 1, score=s) for i, s in enumerate(scores)]
    return RedundancyResult(mode="headings", sections=[], possible_pairs=len(pairs), pairs=pairs,
                            mean=mean(s for s in scores if s is not None))


def test_redundancy_summary_is_mean_of_report_means():
    s = redundancy_summary([redundancy(4, 2), redundancy(3, 3, 3, None), redundancy()])
    assert s["mean"] == pytest.approx((3 + 3) / 2)  # report means 3 and 3; the report without pairs is counted apart
    assert (s["reports"], s["scored"], s["without_pairs"], s["pairs"], s["ungraded_pairs"]) == (3, 2, 1, 6, 1)


def test_summarize_by_judge_agent_metric_latest_wins():
    def rec(agent: str, q: QualityResult, task: str = "t1") -> ReportEvaluation:
        return ReportEvaluation(task_id=task, agent=agent, judge="j", metric="quality", mode="choice", prompt_hash="h", quality=q)

    out = summarize([rec("a", quality(0, 0, 0, 0, 0)), rec("a", quality(4, 4, 4, 4, 4)), rec("a", quality(2, 2, 2, 2, 2), "t2"),
                     rec("b", quality(1, 1, 1, 1, 1))])
    assert out["j"]["a"]["quality"]["overall"] == 3.0 and out["j"]["a"]["quality"]["reports"] == 2
    assert out["j"]["b"]["quality"]["coherence"] == 1.0


def test_mean():
    assert mean([]) is None and mean([1, 2, 3, 4]) == 2.5
