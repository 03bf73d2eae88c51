"""The certify study and prediction-powered scores as people read them: terminal tables and long CSV rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CERTIFY_COLUMNS = ("section", "group", "name", "metric", "value", "ci_lo", "ci_hi", "n", "note")
NO_CI = "—"


def points(x: float | None) -> str:
    """Signed points as stored (already × 100), never "-0.0"."""
    if x is None:
        return NO_CI
    out = f"{x:+.1f}"
    return "+" + out[1:] if float(out) == 0 else out


def points_ci(x: float | None, ci: Sequence[float] | None) -> str:
    """`+3.2 [+0.4, +6.1]` in points; `[—]` without an interval."""
    return f"{points(x)} [{'—' if ci is None else f'{points(ci[0])}, {points(ci[1])}'}]"


def share_ci(x: float | None, ci: Sequence[float] | None, digits: int = 1) -> str:
    """`83.2 [79.0, 87.1]`: a 0–1 share in percent with its interval."""
    if x is None:
        return NO_CI
    tail = "—" if ci is None else f"{100 * ci[0]:.{digits}f}, {100 * ci[1]:.{digits}f}"
    return f"{100 * x:.{digits}f} [{tail}]"


def plain_ci(x: float | None, ci: Sequence[float] | None) -> str:
    """`0.61 [0.52, 0.70]` for κ and τ."""
    if x is None:
        return NO_CI
    return f"{x:.2f} [{'—' if ci is None else f'{ci[0]:.2f}, {ci[1]:.2f}'}]"


# -- terminal ---------------------------------------------------------------------------------------
def agents_table(study: Mapping[str, Any]):
    """One row per agent: score under the reference and under the judge, the shift, the PPI score."""
    from rich.table import Table

    ppi = any("ppi" in a for a in study["agents"].values())
    t = Table(title=f"Agents: score under {study['judge']} − score under the reference, on the reference's decisions")
    t.add_column("Agent", style="bold")
    for name in ("Reference", "Judge", "Shift (points) [95% CI]", "Tasks", *(["PPI score [95% CI], labelled tasks"] if ppi else [])):
        t.add_column(name, justify="right")
    for a, v in study["agents"].items():
        row = [a, f"{v['reference_score']:.1f}", f"{v['judge_score']:.1f}", points_ci(v["shift"], v["ci95"]), str(v["n_tasks"])]
        if ppi:
            p = v.get("ppi") or {}
            row.append(f"{share_ci(p.get('mean'), p.get('ci95'))}, n={p.get('n_labelled_tasks', 0)}"
                       if p.get("mean") is not None else p.get("reason", NO_CI))
        t.add_row(*row)
    return t


def categories_table(study: Mapping[str, Any]):
    """Accuracy, κ and the mean shift per rubric category, with the rubric disagreed on most."""
    from rich.table import Table

    t = Table(title=f"By rubric {study['category_field']}")
    t.add_column("Category", style="bold")
    for name in ("Decisions", "Accuracy % [95% CI]", "κ", "Shift by agent (points)", "Most disagreed rubric"):
        t.add_column(name, justify="right" if name != "Most disagreed rubric" else "left")
    for value, c in study["categories"].items():
        sh = ", ".join(f"{a} {points(v['shift'])}" for a, v in c["shift"].items())
        top = c["most_disagreed"][0] if c["most_disagreed"] else None
        where = f"{top['task_id']}/{top['rubric_id']} ({top['disagreements']}/{top['n']})" if top else NO_CI
        t.add_row(value, str(c["n"]), share_ci(c["accuracy"], c["ci95"]["accuracy"]),
                  NO_CI if c["kappa"] is None else f"{c['kappa']:.2f}", sh, where)
    return t


def flip_words(f: Mapping[str, Any]) -> str:
    """One flip as a clause: how the reference and the judge order the pair, and whether the reference's holds."""
    ref = (f"{f['a']} and {f['b']} tie under the reference" if f["reference_diff"] == 0
           else f"{f['a']} ahead of {f['b']} under the reference ({points(f['reference_diff'])})")
    held = "a difference that holds" if f["significant_under_reference"] else "not a difference that holds"
    return f"{ref}, {points(f['judge_diff'])} under the judge ({held} under the reference)"


