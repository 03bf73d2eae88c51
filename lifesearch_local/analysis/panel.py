"""A panel judge: several judges' decisions on the same rubrics combined into one verdict each (pure, no I/O).

Rules (`combine`):
- **majority**: the verdict most graded members gave; an even split (two of four, or one of two
  when a third member left it ungraded) is decided by the members' mean p_true (≥ 0.5:
  satisfied), and left ungraded when no member has a p_true; no graded member: ungraded.
- **mean**: the mean over graded members of p_true (a member without one, generate mode,
  counts its verdict as 1 or 0); satisfied when ≥ 0.5.
The panel's p_true: under **majority**, the share of graded members that said "satisfied" (None when
none graded); under **mean**, the mean the rule thresholds. Why not the mean of the members' p_true for
majority: averaging calibrated members is under-confident (three independent calibrated 0.75 judges:
ECE 0.19 for the mean, 0.06 for the share of yes votes, 0.005 for each member; measured in
tests/analysis/test_panel.py). The share stays honest when members' errors are correlated (ECE 0.08
where pooling their log-odds, exact under independence, reaches 0.09).

With labels, `error_agreement` gives Cohen's κ between every two members' errors (right/wrong on the
labelled decisions): κ well above 0 means they fail on the same rubrics, and a panel of them gains less
than independent members would (`CORRELATED_KAPPA`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean

from lifesearch_local.analysis.labels import Key, fmt_key, key_of
from lifesearch_local.analysis.scoring import judge_name
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import Judgment, Panel, PanelRule

RULES: tuple[PanelRule, ...] = ("majority", "mean")
CORRELATED_KAPPA = 0.2
"""κ of two members' errors above which the panel warns: past "slight" agreement (Landis & Koch), their
mistakes overlap enough that the panel's gain over one member is much less than for independent ones."""


def member_judgments(judgments: Iterable[Judgment], member: str) -> dict[Key, Judgment]:
    """One member's decisions by rubric key: `member` is a judge name (`id`, or `id#k` for a
    repetition); a bare id means its first pass (judge_run 0)."""
    out: dict[Key, Judgment] = {}
    for j in judgments:
        if judge_name(j) != member:
            continue
        k = key_of(j)
        if k in out and (out[k].satisfied, out[k].p_true) != (j.satisfied, j.p_true):
            raise LifesearchError(f"panel member {member!r} gives conflicting decisions for {fmt_key(k)}")
        out[k] = j
    return out


def combine(votes: Sequence[Judgment], rule: PanelRule) -> tuple[bool | None, float | None, bool]:
    """(verdict, p_true, tie) of one decision from its members' judgments (see the module's rules)."""
    graded = [j for j in votes if j.satisfied is not None]
    probs = [j.p_true for j in graded if j.p_true is not None]
    p_mean = fmean(probs) if probs else None
    if rule == "mean":
        if not graded:
            return None, p_mean, False
        p = fmean(j.p_true if j.p_true is not None else float(bool(j.satisfied)) for j in graded)
        return p >= 0.5, p, False
    yes = sum(1 for j in graded if j.satisfied)
    no = len(graded) - yes
    share = yes / len(graded) if graded else None
    if yes != no:
        return yes > no, share, False
    if p_mean is None:  # nothing graded, or a split nothing can break
        return None, share, False
    return p_mean >= 0.5, share, True


def panel_settings(members: Sequence[str], rule: PanelRule, votes: Sequence[dict[Key, Judgment]]) -> str:
    """Hash (16 hex) of the panel's definition and its members' own settings hashes: another
    member, rule or member configuration is another panel."""
    member_settings = [sorted({j.settings or "" for j in v.values()}) for v in votes]
    blob = json.dumps({"members": list(members), "combine": rule, "member_settings": member_settings}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def panel_judgments(judgments: Iterable[Judgment], members: Sequence[str], rule: PanelRule,
                    panel_id: str) -> list[Judgment]:
    """The panel judge `panel_id`'s decisions: one per rubric every member decided, in the first
    member's order, each naming the members, their votes and the rule (`Judgment.panel`).

    Refused (LifesearchError): fewer than two members, a member twice or without judgments, the
    panel id one of the judges already in `judgments`, members that did not all decide the same
    rubrics (a panel over part of them would score those reports on other rubrics), or members
    that read different versions of a rubric (their `rubric_hash`)."""
    js = list(judgments)
    if rule not in RULES:
        raise LifesearchError(f"unknown panel rule {rule!r}; choose from {', '.join(RULES)}")
    if len(members) < 2 or len(set(members)) != len(members):
        raise LifesearchError(f"a panel needs two or more distinct members, got {', '.join(members) or 'none'}")
    names = list(dict.fromkeys(judge_name(j) for j in js))
    if panel_id in {j.judge for j in js} or panel_id in names:
        raise LifesearchError(f"panel id {panel_id!r} is already a judge in these judgments; choose another --id")
    votes = [member_judgments(js, m) for m in members]
    absent = [m for m, v in zip(members, votes) if not v]
    if absent:
        raise LifesearchError(f"no judgments by panel member(s) {', '.join(absent)} (judges found: {', '.join(names)})")
    _same_decisions(members, votes)
    settings = panel_settings(members, rule, votes)
    out = []
    for k, first in votes[0].items():
        row = [v[k] for v in votes]
        satisfied, p_true, tie = combine(row, rule)
        out.append(Judgment(
            task_id=first.task_id, agent=first.agent, run=first.run, rubric_id=first.rubric_id, judge=panel_id,
            satisfied=satisfied, p_true=p_true, settings=settings, rubric_hash=_rubric_hash(k, row),
            truncated_tokens=max(j.truncated_tokens for j in row),
            panel=Panel(members=list(members), combine=rule, votes=[j.satisfied for j in row], tie=tie),
        ))
    return out


def _same_decisions(members: Sequence[str], votes: Sequence[dict[Key, Judgment]]) -> None:
    first = set(votes[0])
    for m, v in zip(members[1:], votes[1:]):
        if set(v) != first:
            only = sorted(first ^ set(v))
            raise LifesearchError(
                f"panel members {members[0]!r} and {m!r} did not decide the same rubrics ({len(only)} differ, e.g. "
                f"{fmt_key(only[0])}); judge the same reports with every member first")


def _rubric_hash(k: Key, row: Sequence[Judgment]) -> str | None:
    hashes = {j.rubric_hash for j in row if j.rubric_hash}
    if len(hashes) > 1:
        raise LifesearchError(f"panel members judged different versions of {fmt_key(k)} (rubric hashes "
                              f"{', '.join(sorted(hashes))}); judge the current tasks with every member")
    return hashes.pop() if hashes else None


def error_agreement(votes: Sequence[dict[Key, Judgment]], members: Sequence[str],
                    labels: Mapping[Key, bool]) -> list[dict]:
    """Cohen's κ between every two members' errors (1 = wrong, ungraded counts as wrong) on the labelled
    decisions all members decided: [{a, b, kappa, n, both_wrong, correlated}] (κ None when undefined)."""
    from lifesearch_local.analysis.agreement import kappa

    keys = [k for k in labels if all(k in v for v in votes)]
    wrong = [[v[k].satisfied != labels[k] for k in keys] for v in votes]
    out = []
    for i, j in itertools.combinations(range(len(members)), 2):
        kap = kappa(wrong[i], wrong[j]) if keys else None
        out.append({"a": members[i], "b": members[j], "kappa": kap, "n": len(keys),
                    "both_wrong": sum(x and y for x, y in zip(wrong[i], wrong[j], strict=True)),
                    "correlated": kap is not None and kap > CORRELATED_KAPPA})
    return out
