"""The report's "Which judge" section: each judge's fingerprint, panel judges' members, the last replay."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifesearch_local.output.report.data import RunData
from lifesearch_local.output.report.markup import e, table
from lifesearch_local.rundir.integrity import judge_settings_problems

FINGERPRINT_ROWS = (  # (row header, JudgeIdentity field)
    ("Weights hash", "weights_hash"), ("Engine", "engine"), ("Engine version", "engine_version"), ("Dtype", "dtype"),
    ("Kernel form", "kernel_form"), ("Verdict schema hash", "schema_hash"),
)


def section_judges(data: RunData) -> str:
    """Fingerprints (manifest `fingerprints`), panels (from the judgments) and the last replay
    (manifest `replays`); nothing when the run has none of them."""
    m = data.manifest or {}
    unvouched = judge_settings_problems(m, data.judgments) if m.get("replays") else []
    parts = [fingerprint_table(m.get("fingerprints") or {}), panel_table(data),
             last_replay(m.get("replays") or [], unvouched)]
    body = "".join(p for p in parts if p)
    return f'<h2 id="judges">Which judge made these verdicts</h2>{body}' if body else ""


def fingerprint_table(fingerprints: Mapping[str, Mapping[str, Any]]) -> str:
    """One column per judge id: what makes two runs "the same judge"."""
    if not fingerprints:
        return ""
    ids = list(fingerprints)
    rows = [[e(head), *[_cell(fingerprints[j].get(field)) for j in ids]] for head, field in FINGERPRINT_ROWS]
    prompts = sorted({name for j in ids for name in (fingerprints[j].get("prompt_hashes") or {})})
    rows += [[e(f"Prompt {name}"), *[_cell((fingerprints[j].get("prompt_hashes") or {}).get(name)) for j in ids]]
             for name in prompts]
    return ("<h3>Judge fingerprints</h3>" + table(["", *map(e, ids)], rows, tid="fingerprints", num_from=99)
            + '<p class="muted">Two runs are the same judge only where every row matches; a resume under the same '
            "judge id with another fingerprint is refused.</p>")


def panel_table(data: RunData) -> str:
    """The panel judges among the judgments: their members and rule."""
    panels: dict[str, Any] = {}
    for j in data.judgments:
        if j.panel is not None and j.judge not in panels:
            panels[j.judge] = j.panel
    if not panels:
        return ""
    rows = [[e(pid), e(p.combine), e(", ".join(p.members)),
             str(sum(1 for j in data.judgments if j.judge == pid and j.panel and j.panel.tie))]
            for pid, p in panels.items()]
    return "<h3>Panel judges</h3>" + table(["Panel", "Rule", "Members", "Even splits"], rows, tid="panels", num_from=3)


def last_replay(replays: list[Mapping[str, Any]], unvouched: list[str] | None = None) -> str:
    """The latest `lifesearch rejudge`: decisions judged again, the largest |Δp_true|, flips; or,
    where the recorded settings no longer agree with the judgments (`unvouched`), that no replay
    can vouch for them (a replay recorded before an edit would otherwise still look clean)."""
    if not replays:
        return ""
    if unvouched:
        return ("<h3>Last replay: cannot vouch for this run</h3>"
                f'<p class="warn">The recorded judge settings no longer agree with the judgments: '
                f"{e(unvouched[0])}{e(f' (and {len(unvouched) - 1} more)' if len(unvouched) > 1 else '')}. "
                f"The {len(replays)} recorded replay(s) say nothing about these verdicts; "
                "`lifesearch rejudge` refuses this run.</p>")
    r = replays[-1]
    dp = r.get("max_abs_dp")
    rows = [["When", e(r.get("at"))], ["Sampled", e(f"{r.get('sampled')} of {r.get('eligible')} (seed {r.get('seed')})")],
            ["Max |Δp_true|", "—" if dp is None else e(f"{dp:.3g}")], ["Flipped verdicts", e(r.get("flips"))]]
    rows += [[e(f"Fingerprint of {j}"), e("; ".join(d) if d else "same as recorded")]
             for j, d in (r.get("judges") or {}).items()]
    more = f" ({len(replays)} replays recorded; the manifest lists them all)" if len(replays) > 1 else ""
    return (f"<h3>Last replay{e(more)}</h3>" + table(["", ""], rows, tid="replay", num_from=99)
            + '<p class="muted">`lifesearch rejudge` judged these decisions again with the recorded settings: '
            "a reproducible judge moves p_true by rounding error only and flips nothing.</p>")


def _cell(v: Any) -> str:
    return "—" if v is None else e(v)