def summary_lines(study: Mapping[str, Any]) -> list[str]:
    """Agreement, Bias Index, ranking and non-inferiority, one line each."""
    ag, bi, rk = study["agreement"], study["bias_index"], study["ranking"]
    b = study["bootstrap"]
    lines = [
        f"certify: can {study['judge']} replace {study['reference']}? {ag['n']} reference decisions on "
        f"{ag['n_reports']} reports of {study['n_tasks']} tasks; 95% CIs by bootstrap ({b['resamples']} resamples, "
        f"seed {b['seed']})",
        f"agreement with the reference: accuracy {share_ci(ag['accuracy'], ag['ci95']['accuracy'])} %, "
        f"κ {plain_ci(ag['kappa'], ag['ci95']['kappa'])}",
        bias_line(bi),
        "ranking: Kendall τ " + (plain_ci(rk["kendall_tau"], rk["ci95"]) if rk["kendall_tau"] is not None
                                 else f"{NO_CI} ({rk.get('reason', 'undefined')})")
        + f"; {len(rk['flips'])} pair(s) flip"
        + "".join(f"; {flip_words(f)}" for f in rk["flips"]),
    ]
    ni = study.get("non_inferiority")
    if ni:
        lines.append(f"non-inferiority against {ni['n']} human-labelled decisions ({ni['n_reports']} reports): "
                     f"accuracy {100 * ni['judge_accuracy']:.1f}% vs the reference's {100 * ni['reference_accuracy']:.1f}%, "
                     f"diff {points_ci(ni['diff'], ni['ci95'])} points (95% CI), margin −{ni['margin']:g}, "
                     f"{bounds_text(ni)} → {ni['verdict']}; {needed_text(ni)}"
                     + (f"; report-level test of no difference p = {ni['paired_test']['p_value']:.3g}"
                        if ni.get("paired_test") else "")
                     + (f" ({ni['human_without_reference']} human label(s) without a reference verdict left out)"
                        if ni["human_without_reference"] else ""))
    if study.get("ppi_note"):
        lines.append(study["ppi_note"])
    fp = study.get("fingerprints") or {}
    if fp.get("note"):
        lines.append(f"fingerprints: {fp['note']}" + (f" ({'; '.join(fp['differences'])})" if fp.get("differences") else ""))
    return lines


def bias_line(bi: Mapping[str, Any]) -> str:
    """The Bias Index with what each figure is (analysis.bias_index)."""
    if bi.get("value") is None:
        return f"Bias Index: {bi.get('reason', NO_CI)}"
    if bi.get("upper95") is None:
        return f"Bias Index (max − min shift over agents): {bi['value']:.1f} points ({bi.get('reason', NO_CI)})"
    verdict = {"within": "within the margin", "beyond": "beyond the margin", "inconclusive": "not decided at the margin"}
    return (f"Bias Index (max − min shift over agents): {bi['value']:.1f} points, biased upward by noise; corrected "
            f"{'—' if bi['corrected'] is None else format(bi['corrected'], '.1f')}; one-sided 95% bounds {bi['lower95']:.1f} to {bi['upper95']:.1f}; all shifts equal: "
            + ("undefined (fewer tasks than agents)" if bi["equal_shifts_p_value"] is None
               else f"p = {bi['equal_shifts_p_value']:.3g} (Hotelling's T² over tasks)")
            + (f" → {verdict[bi['verdict']]}" if bi.get("verdict") else ""))


def bounds_text(ni: Mapping[str, Any]) -> str:
    b, alpha = ni.get("one_sided_bounds"), ni.get("alpha_one_sided", 0.025)
    if b is None:
        return f"one-sided test at {alpha:g}: no bound"
    return f"one-sided test at {alpha:g}: lower bound {b[0]:+.1f}" + (
        "" if "bootstrap over" in ni.get("bounds_method", "bootstrap over") else f" ({ni['bounds_method']})")


def needed_text(ni: Mapping[str, Any]) -> str:
    need = ni.get("reports_needed")
    if need is None:
        return f"reports this margin needs: unknown ({(ni.get('label_budget') or {}).get('reason', 'no pilot variance')})"
    return (f"about {need} labelled reports would show a judge as good as the reference non-inferior at this margin "
            f"with 80% power (this pilot: {ni['n_reports']})")


