"""The estimate of a run config or a `judge` invocation: `estimate`, `run --dry-run`, `judge --dry-run`, and a run's own.

Plans every phase the command would run from the same files (estimate/plan.py), finds each
engine's profile (stored, or calibrated now: estimate/calibrate.py), and adds up time, memory and GPU-hours
(estimate/cost.py). Nothing is written but profiles; a run directory is read, never created.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lifesearch_local.agent.config import AgentConfig
from lifesearch_local.errors import LifesearchError
from lifesearch_local.estimate.calibrate import (
    ChoiceSample,
    EngineProfile,
    GenerateSample,
    SessionProfile,
    calibrate_engine,
    engine_key,
    load_profile,
    machine,
    profile_path,
    session_calibration,
    session_key,
)
from lifesearch_local.estimate.cost import (
    Calibrate,
    Estimate,
    PhaseEstimate,
    Seconds,
    _cuda,
    judge_devices,
    memory_estimate,
    model_device,
    model_shape,
    phase_gpus,
    phase_memory_gib,
    phase_seconds,
)
from lifesearch_local.estimate.devices import (
    DEFAULT_DEVICE,
    DEFAULT_MFU,
    STARTUP_S,
    GpuAssumption,
    analytic_assumptions,
    analytic_seconds,
)
from lifesearch_local.estimate.plan import (
    PhasePlan,
    agent_plan,
    judge_plan,
    placeholder_reports,
    reporteval_plan,
)
from lifesearch_local.estimate.work import Shape
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.reporteval.config import ReportEvalConfig
from serving import ModelConfig, RayConfig

if TYPE_CHECKING:
    from lifesearch_local.rundir.directory import RunDir

log = logging.getLogger(__name__)
PHASES = ("agent", "judge", "reporteval")
# Agent runs an estimate plans one by one (each a stand-in report for the judge phases); more are refused.
MAX_AGENT_RUNS = 1_000_000


class RunConfig(Protocol):
    """What the estimate reads of a run's config (lifesearch_local.run.config.RunConfig: `run` sits above the
    estimate and records its own estimate, so the estimate names the fields instead of importing the class)."""

    tasks: str
    task_ids: list[str] | None
    runs: int
    reports: str | None
    agents: list[AgentConfig]
    ray: RayConfig | None
    reporteval: ReportEvalConfig | None

    def all_judges(self) -> list[JudgeConfig]: ...

    def out_dir(self) -> str: ...


class _Shapes:
    """Each model's Shape, loaded once."""

    def __init__(self, local_only: bool):
        self.local_only = local_only
        self.by_model: dict[str, Shape | None] = {}

    def __call__(self, model: ModelConfig) -> Shape | None:
        key = model.model_dump_json()
        if key not in self.by_model:
            self.by_model[key] = model_shape(model, local_only=self.local_only)
        return self.by_model[key]


def estimate_run(cfg: RunConfig, *, phases: Sequence[str] = PHASES, calibrate: Calibrate = "auto",
                 local_only: bool = True, today: dt.date | None = None, fresh: bool = False,
                 gpu: GpuAssumption | None = None) -> Estimate:
    """What `lifesearch run` (its `phases`) would do with `cfg` now: the pending work of its run directory
    if one exists (read, never created) and not `fresh` (as `--fresh` deletes it first), else all of it."""
    from lifesearch_local.reporteval.records import ReportEvaluation
    from lifesearch_local.reporteval.stage import report_items
    from lifesearch_local.rundir.directory import JUDGMENTS, REPORTEVAL, REPORTS, RunDir
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks, select_tasks

    tasks = select_tasks(load_tasks(cfg.tasks), cfg.task_ids)
    ids = {t.id for t in tasks}
    rd = RunDir(cfg.out_dir()) if Path(cfg.out_dir()).is_dir() and not fresh else None
    reports = _unique(rd.load(REPORTS, Report) if rd else [],
                      [r for r in read_records(cfg.reports, Report) if r.task_id in ids] if cfg.reports else [])
    shapes, plans, unwritten = _Shapes(local_only), [], set()
    if "agent" in phases:
        from lifesearch_local.agent.stage import pending_runs

        _bounded(len(tasks), cfg.runs, len(cfg.agents))
        for agent in cfg.agents:
            pending = pending_runs({r.key for r in reports}, tasks, agent, cfg.runs)
            plans.append(agent_plan(agent, pending, shapes(agent.model), today))
            future = placeholder_reports(pending, agent)
            reports += future
            unwritten |= {r.key for r in future}
    done = {j.key for j in rd.load(JUDGMENTS, Judgment)} if rd else set()
    if "judge" in phases:
        plans += [judge_plan(j, tasks, reports, done, shapes(j.model)) for j in cfg.all_judges()]
    if cfg.reporteval is not None and "reporteval" in phases:
        recorded = {r.key for r in rd.load(REPORTEVAL, ReportEvaluation)} if rd else set()
        items = report_items(reports, tasks)
        plans += [reporteval_plan(j, cfg.reporteval, items, recorded, shapes(j.model), unwritten) for j in cfg.all_judges()]
    devices = [d for d in (model_device(p.model) for p in plans if p.needs_model) if d != "remote"]
    remote = cfg.ray is not None and cfg.ray.address is not None
    return _estimate("run", plans, shapes, cfg.ray, calibrate, devices, remote, gpu)


