"""Can judge X replace reference R? The `certify` study: agreement, score shifts, Bias Index, ranking flips, non-inferiority.

Everything is measured on the decisions R made (its verdicts, e.g. Gemini's, as labels) and,
with human labels H, on the decisions H made. Definitions (docs/statistics.md, "certify"):
- agreement: X's accuracy (share of R's decisions X repeats; mean over X's judge runs, ungraded
  = wrong) and Cohen's κ, as `agree` computes them, with its cluster bootstrap over reports;
- shift of an agent: X's eq.-1 score − R's, in points (0–100), both over the agent's tasks with
  only the rubrics R decided (X's judge runs averaged), the mean over those tasks;
- Bias Index: max − min over agents of the shift (ProfBench's self-preference measure);
- ranking: Kendall's τ-b of the agents' scores under X vs under R; a flip is an agent pair whose
  order differs (a tie on one side and an order on the other counts), `significant_under_reference`
  when R's own paired comparison of the pair holds at 0.05 after Holm's adjustment (`score`'s test);
- shift, Bias Index and τ get 95% intervals from ONE task bootstrap (a task's reports of every
  agent resampled together; the statistic recomputed on each resample, never from the agents'
  separate intervals); agreement from the report bootstrap of `agree`;
- non-inferiority (with H): diff = accuracy(X vs H) − accuracy(R vs H) in points on the decisions H
  labels, paired cluster bootstrap over reports; "non-inferior" when the interval's lower end
  > −margin, "inferior" when its upper end < −margin, else "inconclusive".
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lifesearch_local.analysis import resampling as stats
from lifesearch_local.analysis.agreement import (
    MIN_RANK_AGENTS,
    Item,
    agent_rows,
    item_metrics,
    labelled_rubrics,
)
from lifesearch_local.analysis.agreement_ci import judge_ci, kendall_rows, report_index
from lifesearch_local.analysis.labels import Key
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import JudgeIdentity, Task

CATEGORY_FIELDS = ("type", "dimension", "necessity", "priority", "language", "domain")
TOP_RUBRICS = 5
"""How many of a category's most-disagreed rubrics the study lists."""


def category_of(tasks: Sequence[Task], field: str) -> dict[tuple[str, str], str]:
    """(task_id, rubric_id) → the rubric's category: a rubric field (type, dimension, …) or its task's
    (language, domain); a rubric without a value (no `dimension`) is "(none)"."""
    if field not in CATEGORY_FIELDS:
        raise LifesearchError(f"unknown category field {field!r} (one of {', '.join(CATEGORY_FIELDS)})")
    out = {}
    for t in tasks:
        for r in t.rubrics:
            v = getattr(t, field) if field in ("language", "domain") else getattr(r, field)
            out[(t.id, r.id)] = "(none)" if v is None else str(getattr(v, "value", v))
    return out


# -- the agents' scores under X and under R, task by task ------------------------------------------
def task_matrices(tasks: Sequence[Task], items: Sequence[Item]) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """(agents, task ids, X, R): task × agent eq.-1 scores over the rubrics R decided (NaN where the agent
    has no such task); X's judge runs averaged."""
    labelled = labelled_rubrics(items)
    ref = agent_rows(tasks, {it.key: it.label for it in items}, labelled)
    runs = len(items[0].decisions) if items else 0
    per_run = [agent_rows(tasks, {it.key: it.decisions[r] for it in items}, labelled) for r in range(runs)]
    agents = sorted(a for a in ref if all(a in p for p in per_run))
    tids = sorted({t for a in agents for t in ref[a].tasks})
    r_m = np.array([[ref[a].tasks.get(t, np.nan) for a in agents] for t in tids]).reshape(len(tids), len(agents))
    x_m = np.mean([[[p[a].tasks.get(t, np.nan) for a in agents] for t in tids] for p in per_run], axis=0)
    return agents, tids, np.asarray(x_m).reshape(r_m.shape), r_m


