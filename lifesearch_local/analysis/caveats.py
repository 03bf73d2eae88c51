"""The caveats shown beside judge-derived numbers: random-weight models, near-constant judges, agents that did no research.

Every command that prints scores, agreement or judge figures (demo, run, sweep, judge, score,
agree, reporteval) and report.html take their warnings from `caveats()`, so a reader meets
the same words wherever the numbers appear (docs/caveats.md).

A judge is **near-constant** over the decisions shown when, with at least `MIN_DECISIONS` of
them, one verdict makes up at least `NEAR_CONSTANT_SHARE` of its graded verdicts, or (choice
mode) the middle 90% of its p_true values (5th to 95th percentile) spans less than
`NEAR_CONSTANT_SPREAD`. Either way its verdicts carry little about the reports: its scores
follow the judge, not the agents, and its agreement with labels is near their base rate.

An agent **did no research** when every one of its reports shown records `tool_calls` = 0: it never
searched, fetched or computed, so whatever its score, its report is the model's unaided text.
Reports that do not record tool calls (imported ones) say nothing either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lifesearch_local.records import Judgment, Report

NEAR_CONSTANT_SHARE = 0.95
"""One verdict class at or above this share of a judge's graded verdicts is a caveat."""
NEAR_CONSTANT_SPREAD = 0.05
"""A 5th-to-95th percentile range of p_true below this is a caveat (the judge barely tells rubrics apart)."""
MIN_DECISIONS = 20
"""Fewer decisions than this say too little to call a judge constant (ten agreeing verdicts can be real)."""


def caveats(*, judges: Sequence = (), agents: Sequence = (), manifest: Mapping[str, Any] | None = None,
            judgments: Iterable[Judgment] = (), reports: Iterable[Report] = ()) -> list[str]:
    """The warning lines for numbers made by these judge and agent configs (`.id`, `.model`), the
    run a manifest records, these judgments and/or the reports they judged; [] when none applies.

    Random weights are found from the configs (`models.random_weights`), from the manifest's stages
    (`random_weights`, recorded by every run) and, for a bare judgments file, from derived judge ids
    that name a built-in tiny model (`tiny-llama/choice/…`)."""
    judgments = list(judgments)
    lines = []
    random = random_weight_roles(judges, agents, manifest, judgments)
    if random:
        lines.append(f"WARNING: random weights: {', '.join(random)}. These models are untrained: the scores and "
                     "agreement shown with this warning are noise, not findings (`lifesearch demo --real` runs "
                     "the real smollm2-135m).")
    by_judge: dict[str, list[Judgment]] = {}
    for j in judgments:
        by_judge.setdefault(j.judge, []).append(j)
    lines += [line for judge, js in sorted(by_judge.items()) if (line := near_constant(judge, js))]
    shown = {j.agent for j in judgments}
    lines += no_research([r for r in reports if not judgments or r.agent in shown])
    return lines


def no_research(reports: Sequence[Report]) -> list[str]:
    """One warning per agent whose every report records no tool call (module docstring)."""
    by_agent: dict[str, list[Report]] = {}
    for r in reports:
        by_agent.setdefault(r.agent, []).append(r)
    out = []
    for agent, mine in sorted(by_agent.items()):
        if mine and all(r.tool_calls == 0 for r in mine):
            out.append(f"WARNING: no research: agent {agent} made no tool call in any of its {len(mine)} report(s) "
                       "(no search, no page read): its report is not research, whatever its score; it shows what "
                       "the model writes unaided.")
    return out


def random_weight_roles(judges: Sequence = (), agents: Sequence = (), manifest: Mapping[str, Any] | None = None,
                        judgments: Sequence[Judgment] = ()) -> list[str]:
    """`agent <id> (<model>)` / `judge <id> (<model>)` for each random-weight model behind the numbers,
    each once, in that order."""
    from lifesearch_local.llm.models import is_tiny, random_weights

    roles: dict[str, str] = {}
    for role, c in [("agent", a) for a in agents] + [("judge", j) for j in judges]:
        if random_weights(c.model):
            roles[f"{role} {c.id}"] = c.model.model
    shown_judges, shown_agents = {j.judge for j in judgments}, {j.agent for j in judgments}
    stages = (manifest or {}).get("stages") or {}
    for name, st in stages.items():
        role, _, who = name.partition("/")
        shown = shown_judges if role == "judge" else shown_agents
        if role in ("agent", "judge") and isinstance(st, dict) and st.get("random_weights") \
                and (not judgments or who in shown):
            roles.setdefault(f"{role} {who}", str(st.get("model", "?")))
    for judge in sorted(shown_judges):
        name = judge.split("/")[0]
        if "/" in judge and is_tiny(name):
            roles.setdefault(f"judge {judge}", name)
    order = sorted(roles, key=lambda r: not r.startswith("agent "))  # agents first, each group as found
    return [f"{r} ({roles[r]})" for r in order]


def near_constant(judge: str, judgments: Sequence[Judgment]) -> str | None:
    """The warning for one judge whose verdicts barely vary over these judgments, or None."""
    graded = [j.satisfied for j in judgments if j.satisfied is not None]
    if len(graded) >= MIN_DECISIONS:
        yes = sum(graded)
        share = max(yes, len(graded) - yes) / len(graded)
        if share >= NEAR_CONSTANT_SHARE:
            verdict = "satisfied" if 2 * yes >= len(graded) else "not satisfied"
            return (f"WARNING: near-constant judge: {judge} answered {verdict} in {share:.0%} of {len(graded)} "
                    f"verdicts (a caveat from {NEAR_CONSTANT_SHARE:.0%}): its scores follow the judge, not the "
                    "agents, and its agreement with labels is close to their base rate.")
    p = sorted(j.p_true for j in judgments if j.p_true is not None)
    if len(p) >= MIN_DECISIONS:
        spread = p[round(0.95 * (len(p) - 1))] - p[round(0.05 * (len(p) - 1))]
        if spread < NEAR_CONSTANT_SPREAD:
            return (f"WARNING: near-constant judge: {judge}'s p_true spans only {spread:.3f} from its 5th to its 95th "
                    f"percentile over {len(p)} decisions (a caveat below {NEAR_CONSTANT_SPREAD}): it barely tells "
                    "one rubric from another, so its verdicts turn on the threshold, not on the reports.")
    return None


def caveats_html(lines: Sequence[str]) -> str:
    """The caveat lines as warning paragraphs (the random-weights one with id `random-weights`)."""
    from html import escape

    out = []
    for line in lines:
        text = line.removeprefix("WARNING: ")
        kind = next((k for k in ("random-weights", "no-research") if text.startswith(k.replace("-", " "))), "near-constant")
        ident = ' id="random-weights"' if kind == "random-weights" else ""
        out.append(f'<p class="warn caveat {kind}"{ident}>{escape(text[0].upper() + text[1:])}</p>')
    return "".join(out)