def estimate_judge(rd: RunDir | None, tasks: Sequence[Task], reports: Sequence[Report], judges: Sequence[JudgeConfig],
                   *, ray: RayConfig | None = None, calibrate: Calibrate = "auto", local_only: bool = True,
                   gpu: GpuAssumption | None = None) -> Estimate:
    """What `lifesearch judge` would do now: every judge over the reports, less what the run directory `rd` already
    holds (None: there is none yet). A run passes the directory it holds locked; a dry run its OUT, if it exists."""
    from lifesearch_local.rundir.directory import JUDGMENTS

    done = {j.key for j in rd.load(JUDGMENTS, Judgment)} if rd is not None else set()
    shapes = _Shapes(local_only)
    plans = [judge_plan(j, tasks, reports, done, shapes(j.model)) for j in judges]
    remote = ray is not None and ray.address is not None
    return _estimate("judge", plans, shapes, ray, calibrate, judge_devices(judges), remote, gpu)


def _bounded(tasks: int, runs: int, agents: int) -> None:
    """Refuse, in one line, more agent runs than the estimate enumerates (each is a report the judge phases plan)."""
    n = tasks * runs * agents
    if n > MAX_AGENT_RUNS:
        raise LifesearchError(f"estimate: {tasks:,} task(s) × {runs:,} run(s) × {agents} agent(s) = {n:,} agent runs, "
                              f"more than the {MAX_AGENT_RUNS:,} an estimate plans; lower `runs` or select tasks")


def _unique(*lists: Sequence[Report]) -> list[Report]:
    """Reports by key, the first of each (the run directory's before the imported ones)."""
    seen: dict[tuple, Report] = {}
    for rs in lists:
        for r in rs:
            seen.setdefault(r.key, r)
    return list(seen.values())


def _estimate(command: str, plans: list[PhasePlan], shapes: _Shapes, ray: RayConfig | None, calibrate: Calibrate,
              devices: Sequence[str], remote: bool, gpu: GpuAssumption | None = None) -> Estimate:
    named = gpu is not None
    gpu = gpu or GpuAssumption(DEFAULT_DEVICE, DEFAULT_MFU)
    analytic = {p.name for p in plans if is_analytic(p, shapes(p.model), named)}
    profiles, session, notes = _profiles([p for p in plans if p.name not in analytic], ray, calibrate)
    phases: dict[str, PhaseEstimate] = {}
    ray_start = session.ray_start_s if session and ray else 0.0
    for plan in plans:
        prof, basis = profiles.get(plan.name, (None, "no model loaded: nothing left to do"))
        if plan.name in analytic:
            lo, mid, hi = analytic_seconds(plan, shapes(plan.model), gpu, ray.replicas if ray else 1)
            secs, basis = Seconds(estimate=mid, low=lo, high=hi), f"analytic, on the assumed {gpu.dev.label}"
        else:
            first_ray = ray is not None and plan.needs_model and ray_start and plan.model.backend != "openai"
            secs = phase_seconds(plan, prof, ray, extra_s=ray_start if first_ray else 0.0)
            if first_ray:
                ray_start = 0.0  # Ray starts with the first pool
        phases[plan.name] = _phase(plan, shapes(plan.model), prof, basis, secs, ray)
        if plan.name in analytic:
            phases[plan.name].assumptions += analytic_assumptions(shapes(plan.model))
    busy = _widen_for_load(phases, {p.name for p in plans if p.needs_model and model_device(p.model) == "cpu"
                                    and p.name not in analytic}, notes)
    parts = [p.seconds for p in phases.values()]
    start = (session.startup_s,) * 3 if session else STARTUP_S
    assumed = session is None and all(s is not None for s in parts)  # every phase has a time: only start-up missing
    if assumed:
        notes.append(f"start-up assumed {STARTUP_S[1]:g} s ({STARTUP_S[0]:g}–{STARTUP_S[2]:g} s): no session "
                     "profile measured here")
    finish = session.ray_stop_s if session and ray else 0.0
    est = Estimate(command=command, phases=phases, startup_seconds=start[1] if session or assumed else None,
                   finish_seconds=finish, gpu_hours=round(sum(p.gpu_hours or 0.0 for p in phases.values()), 4),
                   memory=memory_estimate(phases, devices, remote), load_average=[round(x, 2) for x in os.getloadavg()],
                   busy=busy, device=gpu.record() if analytic else None, notes=notes)
    if analytic:
        assumed_memory(est, gpu, [phases[n] for n in analytic])
    if all(s is not None for s in parts) and est.startup_seconds is not None:
        est.total_seconds = round(start[1] + finish + sum(s.estimate for s in parts), 2)  # type: ignore[union-attr]
        est.total_low_seconds = round(start[0] + finish + sum(s.low for s in parts), 2)  # type: ignore[union-attr]
        est.total_high_seconds = round(start[2] + finish + sum(s.high for s in parts), 2)  # type: ignore[union-attr]
    return est