def _means(counts: np.ndarray, m: np.ndarray) -> np.ndarray:
    """B × agents means over each resample's drawn tasks (NaN where an agent drew none of its tasks)."""
    have = ~np.isnan(m)
    with np.errstate(divide="ignore", invalid="ignore"):
        return counts @ np.where(have, m, 0.0) / (counts @ have)


def _wide(ci: list[float] | None, n_units: int) -> dict:
    """{"ci95": the interval} or {"ci95": None, "ci95_reason": why}: none below two resampled units, undefined,
    or at zero width, which would claim certainty (resampling.no_interval)."""
    why = stats.no_interval(ci, n_units)
    return {"ci95": None, "ci95_reason": why} if why else {"ci95": ci}


def _ci(samples: np.ndarray, n_units: int) -> dict:
    """The 95% percentile interval of bootstrap samples, as `_wide` gives it."""
    return _wide(stats.interval(stats.percentile_ci(samples, n_units=n_units)[0]) if len(samples) else None, n_units)


def shifts(agents: Sequence[str], x: np.ndarray, r: np.ndarray, *, n_resamples: int, seed: int) -> dict:
    """Per-agent shift (points) with intervals, the Bias Index and Kendall's τ, from one task bootstrap."""
    n_t = len(x)
    point_x, point_r = _means(np.ones((1, n_t)), x)[0], _means(np.ones((1, n_t)), r)[0]
    counts = stats.resample_counts(n_t, n_resamples, stats.rng_for(seed, 1)) if n_t else np.zeros((0, 0))
    bx, br = _means(counts, x), _means(counts, r)
    ok = ~np.isnan(bx).any(axis=1) & ~np.isnan(br).any(axis=1)  # resamples where every agent drew a task
    d = 100 * (bx[ok] - br[ok])
    out: dict = {"agents": {}}
    for i, a in enumerate(agents):
        n_a = int((~np.isnan(r[:, i])).sum())
        out["agents"][a] = {"shift": 100 * float(point_x[i] - point_r[i]), **_ci(d[:, i], n_a),
                            "judge_score": 100 * float(point_x[i]), "reference_score": 100 * float(point_r[i]),
                            "n_tasks": n_a}
    if len(agents) >= 2:
        value = 100 * float(np.max(point_x - point_r) - np.min(point_x - point_r))
        out["bias_index"] = {"value": value, **_ci(d.max(axis=1) - d.min(axis=1), n_t)}
    else:
        out["bias_index"] = {"value": None, "ci95": None, "reason": "one agent: no spread of shifts"}
    if len(agents) >= MIN_RANK_AGENTS:
        tau = kendall_rows(point_x[None], point_r[None])[0]
        out["kendall_tau"] = stats.finite(float(tau))
        out["kendall_ci95"] = _ci(kendall_rows(bx[ok], br[ok]), n_t) if out["kendall_tau"] is not None else {"ci95": None}
    else:
        out["kendall_tau"], out["kendall_ci95"] = None, {"ci95": None}
    return out


def flips(agents: Sequence[str], tids: Sequence[str], x: np.ndarray, r: np.ndarray, *, n_resamples: int,
          seed: int) -> list[dict]:
    """Every agent pair ordered differently by X and by R (a before b under R), with R's paired test."""
    judged = {a: {t for t, v in zip(tids, r[:, i], strict=True) if not np.isnan(v)} for i, a in enumerate(agents)}
    comps = {(c.a, c.b): c for c in stats.compare_agents(np.nan_to_num(r), tids, agents, judged,
                                                         n_resamples=n_resamples, seed=seed)}
    mx, mr = _means(np.ones((1, len(tids))), x)[0], _means(np.ones((1, len(tids))), r)[0]
    out = []
    for i, j in itertools.combinations(range(len(agents)), 2):
        if np.sign(mx[i] - mx[j]) == np.sign(mr[i] - mr[j]):
            continue
        c = comps[(agents[i], agents[j])]
        a, b = (i, j) if mr[i] >= mr[j] else (j, i)
        out.append({"a": agents[a], "b": agents[b], "significant_under_reference": bool(c.holds),
                    "reference_diff": 100 * float(mr[a] - mr[b]), "judge_diff": 100 * float(mx[a] - mx[b]),
                    "p_holm_reference": c.p_holm, "n_tasks": c.n_tasks})
    return out


