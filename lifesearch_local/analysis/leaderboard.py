"""Leaderboards from task scores of any source: means with intervals, paired comparisons, groups that cannot be told apart.

Pure: the statistics are resampling.py's (task bootstrap, paired sign-flip, Holm); this module
only decides what is ranked together. Scores stay shares (0–1) inside; the JSON is in points
(× 100). Sources judged by different judges, or scored on different task sets, are ranked
separately unless the caller allows mixing, and the notes say so.
"""

from __future__ import annotations

import statistics
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from lifesearch_local.analysis import resampling as stats
from lifesearch_local.analysis.truncation import AgentCut
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import JudgeIdentity
from lifesearch_local.tasks import named_ids

TOTAL = "total"
"""The dimension of a score that is not one of several (eq. 1, or DRB II's total)."""
UNSTATED = "not stated"
"""How a source that does not name its judge is labelled."""
SCALE = "points: shares × 100 (0–100)"
LOWER_IS_BETTER = frozenset({"blocked"})
"""Dimensions where a lower score is the better one, whatever the command says: DeepResearch Bench
II's `blocked` (agg_scores_blocked.csv: the share of rubrics met only through a blocked source)."""


@dataclass
class ScoreTable:
    """Task scores of agents from one source under one judge on one dimension (what a source reader gives)."""

    source: str
    """Where the scores came from (a path): named in notes, and in agent names when two sources share one."""
    judge: str | None
    """The judge's name (`id`, `id#k` for repetition k); None when the source does not say."""
    dimension: str
    """What the score measures: `total`, or a dimension of it (DRB II: inforecall, analysis, presentation)."""
    scores: dict[str, dict[str, float]]
    """agent → task id → score as a share (0–1); an absent task was not scored."""
    domains: dict[str, str] = field(default_factory=dict)
    """task id → domain (LifeSearch's, or DRB II's theme), for the per-domain tables."""
    judged: dict[str, set[str]] | None = None
    """agent → tasks with any judgment, which pairs are compared on (None: the scored tasks)."""
    means: dict[str, float] | None = None
    """agent → the source's own mean (eq. 1 over runs), so a run directory's numbers are `score`'s;
    None: the mean of the task scores."""
    identity: JudgeIdentity | None = None
    """The judge's fingerprint from the source's manifest, where it has one."""
    cuts: dict[str, AgentCut] | None = None
    """agent → the reports its judge read only part of (a run or judgments source); None: unknown (a published table)."""
    caveat: str | None = None
    """The cut-reports caveat of the source (truncation.cut_caveat), shown with the notes."""

    def tasks(self) -> set[str]:
        """Every task some agent was scored on."""
        return {t for s in self.scores.values() for t in s}


@dataclass
class Ranking:
    """One leaderboard: the agents of some tables on one dimension, ranked with intervals."""

    judge: str
    dimension: str
    sources: list[str]
    agents: list[str]
    """Best mean first."""
    means: dict[str, float]
    uncertainty: stats.ScoreUncertainty
    domain_means: dict[str, dict[str, float]]
    """agent → domain → mean task score there."""
    groups: list[list[str]]
    """Runs of agents (best first) no two of which differ at 0.05 after Holm's adjustment."""
    cuts: dict[str, AgentCut] = field(default_factory=dict)
    """agent → reports its judge cut, for agents from runs or judgments files (none from published tables)."""
    lower_is_better: bool = False
    """Ranked lowest mean first (`--lower-is-better`, or a dimension in LOWER_IS_BETTER); each pair's
    difference is still first − second, so there the better agent's difference is negative."""

    def letters(self) -> dict[str, str]:
        """agent → the letters of the groups it belongs to (`a`, `ab`, …): a shared letter, no shown difference."""
        names = [string.ascii_lowercase[k] if k < 26 else f"g{k}" for k in range(len(self.groups))]
        return {a: "".join(n for n, g in zip(names, self.groups, strict=True) if a in g) for a in self.agents}


@dataclass
class Leaderboard:
    """Every ranking made from the sources, the dimension they lead with, and what was not ranked together."""

    rankings: list[list[Ranking]]
    """Per judge (and task set): its rankings, the chosen dimension first."""
    notes: list[str]
    dimension: str


def select_tasks(tables: Sequence[ScoreTable], ids: set[str]) -> list[ScoreTable]:
    """The tables restricted to `ids` (means recomputed from the kept tasks); an id no source has is an error."""
    unknown = sorted(ids - {t for tab in tables for t in tab.tasks()})
    if unknown:
        raise LifesearchError(f"--task-ids: {len(unknown)} id(s) in no source: {named_ids(ids, unknown)}")
    out = []
    for tab in tables:
        scores = {a: {t: v for t, v in s.items() if t in ids} for a, s in tab.scores.items()}
        judged = None if tab.judged is None else {a: tab.judged.get(a, set()) & ids for a in tab.judged}
        out.append(replace(tab, scores={a: s for a, s in scores.items() if s}, judged=judged, means=None))
    return out