def is_analytic(plan: PhasePlan, shape: Shape | None, named: bool) -> bool:
    """Whether a phase is priced on an assumed GPU: it computes on a GPU, its model's shape is known, and either
    this machine has none or a device was named."""
    if not plan.needs_model or plan.model.backend == "openai" or shape is None or shape.arch is None:
        return False
    return model_device(plan.model) == "cuda" and (named or not _cuda())


def assumed_memory(est: Estimate, gpu: GpuAssumption, phases: Sequence[PhaseEstimate]) -> None:
    """The GPU phases' memory against the assumed device's (its memory times the GPUs a phase holds)."""
    fits = [p.memory_gib <= gpu.dev.memory_gib * max(1.0, p.gpus) for p in phases if p.memory_gib is not None]
    est.memory = est.memory.model_copy(update={"free_gib": gpu.dev.memory_gib, "device": f"{gpu.dev.label} (assumed)",
                                               "fits": all(fits) if fits else None})


def _widen_for_load(phases: dict[str, PhaseEstimate], cpu: set[str], notes: list[str]) -> str | None:
    """On a machine busier than the engine's threads allow, each local phase's high end times the slowdown a
    shared core can cause (serving._util.threads.slowdown); the line saying so, or None."""
    from serving import contention

    now = contention()
    line = now.line()
    if line is None:
        return None
    for name in cpu:
        secs = phases[name].seconds
        if secs is not None:
            secs.high = round(secs.high * now.factor, 2)
    if cpu:
        notes.append(f"the high ends of CPU phases are widened {now.factor:g}× for the load now")
    return line if cpu else None


def _phase(plan: PhasePlan, shape: Shape | None, prof: EngineProfile | None, basis: str, secs: Any,
           ray: RayConfig | None) -> PhaseEstimate:
    units = [(u, n) for call, n in plan.weighted() for u in call]
    tokens = prompt = output = None
    if plan.agent is not None and plan.agent.first:
        n = plan.agent.calls_per_run[1]
        prompt = n * sum(u.prompt_tokens for u in plan.agent.first)
        output = n * plan.agent.output_tokens[1] * len(plan.agent.first)
        tokens = prompt + output
    elif units or (shape is not None and shape.countable):
        tokens, prompt = sum(n * u.tokens for u, n in units), sum(n * u.prompt_tokens for u, n in units)
        output = sum(n * u.steps * u.rows for u, n in units) or None
    gpus = phase_gpus(plan.model, ray) if plan.needs_model else 0.0
    return PhaseEstimate(kind=plan.kind, model=plan.model.model, runs=plan.runs, decisions=plan.decisions,  # type: ignore[arg-type]
                         decisions_per_repetition=plan.per_repetition, records=plan.records, requests=plan.requests,
                         tokens=tokens, prompt_tokens=prompt, output_tokens=output, seconds=secs, gpus=gpus,
                         gpu_hours=round(gpus * secs.estimate / 3600, 4) if secs is not None else None,
                         memory_gib=phase_memory_gib(plan, shape, ray), basis=basis if plan.needs_model else
                         "no model loaded: nothing left to do", assumptions=plan.assumptions)


def _complete(prof: EngineProfile | None, need: dict[str, Any]) -> bool:
    """Whether a stored profile has every measurement the phases need."""
    if prof is None:
        return False
    return (need["choice"] is None or bool(prof.choice_s)) and (need["generate"] is None or prof.step_s is not None)