# -- agreement ------------------------------------------------------------------------------------------
def _metric_cis(metrics: Mapping[str, tuple[float | None, list[float] | None]], n_units: int) -> dict:
    """{"ci95": {metric: interval or None}[, "ci95_reason": {metric: why}]}; a metric with no value needs no reason."""
    cis, why = {}, {}
    for name, (value, ci) in metrics.items():
        got = _wide(ci, n_units) if value is not None else {"ci95": None}
        cis[name] = got["ci95"]
        if "ci95_reason" in got:
            why[name] = got["ci95_reason"]
    return {"ci95": cis, **({"ci95_reason": why} if why else {})}


def agreement_block(items: Sequence[Item], *, n_resamples: int, seed: int) -> dict:
    """accuracy and κ of X against R (0–1), their cluster-bootstrap intervals, n."""
    m = item_metrics(items)
    ci = judge_ci(items, n_resamples=n_resamples, seed=seed)
    n_rep = report_index(items)[1]
    return {"accuracy": m["accuracy_mean"], "kappa": m["kappa"],
            **_metric_cis({"accuracy": (m["accuracy_mean"], ci["accuracy_mean"]), "kappa": (m["kappa"], ci["kappa"])}, n_rep),
            "n": m["n"], "n_reports": n_rep, "n_runs": m["n_runs"], "ungraded": m["ungraded"]}


def most_disagreed(items: Sequence[Item], criteria: Mapping[tuple[str, str], str], k: int = TOP_RUBRICS) -> list[dict]:
    """The k rubrics (task, rubric) where X and R differ most often (over agents, runs, judge runs)."""
    n: Counter = Counter()
    wrong: Counter = Counter()
    for it in items:
        rid = (it.key[0], it.key[3])
        n[rid] += len(it.decisions)
        wrong[rid] += sum(d != it.label for d in it.decisions)
    top = sorted((r for r in n if wrong[r]), key=lambda r: (-wrong[r], -wrong[r] / n[r], r))[:k]
    return [{"task_id": t, "rubric_id": rb, "disagreements": wrong[(t, rb)], "n": n[(t, rb)],
             "criterion": criteria.get((t, rb), "")} for t, rb in top]


def categories(tasks: Sequence[Task], items: Sequence[Item], field: str, *, n_resamples: int, seed: int) -> dict:
    """category value → agreement, per-agent shift (with its interval) and the most-disagreed rubrics."""
    cat = category_of(tasks, field)
    criteria = {(t.id, r.id): r.criterion for t in tasks for r in t.rubrics}
    groups: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        groups[cat[(it.key[0], it.key[3])]].append(it)
    out = {}
    for value in sorted(groups):
        its = groups[value]
        agents, _, x, r = task_matrices(tasks, its)
        sh = shifts(agents, x, r, n_resamples=n_resamples, seed=seed)
        out[value] = {**agreement_block(its, n_resamples=n_resamples, seed=seed),
                      "shift": {a: {k: v[k] for k in ("shift", "ci95", "ci95_reason", "n_tasks") if k in v}
                                for a, v in sh["agents"].items()},
                      "most_disagreed": most_disagreed(its, criteria)}
    return out


