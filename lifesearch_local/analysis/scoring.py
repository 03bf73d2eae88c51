"""The paper's score (eq. 1) and its aggregates: pure functions, no I/O."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from lifesearch_local.errors import IncompleteRunError, LifesearchError
from lifesearch_local.records import Domain, Judgment, Report, Rubric, Task


def task_score(rubrics: Sequence[Rubric], satisfied: Mapping[str, bool | None]) -> float:
    """s_q = Σ w·y / Σ w over rubrics with w > 0; an absent or null decision counts as y = 0."""
    total = sum(r.weight for r in rubrics if r.weight > 0)
    if total <= 0:
        raise LifesearchError("a task needs a positive total rubric weight")
    got = sum(r.weight for r in rubrics if r.weight > 0 and satisfied.get(r.id) is True)
    return got / total


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (n − 1); the std is None for a single value."""
    if not values:
        return math.nan, None
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) if len(values) > 1 else None)


@dataclass
class AgentScore:
    """One row of the Table 4 layout: an agent's scores under one judge."""

    agent: str
    runs: dict[int, float]
    overall_mean: float
    overall_std: float | None
    domains: dict[str, float]
    tasks: dict[str, float]
    ungraded: int = 0
    missing: int = 0
    judged: int = 0
    iterations: float | None = None
    output_tokens: float | None = None
    tool_calls: float | None = None
    """Tool calls per report (mean over the agent's reports that record them; 0: no research at all)."""
    pages_read: float | None = None
    """Pages fetched per report (mean, as tool_calls)."""
    extra: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {
            "overall_mean": self.overall_mean,
            "overall_std": self.overall_std,
            "runs": [self.runs[r] for r in sorted(self.runs)],
            "run_ids": sorted(self.runs),
            "domains": self.domains,
            "tasks": self.tasks,
            "ungraded": self.ungraded,
            "missing": self.missing,
            "judged": self.judged,
            "iterations": self.iterations,
            "output_tokens": self.output_tokens,
            "tool_calls": self.tool_calls,
            "pages_read": self.pages_read,
        }


def judge_name(j: Judgment) -> str:
    """How a (judge, judge_run) pair is named in score tables."""
    return j.judge if j.judge_run == 0 else f"{j.judge}#{j.judge_run}"


def split_by_judge(judgments: Iterable[Judgment]) -> dict[str, list[Judgment]]:
    """Group judgments by judge name, in order of first appearance."""
    out: dict[str, list[Judgment]] = defaultdict(list)
    for j in judgments:
        out[judge_name(j)].append(j)
    return dict(out)


def _decisions(tasks: Mapping[str, Task], judgments: Sequence[Judgment]) -> dict[str, dict[int, dict[str, dict]]]:
    """agent → run → task → rubric → decision, checking ids and conflicting duplicates."""
    out: dict[str, dict[int, dict[str, dict[str, bool | None]]]] = {}
    for j in judgments:
        task = tasks.get(j.task_id)
        if task is None:
            raise LifesearchError(f"judgment for unknown task {j.task_id!r}: is this the tasks file that was judged?")
        if j.rubric_id not in {r.id for r in task.rubrics}:
            raise LifesearchError(f"judgment for unknown rubric {j.rubric_id!r} of task {j.task_id!r}")
        slot = out.setdefault(j.agent, {}).setdefault(j.run, {}).setdefault(j.task_id, {})
        if j.rubric_id in slot and slot[j.rubric_id] != j.satisfied:
            raise LifesearchError(
                f"conflicting judgments for {j.agent}/run {j.run}/{j.task_id}/{j.rubric_id} by {judge_name(j)}"
            )
        slot[j.rubric_id] = j.satisfied
    return out


def score_agents(
    tasks: Sequence[Task],
    judgments: Sequence[Judgment],
    *,
    allow_missing: bool = False,
    reports: Sequence[Report] = (),
) -> dict[str, AgentScore]:
    """Score every agent found in the judgments of ONE judge over all `tasks`.

    Each run of an agent is scored over the whole task list (equal weight per task). A
    rubric with positive weight and no judgment makes the run incomplete: an error unless
    `allow_missing`, in which case it counts as not satisfied and is counted in `missing`.
    """
    decisions = _decisions({t.id: t for t in tasks}, judgments)
    rows = {agent: _score_agent(agent, runs, tasks) for agent, runs in decisions.items()}
    if not allow_missing and any(r.missing for r in rows.values()):
        raise incomplete(tasks, decisions)
    for agent, row in rows.items():
        mine = [j for j in judgments if j.agent == agent]
        row.ungraded, row.judged = sum(1 for j in mine if j.satisfied is None), len(mine)
    _attach_resources(rows, reports)
    return dict(sorted(rows.items(), key=lambda kv: -kv[1].overall_mean))


