"""The report's certify section: can the judge replace the reference, with the study's evidence (from certify.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifesearch_local.output.report.data import RunData
from lifesearch_local.output.report.markup import e, table
from lifesearch_local.output.study import (
    bias_line,
    bounds_text,
    needed_text,
    plain_ci,
    points,
    points_ci,
    share_ci,
)


def section_certify(data: RunData) -> str:
    """The verdict first, then agreement, the agents' shifts (and PPI scores), Bias Index, ranking, categories."""
    s = data.certify
    if not s:
        return ""
    out = [f'<h2 id="certify">Can {e(s["judge"])} replace {e(s["reference"])}? <span class="muted">(lifesearch certify)'
           "</span></h2>",
           f'<p class="verdict" data-decision="{e(s["decision"])}"><b>Verdict ({e(s["decision"])}):</b> {e(s["verdict"])}</p>']
    ag, bi, rk = s["agreement"], s["bias_index"], s["ranking"]
    out.append(f"<p>Agreement with the reference on {ag['n']} decisions ({ag['n_reports']} reports): accuracy "
               f"{e(share_ci(ag['accuracy'], ag['ci95']['accuracy']))}%, κ {e(plain_ci(ag['kappa'], ag['ci95']['kappa']))}. "
               f"{e(bias_line(bi))}. "
               f"Kendall τ of the rankings: {e(plain_ci(rk['kendall_tau'], rk['ci95']) if rk['kendall_tau'] is not None else rk.get('reason', '—'))}.</p>")
    out.append(_agents(s))
    if rk["flips"]:
        rows = [[e(f["a"]), e(f["b"]), e(points(f["reference_diff"])), e(points(f["judge_diff"])),
                 "yes" if f["significant_under_reference"] else "no"] for f in rk["flips"]]
        out.append("<h3>Ranking flips</h3>" + table(["A (ahead under the reference)", "B", "A − B, reference", "A − B, judge",
                                                     "Significant under the reference"], rows, tid="certify-flips", num_from=2))
    out.append(_categories(s))
    ni = s.get("non_inferiority")
    if ni:
        out.append(f"<p>Non-inferiority against {ni['n']} human-labelled decisions: accuracy "
                   f"{100 * ni['judge_accuracy']:.1f}% vs the reference's {100 * ni['reference_accuracy']:.1f}%, difference "
                   f"{e(points_ci(ni['diff'], ni['ci95']))} points (95% CI) at a margin of −{ni['margin']:g}, "
                   f"{e(bounds_text(ni))}: <b>{e(ni['verdict'])}</b>. {e(needed_text(ni))}.</p>")
    if s.get("ppi_note"):
        out.append(f'<p class="muted">{e(s["ppi_note"])}</p>')
    fp = s.get("fingerprints") or {}
    if fp.get("note"):
        out.append(f'<p class="muted">Fingerprints: {e(fp["note"])}{e(" (" + "; ".join(fp["differences"]) + ")") if fp.get("differences") else ""}</p>')
    b = s["bootstrap"]
    out.append(f'<p class="muted">95% intervals: {e(b["method"])}, {b["resamples"]} resamples, seed {b["seed"]}; unit: '
               f'{e(b["unit"])}. Definitions: docs/statistics.md.</p>')
    return "".join(out)


def _agents(s: Mapping[str, Any]) -> str:
    ppi = any("ppi" in a for a in s["agents"].values())
    head = ["Agent", "Reference score", "Judge score", "Shift (points) [95% CI]", "Tasks", *(["PPI score [95% CI]"] if ppi else [])]
    rows = []
    for a, v in s["agents"].items():
        row = [e(a), f"{v['reference_score']:.1f}", f"{v['judge_score']:.1f}", e(points_ci(v["shift"], v["ci95"])), str(v["n_tasks"])]
        if ppi:
            p = v.get("ppi") or {}
            row.append(e(f"{share_ci(p['mean'], p['ci95'])} (n={p['n_labelled_tasks']})" if p.get("mean") is not None
                         else p.get("reason", "—")))
        rows.append(row)
    return table(head, rows, tid="certify-agents")


def _categories(s: Mapping[str, Any]) -> str:
    rows = []
    for value, c in s["categories"].items():
        top = "; ".join(f"{r['task_id']}/{r['rubric_id']} {r['disagreements']}/{r['n']}: {r['criterion'][:90]}"
                        for r in c["most_disagreed"][:3])
        rows.append([e(value), str(c["n"]), e(share_ci(c["accuracy"], c["ci95"]["accuracy"])),
                     "—" if c["kappa"] is None else f"{c['kappa']:.2f}",
                     e(", ".join(f"{a} {points(v['shift'])}" for a, v in c["shift"].items())), e(top or "—")])
    return (f"<h3>By rubric {e(s['category_field'])}</h3>"
            + table(["Category", "Decisions", "Accuracy % [95% CI]", "κ", "Shift by agent (points)", "Most disagreed rubrics"],
                    rows, tid="certify-categories"))
