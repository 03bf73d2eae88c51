"""How much of each report its judge read: per decision (recorded), per report and per agent, and the caveat when any was cut.

A judge whose context cannot hold a report elides its middle (head and tail kept, a marker
between) and records the tokens elided on each decision (`Judgment.truncated_tokens`). A
report's figure is the largest cut among its decisions (each rubric's prompt holds the whole
report, so the cuts differ only by the rubric's own length). The share of the report the judge
saw needs the report's length in the judge's tokens, which no record holds: it is estimated
from the report's text (`report_tokens`), so it is a share of an estimate, printed as such.
Pure functions: the commands and report.html call them on the records they already hold.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lifesearch_local.analysis.scoring import judge_name
from lifesearch_local.records import Judgment, Report

CHARS_PER_TOKEN = 4.0
"""ASCII characters per token of a typical subword tokenizer on English prose; other characters
(CJK, accents) count about 0.7 token each."""
WIDE_CHAR_TOKENS = 0.7
SHARE_BASIS = "share of the report's tokens the judge saw, its length estimated from its characters (≈4 a token)"
CONTEXT_FIELD = "max_model_len"
"""The judge config's field (under its `model:`) that sets the context a report must fit."""


def report_tokens(text: str) -> int:
    """An estimate of `text`'s length in a subword tokenizer's tokens (ASCII at CHARS_PER_TOKEN
    characters a token, other characters WIDE_CHAR_TOKENS each)."""
    wide = sum(1 for ch in text if ord(ch) > 127)
    return math.ceil((len(text) - wide) / CHARS_PER_TOKEN + wide * WIDE_CHAR_TOKENS)


def share_seen(tokens_cut: int, length: int | None) -> float | None:
    """The share of a report of `length` tokens that a judge eliding `tokens_cut` of them saw: 1.0 when
    nothing was cut; None when the length is unknown, or an estimate no longer than the cut (the
    judge always keeps a head and a tail, so such an estimate is wrong, not the share 0)."""
    if tokens_cut <= 0:
        return 1.0
    if length is None or length <= tokens_cut:
        return None
    return (length - tokens_cut) / length


@dataclass(frozen=True)
class ReportCut:
    """What one judge read of one report (one agent run on one task)."""

    judge: str
    """The judge's name (`id`, `id#k` for repetition k), as score tables name it."""
    agent: str
    task_id: str
    run: int
    tokens_cut: int
    """The most report tokens any of its decisions elided (0: read whole)."""
    decisions: int
    decisions_cut: int
    length: int | None
    """The report's estimated length in tokens (`report_tokens`); None without its text."""

    @property
    def share_seen(self) -> float | None:
        return share_seen(self.tokens_cut, self.length)

    def as_json(self) -> dict[str, Any]:
        return {"judge": self.judge, "agent": self.agent, "task_id": self.task_id, "run": self.run,
                "tokens_cut": self.tokens_cut, "decisions": self.decisions, "decisions_cut": self.decisions_cut,
                "report_tokens_est": self.length, "share_seen": self.share_seen}


def report_cuts(judgments: Iterable[Judgment], reports: Iterable[Report] = ()) -> list[ReportCut]:
    """One ReportCut per judge × report judged, in order of first decision; lengths from `reports`' texts."""
    texts = {(r.agent, r.run, r.task_id): r.text for r in reports}
    by: dict[tuple[str, str, str, int], list[int]] = {}
    for j in judgments:
        by.setdefault((judge_name(j), j.agent, j.task_id, j.run), []).append(j.truncated_tokens)
    out = []
    for (judge, agent, tid, run), cuts in by.items():
        text = texts.get((agent, run, tid))
        out.append(ReportCut(judge, agent, tid, run, max(cuts), len(cuts), sum(1 for c in cuts if c > 0),
                             None if text is None else report_tokens(text)))
    return out