def judge_labels(tables: Sequence[ScoreTable]) -> tuple[list[str], list[str]]:
    """Each table's judge label, and notes: one judge name whose fingerprints differ between sources
    is two judges (labelled by source)."""
    labels = [t.judge or UNSTATED for t in tables]
    notes = []
    first: dict[str, ScoreTable] = {}
    for k, t in enumerate(tables):
        seen = first.setdefault(labels[k], t)
        if seen is t or seen.identity is None or t.identity is None:
            continue
        diffs = seen.identity.differences(t.identity)
        if diffs:
            labels[k] = f"{labels[k]} ({t.source})"
            notes.append(f"judge {t.judge} of {t.source} is not the judge of the same name in {seen.source} "
                         f"({'; '.join(diffs)}): they are two judges")
    return labels, notes


def partition(tables: Sequence[ScoreTable], allow_mixed: bool = False) -> tuple[list[tuple[str, list[ScoreTable]]], list[str]]:
    """(label, tables) to rank together: one per judge and task set, or one in all with `allow_mixed`;
    and notes saying what was kept apart (or mixed)."""
    labels, notes = judge_labels(tables)
    panels: dict[tuple[str, frozenset], list[ScoreTable]] = {}
    for label, t in zip(labels, tables, strict=True):
        panels.setdefault((label, _task_set(t, tables)), []).append(t)
    if len(panels) == 1:
        (label, _), group = next(iter(panels.items()))
        return [(label, group)], notes
    judges = list(dict.fromkeys(label for label, _ in panels))
    if len(judges) > 1:
        how = "ranked together anyway (--allow-mixed)" if allow_mixed else "ranked within each judge (--allow-mixed ranks them together)"
        notes.append(f"{len(judges)} judges ({', '.join(judges)}): a score depends on its judge, so {how}")
    for judge in judges:
        sets = [(k[1], g) for k, g in panels.items() if k[0] == judge]
        if len(sets) > 1:
            sizes = "; ".join(f"{', '.join(dict.fromkeys(t.source for t in g))}: {len(s)}" for s, g in sets)
            shared = len(frozenset.intersection(*(s for s, _ in sets)))
            how = ("ranked together anyway (--allow-mixed): each pair on its shared tasks" if allow_mixed else
                   "ranked separately; --task-ids picks shared tasks, --allow-mixed ranks them together")
            notes.append(f"judge {judge}: the sources were scored on different tasks ({sizes} tasks; {shared} shared): {how}")
    if allow_mixed:
        return [(" + ".join(judges), list(tables))], notes
    out = []
    for (label, _), group in panels.items():
        many = sum(1 for k in panels if k[0] == label) > 1
        out.append((f"{label} ({', '.join(dict.fromkeys(t.source for t in group))})" if many else label, group))
    return out, notes


def _task_set(t: ScoreTable, tables: Sequence[ScoreTable]) -> frozenset:
    """A source's task set: the tasks of all its tables (a source's dimensions share their tasks)."""
    return frozenset().union(*(o.tasks() for o in tables if o.source == t.source))


def merge(tables: Sequence[ScoreTable]) -> tuple[dict, dict, dict, dict, dict]:
    """(scores, judged, domains, means, cuts) of tables ranked together; an agent found in several is
    named by its source (and judge) in each."""
    seen: dict[str, int] = {}
    for t in tables:
        for a in t.scores:
            seen[a] = seen.get(a, 0) + 1
    sources = [t.source for t in tables]
    scores, judged, domains, means, cuts = {}, {}, {}, {}, {}
    for t in tables:
        where = t.source if sources.count(t.source) == 1 else f"{t.source}, {t.judge or UNSTATED}"
        for a, s in t.scores.items():
            name = a if seen[a] == 1 else f"{a} ({where})"
            scores[name] = s
            judged[name] = set(s) if t.judged is None else set(t.judged.get(a, ())) & set(s)
            means[name] = t.means[a] if t.means and a in t.means else statistics.fmean(s.values())
            if t.cuts and a in t.cuts:
                cuts[name] = t.cuts[a]
        domains.update(t.domains)
    return scores, judged, domains, means, cuts


def indistinct_groups(agents: Sequence[str], comparisons: Iterable[stats.Comparison]) -> list[list[str]]:
    """Maximal runs of agents (in rank order) no two of which differ at 0.05 after Holm's
    adjustment; a pair without shared tasks is not shown to differ. Runs may overlap."""
    held = {frozenset((c.a, c.b)) for c in comparisons if c.holds}
    groups: list[list[str]] = []
    end = -1
    j = 0
    for i in range(len(agents)):
        j = max(i, j)  # agents i..j were in the previous run: no pair among them holds
        while j + 1 < len(agents) and all(frozenset((agents[k], agents[j + 1])) not in held for k in range(i, j + 1)):
            j += 1
        if j > end:
            groups.append(list(agents[i:j + 1]))
            end = j
    return groups