# -- non-inferiority against human labels -------------------------------------------------------------
def non_inferiority(items: Sequence[Item], reference: Mapping[Key, bool], margin: float, *, n_resamples: int,
                    seed: int) -> dict:
    """X vs R on the decisions humans labelled (`items`: X's decisions with the human label)."""
    shared = [it for it in items if it.key in reference]
    if not shared:
        raise LifesearchError("the reference has no verdict on any human-labelled decision: nothing to compare")
    k, n_rep = report_index(shared)
    runs = len(shared[0].decisions)
    cols = np.array([[1.0, sum(d == it.label for d in it.decisions) / runs, float(reference[it.key] == it.label)]
                     for it in shared])
    sums = np.zeros((n_rep, 3))
    np.add.at(sums, k, cols)
    tot = sums.sum(axis=0)
    acc_x, acc_r = tot[1] / tot[0], tot[2] / tot[0]
    counts = stats.resample_counts(n_rep, n_resamples, stats.rng_for(seed, 0))
    b = counts @ sums
    diff_b = 100 * (b[:, 1] - b[:, 2]) / b[:, 0]
    got = _ci(diff_b, n_rep)
    ci = got["ci95"]
    if ci is None:
        verdict = "inconclusive"
    elif ci[0] > -margin:
        verdict = "non-inferior"
    elif ci[1] < -margin:
        verdict = "inferior"
    else:
        verdict = "inconclusive"
    return {"diff": 100 * float(acc_x - acc_r), **got, "margin": margin, "verdict": verdict,
            "judge_accuracy": float(acc_x), "reference_accuracy": float(acc_r), "n": len(shared), "n_reports": n_rep,
            "human_without_reference": len(items) - len(shared)}


# -- the whole study ------------------------------------------------------------------------------------
def certify(tasks: Sequence[Task], items: Sequence[Item], *, category_field: str, margin: float,
            human_items: Sequence[Item] | None = None, reference: Mapping[Key, bool] | None = None,
            n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = stats.DEFAULT_SEED,
            names: tuple[str, str] = ("the judge", "the reference"),
            progress: Callable[[str], None] | None = None) -> dict:
    """The study of one candidate judge X against reference verdicts R (JSON-ready; verdict line aside).

    `items`: X's decisions on R's labelled decisions (agreement.collect_items); with human labels,
    `human_items` (X's decisions on the human-labelled ones) and `reference` (R's verdicts by key);
    `names`: (X, R) as the verdict line names them."""
    say = progress or (lambda _: None)
    if not items:
        raise LifesearchError("the reference labels none of the judge's decisions: nothing to certify")
    say("agreement")
    out: dict = {"agreement": agreement_block(items, n_resamples=n_resamples, seed=seed)}
    say("score shifts, Bias Index, ranking")
    agents, tids, x, r = task_matrices(tasks, items)
    sh = shifts(agents, x, r, n_resamples=n_resamples, seed=seed)
    out["ranking"] = {"kendall_tau": sh["kendall_tau"], **sh["kendall_ci95"], "n_agents": len(agents),
                      "flips": flips(agents, tids, x, r, n_resamples=n_resamples, seed=seed)}
    if len(agents) < MIN_RANK_AGENTS:
        out["ranking"]["reason"] = f"{len(agents)} agent(s): τ needs {MIN_RANK_AGENTS} (two agents always give ±1)"
    elif sh["kendall_tau"] is None:
        out["ranking"]["reason"] = "the judge or the reference gives every agent the same score: no ranking to correlate"
    out["agents"] = sh["agents"]
    out["bias_index"] = sh["bias_index"]
    say(f"categories by {category_field}")
    out["categories"] = categories(tasks, items, category_field, n_resamples=n_resamples, seed=seed)
    out["category_field"] = category_field
    if human_items is not None and reference is not None:
        say("non-inferiority against the human labels")
        out["non_inferiority"] = non_inferiority(human_items, reference, margin, n_resamples=n_resamples, seed=seed)
    out["n_tasks"], out["margin"] = len(tids), margin
    out["bootstrap"] = {"method": stats.METHOD, "level": stats.LEVEL, "resamples": n_resamples, "seed": seed,
                        "unit": "report (task, agent, run) for agreement and non-inferiority; task for shift, "
                                "Bias Index and τ"}
    out["decision"], out["verdict"] = decide(out, margin, *names)
    return out