@dataclass(frozen=True)
class AgentCut:
    """An agent's reports under one judge: how many were cut, and how much of the cut ones the judge saw."""

    reports: int
    reports_cut: int
    tokens_cut: int
    """Report tokens elided, summed over its reports (each report's largest cut)."""
    median_share_seen: float | None
    """Median share seen over the cut reports whose share is known; None when none is."""

    def as_json(self) -> dict[str, Any]:
        return {"reports": self.reports, "reports_cut": self.reports_cut, "tokens_cut": self.tokens_cut,
                "median_share_seen": self.median_share_seen}

    def cell(self) -> str:
        """`2/6 cut, 61% seen` (median over the cut ones), `0/6 cut`: a table cell."""
        if not self.reports_cut:
            return f"0/{self.reports} cut"
        seen = "" if self.median_share_seen is None else f", {100 * self.median_share_seen:.0f}% seen"
        return f"{self.reports_cut}/{self.reports} cut{seen}"


def agent_cuts(cuts: Iterable[ReportCut]) -> dict[str, dict[str, AgentCut]]:
    """judge → agent → AgentCut, from `report_cuts`."""
    groups: dict[str, dict[str, list[ReportCut]]] = {}
    for c in cuts:
        groups.setdefault(c.judge, {}).setdefault(c.agent, []).append(c)
    return {judge: {agent: agent_cut(rs) for agent, rs in agents.items()} for judge, agents in groups.items()}


def agent_cut(cuts: Sequence[ReportCut]) -> AgentCut:
    """One agent's AgentCut from its ReportCuts under one judge."""
    cut = [c for c in cuts if c.tokens_cut > 0]
    seen = [s for c in cut if (s := c.share_seen) is not None]
    return AgentCut(len(cuts), len(cut), sum(c.tokens_cut for c in cut), statistics.median(seen) if seen else None)


def context_limit(manifest: Mapping[str, Any] | None, judge_id: str) -> int | None:
    """The judge's `model.max_model_len` as its run recorded it (the manifest's stage_configs), or None."""
    stage = ((manifest or {}).get("stage_configs") or {}).get(f"judge/{judge_id}")
    model = stage.get("model") if isinstance(stage, dict) else None
    limit = model.get(CONTEXT_FIELD) if isinstance(model, dict) else None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def config_limit(judges: Sequence, judge_id: str) -> int | None:
    """`model.max_model_len` of the judge config with this id among `judges` (.id, .model), or None."""
    limit = next((getattr(c.model, CONTEXT_FIELD, None) for c in judges if getattr(c, "id", None) == judge_id), None)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def cut_caveat(judgments: Sequence[Judgment], reports: Iterable[Report] = (),
               manifest: Mapping[str, Any] | None = None, judges: Sequence = ()) -> str | None:
    """The warning when a judge read only part of some report: how many, per judge and agent, the
    judge's context limit (from its config in `judges`, else the manifest) and how to raise it; None
    when every report was read whole."""
    per = agent_cuts(report_cuts(judgments, reports))
    cut = {j: {a: c for a, c in agents.items() if c.reports_cut} for j, agents in per.items()}
    cut = {j: agents for j, agents in cut.items() if agents}
    if not cut:
        return None
    n = sum(c.reports_cut for agents in cut.values() for c in agents.values())
    each = "; ".join(f"judge {j}: " + ", ".join(f"{a} {c.cell()}" for a, c in agents.items())
                     for j, agents in cut.items())
    ids = dict.fromkeys(j.judge for j in judgments if judge_name(j) in cut)
    limits = "; ".join(f"{i}: " + (f"{lim} tokens" if (lim := config_limit(judges, i) or context_limit(manifest, i))
                                   else "the model's own") for i in ids)
    return (f"WARNING: reports cut: {n} report(s) were read only in part, their middle elided to fit the judge's "
            f"context ({each}): their scores rest on the head and tail it read. Context limit ({limits}): raise "
            f"`{CONTEXT_FIELD}` under the judge's `model:` in the config (up to what the model supports) and judge "
            "again (docs/caveats.md).")

