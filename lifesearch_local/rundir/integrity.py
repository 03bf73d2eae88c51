"""Whether a run's recorded judge settings still agree with its judgments: what a replay checks before vouching."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from lifesearch_local.records import Judgment
from lifesearch_local.rundir.manifest import settings_hash

DEFAULT_THRESHOLD = 0.5  # the judge config's default; a recorded choice config always names its own


def judge_settings_problems(manifest: Mapping[str, Any], judgments: Iterable[Judgment]) -> list[str]:
    """One line per recorded judge whose settings disagree with the run's own records: its
    `stage_configs` entry hashing to other than the manifest's `resume/judge/<id>` or the
    `settings` its judgments carry, or (choice mode) a judgment whose `satisfied` is not
    `p_true ≥ threshold`. A manifest edited after judging shows here; [] when all agree."""
    by_judge: dict[str, list[Judgment]] = defaultdict(list)
    for j in judgments:
        by_judge[j.judge].append(j)
    out: list[str] = []
    for stage, settings in (manifest.get("stage_configs") or {}).items():
        if not stage.startswith("judge/") or not isinstance(settings, Mapping):
            continue
        jid, now = stage.removeprefix("judge/"), settings_hash(dict(settings))
        recorded = (manifest.get("hashes") or {}).get(f"resume/{stage}")
        if recorded is not None and recorded != now:
            out.append(f"judge {jid}: its settings in stage_configs hash to {now}, but the manifest recorded "
                       f"{recorded} when it judged (edited since)")
            continue
        accepted = set(((manifest.get("stages") or {}).get(stage) or {}).get("settings_accepted") or [])
        rows = by_judge.get(jid, [])
        other = Counter(j.settings for j in rows if j.settings is not None and j.settings != now
                        and j.settings not in accepted)
        if other:
            what = ", ".join(f"{n} with {h}" for h, n in sorted(other.items()))
            out.append(f"judge {jid}: its judgments were made with other settings ({what}) than stage_configs "
                       f"records ({now})")
            continue
        out += _inconsistent_verdicts(jid, settings, [j for j in rows if j.settings == now])
    return out


def _inconsistent_verdicts(jid: str, settings: Mapping[str, Any], rows: list[Judgment]) -> list[str]:
    """Choice mode: each model decision's verdict is `p_true ≥ threshold`; any other was edited."""
    if settings.get("mode", "choice") != "choice":
        return []
    threshold = settings.get("threshold", DEFAULT_THRESHOLD)
    if not isinstance(threshold, int | float):
        return [f"judge {jid}: its recorded threshold {str(threshold)[:20]!r} is not a number"]
    bad = [j for j in rows if j.panel is None and j.p_true is not None and j.satisfied is not None
           and j.satisfied != (j.p_true >= threshold)]
    if not bad:
        return []
    first = bad[0]
    return [f"judge {jid}: {len(bad)} judgment(s) say satisfied where p_true and the recorded threshold "
            f"{threshold} say otherwise (first: {first.task_id}|{first.agent}|{first.run} rubric "
            f"{first.rubric_id}: p_true {first.p_true:.4g}, satisfied {first.satisfied})"]