def _fmt_ci(ci: Sequence[float] | None) -> str:
    return "no interval" if ci is None else f"95% CI {ci[0]:+.1f} to {ci[1]:+.1f}"


def decide(study: Mapping, margin: float, judge: str = "the judge", reference: str = "the reference") -> tuple[str, str]:
    """(decision, one line a person can act on that says what it rests on).

    With human labels the decision is the non-inferiority verdict. Without them only agreement with the
    reference can be judged: "equivalent-scores" when every agent's shift interval lies inside ±margin and
    no ranking flip is significant under the reference, "different-scores" when some agent's interval lies
    wholly outside ±margin or a flip is significant, else "inconclusive"."""
    fl = study["ranking"]["flips"]
    sig = sum(f["significant_under_reference"] for f in fl)
    bi = study["bias_index"]
    tail = (f"Bias Index {bi['value']:.1f} points ({_fmt_ci(bi['ci95'])})" if bi["value"] is not None else "one agent")
    tail += f"; {len(fl)} ranking flip(s), {sig} significant under {reference}"
    ni = study.get("non_inferiority")
    if ni is not None:
        basis = (f"accuracy against {ni['n']} human-labelled decisions {ni['diff']:+.1f} points from {reference}'s "
                 f"({_fmt_ci(ni['ci95'])}, margin −{margin:g})")
        line = {"non-inferior": f"{judge} can replace {reference}: {basis}",
                "inferior": f"keep {reference}: {judge} is worse by more than the margin: {basis}",
                "inconclusive": f"not decided at a {margin:g}-point margin (label more decisions): {basis}"}
        return ni["verdict"], f"{line[ni['verdict']]}; {tail}"
    agents = study["agents"]
    outside = [a for a, v in agents.items() if v["ci95"] and (v["ci95"][0] > margin or v["ci95"][1] < -margin)]
    inside = all(v["ci95"] and -margin <= v["ci95"][0] and v["ci95"][1] <= margin for v in agents.values())
    note = f"agreement with {reference} only (no human labels: says {judge} grades like {reference}, not that either is right)"
    if outside or sig:
        worst = max(agents, key=lambda a: abs(agents[a]["shift"]))
        return "different-scores", (f"{judge} does not reproduce {reference}'s scores: {worst} shifted "
                                    f"{agents[worst]['shift']:+.1f} points ({_fmt_ci(agents[worst]['ci95'])}); "
                                    f"{tail}; {note}")
    if inside:
        return "equivalent-scores", (f"{judge} scores every agent within ±{margin:g} points of {reference} "
                                     f"(95% CIs of the shifts inside the margin); {tail}; {note}")
    return "inconclusive", (f"not decided: some agent's shift interval reaches beyond ±{margin:g} points "
                            f"(more tasks needed); {tail}; {note}")


def compare_fingerprints(judge: JudgeIdentity | None, reference: JudgeIdentity | None) -> dict:
    """What the judges' fingerprints (manifests) say about the comparison: both as recorded, their
    differences, and a note when they are the same judge under one or two names, or one id with two
    different fingerprints (a result under that id would mix two judges)."""
    out: dict = {"judge": judge.model_dump() if judge else None, "reference": reference.model_dump() if reference else None,
                 "differences": None, "note": None}
    if judge is None or reference is None:
        missing = " and ".join(n for n, fp in (("the judge", judge), ("the reference", reference)) if fp is None)
        out["note"] = f"no fingerprint recorded for {missing}: not compared"
        return out
    out["differences"] = judge.differences(reference)
    if not out["differences"]:
        out["note"] = ("identical fingerprints: the judge and the reference are the same judge (weights, engine, "
                       "prompts, kernel); this measures the judge against a rerun of itself")
    elif judge.judge == reference.judge:
        out["note"] = f"one judge id ({judge.judge}) with two different fingerprints: two judges, not one"
    else:
        fields = ", ".join(d.split(":")[0] for d in out["differences"])
        out["note"] = f"two different judges (their fingerprints differ in {fields})"
    return out
