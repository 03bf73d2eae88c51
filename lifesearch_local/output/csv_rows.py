"""Long ("tidy") CSV rows of scores, agreement and disagreements, for pandas; columns in docs/statistics.md."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SCORE_COLUMNS = ("judge", "agent", "other", "metric", "value", "ci_lo", "ci_hi", "ci_reason", "p_value", "p_holm",
                 "n_tasks", "resamples", "seed")  # fmt: skip
AGREE_COLUMNS = ("judge", "other", "group", "metric", "value", "ci_lo", "ci_hi", "ci_reason", "p_value", "n",
                 "n_reports", "resamples", "seed")  # fmt: skip
DISAGREEMENT_COLUMNS = ("judge", "judge_run", "task_id", "agent", "run", "rubric_id", "criterion", "label",
                        "verdict", "p_true", "confidence", "reason")  # fmt: skip


def _num(v: Any) -> Any:
    """None and NaN as an empty cell; everything else as is (csv writes repr of floats: exact)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return v


# What makes a spreadsheet read a cell as a formula (OWASP, "CSV injection"): =, +, -, @, tab, CR.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(v: Any) -> Any:
    """A cell no spreadsheet runs: text that starts with = + - @ tab or CR gets a leading `'`
    (OWASP's rule), so `=cmd|' /C calc'!A0` in an agent name or a judge's reason stays text.
    Numbers stay numbers: a float or int is left alone, and so is text that is only a number
    (`-0.5`), which no spreadsheet runs."""
    if isinstance(v, str) and v.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(v):
        return "'" + v
    return v


def to_csv(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """CSV text with a header; absent cells are empty. Every CSV this program writes goes through
    here: text cells through `safe_cell`, and a field holding a line break (\\n or \\r) is quoted.

    Rows end in \\n. Each row is written with \\r\\n as its terminator and that ending swapped after:
    the csv module quotes (QUOTE_MINIMAL) only the line-break characters of its terminator, and
    with a bare \\n an unquoted \\r in a cell split the row in two for every reader."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\r\n", extrasaction="raise")
    out: list[str] = []

    def take() -> None:
        out.append(buf.getvalue()[:-2] + "\n")
        buf.seek(0)
        buf.truncate()

    w.writeheader()
    take()
    for r in rows:
        w.writerow({k: safe_cell(_num(r.get(k))) for k in columns})
        take()
    return "".join(out)


def _ci(ci: Sequence[float] | None, reason: str | None = None) -> dict[str, Any]:
    """ci_lo, ci_hi (empty where there is no interval: NaN or None) and ci_reason (why not)."""
    lo, hi = (None, None) if ci is None else ci
    return {"ci_lo": lo, "ci_hi": hi, "ci_reason": reason}


def score_rows(by_judge: Mapping[str, Mapping], uncertainty: Mapping | None = None,
               cuts: Mapping[str, Mapping] | None = None) -> list[dict[str, Any]]:
    """One row per judge × agent × metric (overall, std, domain:<d>, run:<k>, ungraded, missing, …;
    with `cuts`, reports_cut, tokens_cut and median_share_seen), then one per agent pair (metric
    `diff`, `other` = the second agent)."""
    rows: list[dict[str, Any]] = []
    for judge, agents in by_judge.items():
        u = (uncertainty or {}).get(judge)
        boot = {"resamples": u.resamples, "seed": u.seed} if u is not None else {}
        for agent, s in agents.items():
            n = len(s.tasks)
            base = {"judge": judge, "agent": agent, "n_tasks": n}
            rows.append({**base, "metric": "overall", "value": s.overall_mean,
                         **(_ci(u.ci95.get(agent), u.ci_reason.get(agent)) if u else _ci(None)), **boot})
            rows.append({**base, "metric": "overall_std", "value": s.overall_std})
            for d, v in s.domains.items():
                # a domain's row carries its own task count, not the agent's
                dn = u.domain_n_tasks.get(agent, {}).get(d) if u else None
                ci = _ci(u.domain_ci95.get(agent, {}).get(d), u.domain_ci_reason.get(agent, {}).get(d)) if u else _ci(None)
                rows.append({**base, "n_tasks": dn, "metric": f"domain:{d}", "value": v, **ci, **boot})
            for r, v in sorted(s.runs.items()):
                rows.append({**base, "metric": f"run:{r}", "value": v})
            for m in ("ungraded", "missing", "judged", "iterations", "output_tokens", "tool_calls", "pages_read"):
                rows.append({**base, "metric": m, "value": getattr(s, m)})
            cut = (cuts or {}).get(judge, {}).get(agent)
            for m in ("reports_cut", "tokens_cut", "median_share_seen") if cut is not None else ():
                rows.append({**base, "metric": m, "value": getattr(cut, m)})
        for c in u.comparisons if u is not None else ():
            rows.append({"judge": judge, "agent": c.a, "other": c.b, "metric": "diff", "value": c.diff,
                         **_ci(c.ci95, c.ci_reason),
                         "p_value": c.p_value, "p_holm": c.p_holm, "n_tasks": c.n_tasks, **boot})
    return rows


def agreement_rows(result: Mapping[str, Mapping], vs: Sequence[Mapping] = (), boot: Mapping | None = None) -> list[dict]:
    """One row per judge × group × metric (group `all`, or `<attribute>=<value>` for the breakdowns),
    then the judge-vs-judge rows (`other` = the second judge; metrics diff_accuracy_mean, diff_kappa, paired_test (the
    report-level test's p), mcnemar_discordant)."""
    rows: list[dict[str, Any]] = []
    b = {"resamples": (boot or {}).get("resamples"), "seed": (boot or {}).get("seed")}
    for judge, m in result.items():
        cis, why = m.get("ci95") or {}, m.get("ci95_reason") or {}
        for key in ("accuracy_mean", "chance_accuracy", "self_consistency", "majority_accuracy", "kappa", "auroc", "ece",
                    "best_threshold", "best_threshold_accuracy", "rank_spearman", "rank_kendall", "ungraded"):
            ci = cis.get(key)
            rows.append({"judge": judge, "group": "all", "metric": key, "value": m.get(key), **_ci(ci, why.get(key)),
                         "n": m["n"], "n_reports": m.get("n_reports"), **(b if ci is not None else {})})
        for attr, groups in m.get("by", {}).items():
            for v, g in groups.items():
                rows.append({"judge": judge, "group": f"{attr}={v}", "metric": "accuracy_mean",
                             "value": g["accuracy_mean"], "n": g["n"]})
    for c in vs:
        for key in ("accuracy_mean", "kappa"):
            d = c[f"diff_{key}"]
            rows.append({"judge": c["a"], "other": c["b"], "group": "all", "metric": f"diff_{key}", "value": d["diff"],
                         **_ci(d["ci95"], d.get("ci95_reason")), "n": c["n"], "n_reports": c["n_reports"], **b})
        rows.append({"judge": c["a"], "other": c["b"], "group": "all", "metric": "paired_test",
                     "value": c["paired_test"]["diff"], "p_value": c["paired_test"]["p_value"], "n": c["n"],
                     "n_reports": c["n_reports"]})
        rows.append({"judge": c["a"], "other": c["b"], "group": "all", "metric": "mcnemar_discordant",
                     "value": c["mcnemar"]["b"] + c["mcnemar"]["c"], "p_value": c["mcnemar"]["p_value"], "n": c["n"]})
    return rows