def _profiles(plans: list[PhasePlan], ray: RayConfig | None, calibrate: Calibrate
              ) -> tuple[dict[str, tuple[EngineProfile | None, str]], SessionProfile | None, list[str]]:
    """Each phase's profile and where it came from; the session's; notes. Missing (or all, with
    "always") are calibrated now unless `calibrate` is "never"."""
    live = [p for p in plans if p.needs_model]
    where = machine()
    if not live:  # nothing to compute: the command still starts and stops
        return {}, load_profile(SessionProfile, session_key(None, where)), []
    needs: dict[str, dict[str, Any]] = {}
    for p in live:
        key = engine_key(p.model, ray, where)
        need = needs.setdefault(key, {"model": p.model, "choice": None, "generate": None, "phase": p.name})
        kind = "choice" if isinstance(p.sample, ChoiceSample) else "generate" if isinstance(p.sample, GenerateSample) else None
        if kind and need[kind] is None:
            need[kind] = p.sample
    found = {k: load_profile(EngineProfile, k) for k in needs}
    todo = [k for k in needs if calibrate == "always" or (calibrate == "auto" and not _complete(found[k], needs[k]))]
    session_ray = ray if any(p.model.backend != "openai" for p in live) else None
    session = load_profile(SessionProfile, session_key(session_ray, where))
    basis = {k: (f"stored profile {profile_path(k)} measured {p.measured_at} (load {p.load_average[0]}, "
                 f"{p.where})" if p else "no profile: `lifesearch estimate` calibrates one") for k, p in found.items()}
    notes = []
    if todo or (calibrate == "always") or (session is None and calibrate != "never"):
        with session_calibration(session_ray) as session:
            for k in todo:
                n = needs[k]
                found[k] = calibrate_engine(n["model"], ray, phase=n["phase"], choice=n["choice"], generate=n["generate"])
                basis[k] = (f"calibrated now (load {found[k].load_average[0]}, {found[k].where}; "  # type: ignore[union-attr]
                            f"kept as {profile_path(k)})")
        notes.append(f"calibrated now: {len(todo)} engine(s) and the session (interpreter start"
                     f"{', Ray' if session_ray else ''})")
    if session is None:
        notes.append("no session profile: start-up time unknown (`lifesearch estimate` calibrates one)")
    by_phase = {p.name: (found[engine_key(p.model, ray, where)], basis[engine_key(p.model, ray, where)]) for p in live}
    return by_phase, session, notes


def record_run_estimate(rd: Any, cfg: RunConfig, phases: Sequence[str], today: dt.date | None) -> Estimate | None:
    """A run's own estimate at its start (stored profiles only: no model is loaded for it), in the manifest
    beside which the run's end writes what it actually took; None (logged) when it cannot be made."""
    return record_estimate(rd, "run", lambda: estimate_run(cfg, phases=phases, calibrate="never", local_only=True, today=today))


@contextlib.contextmanager
def recorded_estimate(rd: Any, what: str, make: Callable[[], Estimate]) -> Iterator[dict[str, dict[str, Any]]]:
    """A block of work with its estimate in the manifest: `make()`, the estimate of this `what`, made and recorded
    as the block starts (`record_estimate`), and as it ends what the block took (`record_actual`): its wall
    seconds, and the stats of each stage it puts in the dict it gets. A block that raises records no actual figures."""
    t0 = time.perf_counter()
    est, stages = record_estimate(rd, what, make), {}
    yield stages
    record_actual(rd, est, stages, round(time.perf_counter() - t0, 3))


def record_estimate(rd: Any, what: str, make: Callable[[], Estimate]) -> Estimate | None:
    """`make()`, the estimate of this `what` (run, judge) at its start, in the manifest beside which its end writes
    what it actually took; None (logged) when it cannot be made: the estimate never stops the work it describes."""
    try:
        est = make()
    except Exception as e:  # noqa: BLE001 - the estimate must never stop the work it describes
        log.warning("warning: no estimate recorded for this %s (%s: %s)", what, type(e).__name__, e)
        return None
    rd.update_manifest(estimate={"estimate": est.model_dump(mode="json"), "actual": None})
    if est.total_seconds is not None:
        log.info("estimate: %.0f s (%.0f–%.0f s) for this %s, from stored profiles", est.total_seconds,
                 est.total_low_seconds, est.total_high_seconds, what)
    return est


def record_actual(rd: Any, est: Estimate | None, stages: dict[str, dict[str, Any]], wall_s: float) -> None:
    """What the invocation took, beside its estimate in the manifest (`estimate.actual`)."""
    from lifesearch_local.estimate.cost import actual_figures

    if est is None:
        return
    data = est.model_dump(mode="json")
    rd.update_manifest(estimate={"estimate": data, "actual": actual_figures(data, stages, wall_s)})