def score_runs(agent: str, runs: Mapping[int, Mapping[str, Mapping[str, bool | None]]],
               tasks: Sequence[Task]) -> AgentScore:
    """score_agents' row of one agent from its decisions already indexed run → task → rubric → decision (ids
    known to be in `tasks`), a missing rubric counting as not satisfied; judged and ungraded counted."""
    row = _score_agent(agent, runs, tasks)
    flat = [d for got in runs.values() for rubrics in got.values() for d in rubrics.values()]
    row.ungraded, row.judged = sum(1 for d in flat if d is None), len(flat)
    return row


def incomplete(tasks: Sequence[Task], decisions: Mapping[str, Mapping[int, Mapping[str, Mapping]]]) -> IncompleteRunError:
    """The error of a run with unjudged rubrics: first the tasks every agent's runs were fully judged
    on (`complete_tasks`, what --task-ids should score), then what --allow-missing would compute."""
    gaps = [(a, run, t.id, r.id) for a, runs in decisions.items() for run in sorted(runs) for t in tasks
            for r in t.rubrics if r.weight > 0 and r.id not in runs[run].get(t.id, {})]
    agent, run, tid, rid = gaps[0]
    head = (f"incomplete run: {len(gaps)} rubric(s) have no judgment (first: agent {agent!r}, run {run}, task {tid}, "
            f"rubric {rid})")
    err = IncompleteRunError(head, complete=complete_tasks(tasks, decisions), n_tasks=len(tasks))
    err.args = (incomplete_advice(err),)
    return err


MAX_IDS_INLINE = 20
"""Most task ids an error spells out after --task-ids; past it, --task-ids-file."""


def incomplete_advice(e: IncompleteRunError, command: str | None = None) -> str:
    """`e`'s message: the judged subset first (as `command --task-ids …` when given the command that
    failed), then what --allow-missing computes."""
    done = e.complete
    how = (f"--task-ids {','.join(done)}" if len(done) <= MAX_IDS_INLINE else
           "--task-ids-file FILE (FILE listing them, one per line)")
    subset = (f"{len(done)} of {e.n_tasks} tasks were judged in full; score only those: "
              f"{f'{command} {how}' if command else how}; " if done else "")
    return (f"{e.head}; {subset}--allow-missing instead counts every unjudged rubric as not satisfied (a score "
            f"over all {e.n_tasks} tasks, the unjudged ones as 0); or judge the rest")


def complete_tasks(tasks: Sequence[Task], decisions: Mapping[str, Mapping[int, Mapping[str, Mapping]]]) -> list[str]:
    """Ids of the tasks (in file order) on which every run of every agent has a decision for every rubric with w > 0."""
    return [t.id for t in tasks if all(r.id in runs[run].get(t.id, {}) for runs in decisions.values() for run in runs
                                       for r in t.rubrics if r.weight > 0)]


def _score_agent(agent: str, runs: Mapping[int, Mapping[str, Mapping[str, bool | None]]], tasks: Sequence[Task]) -> AgentScore:
    """One agent: run-level scores, their mean ± sample std, per-domain and per-task means."""
    run_scores: dict[int, float] = {}
    per_task: dict[str, list[float]] = defaultdict(list)
    per_domain: dict[Domain, list[float]] = defaultdict(list)
    missing: list[tuple[int, str, str]] = []
    for run in sorted(runs):
        dom_run: dict[Domain, list[float]] = defaultdict(list)
        for task in tasks:
            got = runs[run].get(task.id, {})
            missing += [(run, task.id, r.id) for r in task.rubrics if r.weight > 0 and r.id not in got]
            s = task_score(task.rubrics, got)
            per_task[task.id].append(s)
            dom_run[task.domain].append(s)
        run_scores[run] = statistics.fmean(per_task[t.id][-1] for t in tasks)
        for d, vals in dom_run.items():
            per_domain[d].append(statistics.fmean(vals))
    mean, std = mean_std([run_scores[r] for r in sorted(run_scores)])
    order = list(Domain)
    return AgentScore(
        agent=agent, runs=run_scores, overall_mean=mean, overall_std=std,
        domains={d.value: statistics.fmean(v) for d, v in sorted(per_domain.items(), key=lambda kv: order.index(kv[0]))},
        tasks={tid: statistics.fmean(v) for tid, v in per_task.items()},
        missing=len(missing),
    )