def certify_renderables(study: Mapping[str, Any]) -> list:
    """What `certify` prints, in order: the summary lines, the agents, the categories, the verdict."""
    head = summary_lines(study)
    return [head[0], head[1], agents_table(study), *head[2:], categories_table(study),
            f"verdict ({study['decision']}): {study['verdict']}"]


def ppi_table(judge: str, agents: Mapping[str, Mapping[str, Any]]):
    """`score --ppi`: per agent the judge-only score, the labels-only mean and the PPI score with its interval."""
    from rich.table import Table

    t = Table(title=f"Prediction-powered scores — judge {judge}, corrected with human labels")
    t.add_column("Agent", style="bold")
    for name in ("Judge only", "Labels only [95% CI]", "PPI score [95% CI]", "Labelled tasks", "Other tasks", "λ"):
        t.add_column(name, justify="right")
    for a, p in agents.items():
        ppi = share_ci(p["mean"], p["ci95"]) if p["mean"] is not None else NO_CI
        if p.get("reason") or p.get("ci95_reason"):
            ppi += f" ({p.get('reason') or p['ci95_reason']})"
        t.add_row(a, share_ci(p["judge_only"], None).removesuffix(" [—]"),
                  NO_CI if p["labels_only"] is None else share_ci(p["labels_only"], p.get("labels_only_ci95")),
                  ppi, str(p["n_labelled_tasks"]), str(p["n_unlabelled_tasks"]), NO_CI if p["lambda"] is None else f"{p['lambda']:.2f}")
    return t


# -- CSV --------------------------------------------------------------------------------------------
def _row(section: str, group: str, name: str, metric: str, value: Any, ci: Sequence[float] | None = None,
         n: Any = None, note: str | None = None) -> dict[str, Any]:
    return {"section": section, "group": group, "name": name, "metric": metric, "value": value,
            "ci_lo": None if ci is None else ci[0], "ci_hi": None if ci is None else ci[1], "n": n, "note": note}


def certify_rows(study: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Long rows (CERTIFY_COLUMNS): one per figure of the study, intervals in ci_lo/ci_hi, points as in the JSON."""
    ag = study["agreement"]
    rows = [_row("agreement", "", study["judge"], m, ag[m], ag["ci95"][m], ag["n"]) for m in ("accuracy", "kappa")]
    for a, v in study["agents"].items():
        rows.append(_row("agents", "", a, "shift", v["shift"], v["ci95"], v["n_tasks"]))
        p = v.get("ppi")
        if p:
            rows.append(_row("agents", "", a, "ppi", p["mean"], p["ci95"], p["n_labelled_tasks"],
                             p.get("reason") or p.get("ci95_reason")))
    bi = study["bias_index"]
    rows.append(_row("bias_index", "", "", "bias_index", bi["value"], None, len(study["agents"]), bi.get("reason")))
    for m in ("corrected", "upper95", "lower95", "equal_shifts_p_value"):
        if bi.get(m) is not None:
            rows.append(_row("bias_index", "", "", m, bi[m], None, len(study["agents"]), bi.get("verdict")))
    rk = study["ranking"]
    rows.append(_row("ranking", "", "", "kendall_tau", rk["kendall_tau"], rk["ci95"], rk["n_agents"], rk.get("reason")))
    rows += [_row("ranking", "flip", f"{f['a']} > {f['b']}", "significant_under_reference",
                  f["significant_under_reference"], None, f["n_tasks"]) for f in rk["flips"]]
    for value, c in study["categories"].items():
        rows.append(_row("categories", value, "", "accuracy", c["accuracy"], c["ci95"]["accuracy"], c["n"]))
        rows += [_row("categories", value, a, "shift", v["shift"], v["ci95"], v["n_tasks"]) for a, v in c["shift"].items()]
    ni = study.get("non_inferiority")
    if ni:
        rows.append(_row("non_inferiority", "", "", "diff", ni["diff"], ni["ci95"], ni["n"], ni["verdict"]))
        b = ni.get("one_sided_bounds")
        rows.append(_row("non_inferiority", "", "", "one_sided_bounds", ni.get("alpha_one_sided"), b, ni["n"],
                         ni.get("bounds_method")))
        rows.append(_row("non_inferiority", "", "", "reports_needed", ni.get("reports_needed"), None, ni["n_reports"],
                         (ni.get("label_budget") or {}).get("reason")))
    rows.append(_row("verdict", "", "", study["decision"], None, None, None, study["verdict"]))
    return rows