def rank(label: str, tables: Sequence[ScoreTable], *, n_resamples: int = stats.DEFAULT_RESAMPLES,
         seed: int = stats.DEFAULT_SEED, lower_is_better: bool = False) -> Ranking:
    """One ranking of the tables' agents (one dimension): best mean first (lowest with
    `lower_is_better`), intervals, pairs, groups."""
    scores, judged, domains, means, cuts = merge(tables)
    sign = 1 if lower_is_better else -1
    order = sorted(scores, key=lambda a: sign * means[a])  # stable: ties keep the sources' order
    u = stats.score_uncertainty({a: scores[a] for a in order}, judged, domains, n_resamples=n_resamples, seed=seed)
    dom_means: dict[str, dict[str, float]] = {}
    for a in order:
        by: dict[str, list[float]] = {}
        for t, v in scores[a].items():
            if t in domains:
                by.setdefault(domains[t], []).append(v)
        dom_means[a] = {d: statistics.fmean(v) for d, v in sorted(by.items())}
    return Ranking(label, tables[0].dimension, list(dict.fromkeys(t.source for t in tables)), order,
                   {a: means[a] for a in order}, u, dom_means, indistinct_groups(order, u.comparisons), cuts,
                   lower_is_better)


def leaderboard(tables: Sequence[ScoreTable], *, dimension: str | None = None, allow_mixed: bool = False,
                n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = stats.DEFAULT_SEED,
                lower_is_better: bool = False) -> Leaderboard:
    """Rank the tables: per judge (and task set) unless `allow_mixed`, per dimension, `dimension` (default
    `total`, else the first found) leading; lowest first with `lower_is_better` and on the dimensions
    of LOWER_IS_BETTER."""
    if not tables:
        raise LifesearchError("no scores in the sources")
    dims = list(dict.fromkeys(t.dimension for t in tables))
    lead = dimension or (TOTAL if TOTAL in dims else dims[0])
    if lead not in dims:
        raise LifesearchError(f"--dimension {lead}: the sources have {', '.join(dims)}")
    groups, notes = partition(tables, allow_mixed)
    notes += list(dict.fromkeys(t.caveat for t in tables if t.caveat))
    for _, group in groups:  # before any resample is drawn; merge() names each table's agents apart
        if too_many := stats.too_many_agents(max(sum(len(t.scores) for t in group if t.dimension == d) for d in dims)):
            raise LifesearchError(too_many)
    out = []
    for label, group in groups:
        mine = [d for d in dict.fromkeys(t.dimension for t in group)]
        mine.sort(key=lambda d: d != lead)
        out.append([rank(label, [t for t in group if t.dimension == d], n_resamples=n_resamples, seed=seed,
                         lower_is_better=lower_is_better or d in LOWER_IS_BETTER) for d in mine])
    return Leaderboard(out, notes, lead)


# -- JSON ------------------------------------------------------------------------------------
def _points(ci: Sequence[float] | None) -> list[float] | None:
    got = stats.interval(ci)
    return None if got is None else [100 * got[0], 100 * got[1]]


def _mean_json(mean: float, ci: Sequence[float] | None, why: str | None, n: int) -> dict:
    return {"mean": 100 * mean, "ci95": _points(ci), "ci95_reason": why, "n_tasks": n}


def ranking_json(r: Ranking) -> dict:
    """One ranking in points, with `score --json`'s field names: agents.<name>.{mean, ci95, n_tasks}, comparisons."""
    u, letters = r.uncertainty, r.letters()
    agents = {a: {"rank": k + 1, **_mean_json(r.means[a], u.ci95[a], u.ci_reason.get(a), u.n_tasks[a]),
                  "group": letters[a], **({"truncation": r.cuts[a].as_json()} if a in r.cuts else {})}
              for k, a in enumerate(r.agents)}
    comps = []
    for c in u.comparisons:
        row = c.as_json()
        row["diff"] = None if row["diff"] is None else 100 * row["diff"]
        row["ci95"] = _points(c.ci95)
        comps.append(row)
    domains: dict[str, dict] = {}
    for a in r.agents:
        for d, m in r.domain_means[a].items():
            domains.setdefault(d, {})[a] = _mean_json(m, u.domain_ci95[a].get(d), u.domain_ci_reason.get(a, {}).get(d),
                                                      u.domain_n_tasks[a].get(d, 0))
    return {"judge": r.judge, "dimension": r.dimension, "better": "lower" if r.lower_is_better else "higher",
            "sources": r.sources, "agents": agents, "comparisons": comps,
            "groups": r.groups, "domains": {d: domains[d] for d in sorted(domains)}, "bootstrap": u.settings()}


def leaderboard_json(lb: Leaderboard) -> dict:
    """One judge: its leading ranking at the top level, other dimensions under `dimensions`; several:
    {"judges": {label: …}}. Always `scale` and `notes`."""
    per = {}
    for rankings in lb.rankings:
        entry = ranking_json(rankings[0])
        if len(rankings) > 1:
            entry["dimensions"] = {r.dimension: ranking_json(r) for r in rankings[1:]}
        per[rankings[0].judge] = entry
    head = {"scale": SCALE, "notes": lb.notes}
    return {**head, **next(iter(per.values()))} if len(per) == 1 else {**head, "judges": per}