def _attach_resources(rows: dict[str, AgentScore], reports: Sequence[Report]) -> None:
    """Per-report means of iterations, output tokens (Table 4's resource columns), tool calls and pages read."""
    for agent, row in rows.items():
        mine = [r for r in reports if r.agent == agent]
        for name in ("iterations", "output_tokens", "tool_calls", "pages_read"):
            values = [v for r in mine if (v := getattr(r, name)) is not None]
            setattr(row, name, statistics.fmean(values) if values else None)


def score_by_judge(
    tasks: Sequence[Task],
    judgments: Sequence[Judgment],
    *,
    judge: str | None = None,
    allow_missing: bool = False,
    reports: Sequence[Report] = (),
) -> dict[str, dict[str, AgentScore]]:
    """judge name → agent → score; `judge` keeps one judge id (all its repetitions) or one name."""
    groups = split_by_judge(judgments)
    if judge is not None:
        groups = {k: v for k, v in groups.items() if k == judge or v[0].judge == judge}
        if not groups:
            raise LifesearchError(f"no judgments by judge {judge!r} (found: {', '.join(split_by_judge(judgments))})")
    return {
        name: score_agents(tasks, js, allow_missing=allow_missing, reports=reports) for name, js in groups.items()
    }


def uncertainty_by_judge(
    tasks: Sequence[Task], judgments: Sequence[Judgment], by_judge: Mapping[str, Mapping[str, AgentScore]], *,
    n_resamples: int | None = None, seed: int | None = None,
) -> dict:
    """judge name → stats.ScoreUncertainty: 95% task-bootstrap CIs per agent (overall and per domain)
    and the paired comparisons of every agent pair over the tasks both were judged on."""
    from lifesearch_local.analysis import resampling as stats

    groups = split_by_judge(judgments)
    domains = {t.id: t.domain.value for t in tasks}
    out = {}
    for name, rows in by_judge.items():
        if too_many := stats.too_many_agents(len(rows)):
            raise LifesearchError(f"judge {name}: {too_many}")
        judged: dict[str, set[str]] = defaultdict(set)
        for j in groups.get(name, ()):
            judged[j.agent].add(j.task_id)
        out[name] = stats.score_uncertainty(
            {a: r.tasks for a, r in rows.items()}, judged, domains,
            n_resamples=stats.DEFAULT_RESAMPLES if n_resamples is None else n_resamples,
            seed=stats.DEFAULT_SEED if seed is None else seed,
        )
    return out


def scores_json(by_judge: dict, uncertainty: Mapping | None = None) -> dict:
    """One judge: {"judge", "agents"}; several: {"judges": {name: {"judge", "agents"}}}. With
    `uncertainty` (uncertainty_by_judge), each agent gets `ci95` and `domain_ci95` (null where there is no
    interval, with the reason in `ci95_reason` / `domain_ci95_reason`), `n_tasks` and `domain_n_tasks`,
    and each judge `comparisons` and `bootstrap` (method, seed, resamples)."""
    from lifesearch_local.analysis.resampling import interval

    per = {}
    for name, rows in by_judge.items():
        agents = {a: s.as_json() for a, s in rows.items()}
        u = (uncertainty or {}).get(name)
        entry: dict = {"judge": name, "agents": agents}
        if u is not None:
            for a, row in agents.items():
                row["ci95"], row["ci95_reason"] = interval(u.ci95.get(a)), u.ci_reason.get(a)
                row["n_tasks"] = u.n_tasks.get(a)
                row["domain_ci95"] = {d: interval(c) for d, c in u.domain_ci95.get(a, {}).items()}
                row["domain_ci95_reason"] = u.domain_ci_reason.get(a, {})
                row["domain_n_tasks"] = u.domain_n_tasks.get(a, {})
            entry["comparisons"] = [c.as_json() for c in u.comparisons]
            entry["bootstrap"] = u.settings()
        per[name] = entry
    return next(iter(per.values())) if len(per) == 1 else {"judges": per}

