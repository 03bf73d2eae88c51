"""The certify study: judge X against the reference judge's verdicts, from the files to the study's JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lifesearch_local.run.config import CertifySettings
from lifesearch_local.run.reference import Reference


@dataclass(frozen=True)
class StudyFiles:
    """The inputs of one study, as `lifesearch certify` names them."""

    tasks: str
    """Tasks JSONL (the rubrics and their categories)."""
    judgments: str
    """Judgments JSONL holding judge X's judgments."""
    judge: str | None = None
    """X's id (or name#run); None when the file holds one judge besides the reference."""
    labels: str | None = None
    """The reference's Label records (where its fingerprint is looked up)."""
    labels_from_judgments: str | None = None
    """The reference judge's judgments, when they are the reference."""
    label_judge: str | None = None
    """The reference judge's id (or name#run) in `labels_from_judgments`."""
    human: str | None = None
    """Human labels on a subset of the decisions."""
    human_source: str | None = None
    """Keep only the human labels of this source."""


def candidate(judgments: list, name: str | None, exclude: str | None) -> tuple[str, list]:
    """The judge X's id and its judgments (`name`: an id, or name#run for one run)."""
    from lifesearch_local.analysis.scoring import judge_name
    from lifesearch_local.errors import LifesearchError

    ids = list(dict.fromkeys(j.judge for j in judgments if j.judge != exclude))
    if name is None:
        if len(ids) != 1:
            raise LifesearchError(f"{len(ids)} judges in the judgments ({', '.join(ids) or 'none'}): pick one with --judge")
        name = ids[0]
    # name#run picks one judge run; a bare id takes all its runs (decisions averaged over them)
    mine = [j for j in judgments if (judge_name(j) if "#" in name else j.judge) == name]
    if not mine:
        raise LifesearchError(f"no judgments by judge {name!r} (found: {', '.join(ids) or 'none'})")
    return mine[0].judge, mine


def fingerprint(path: str | None, judge: str | None):
    """The JudgeIdentity the manifest beside `path` records for `judge`, or None."""
    from lifesearch_local.records import JudgeIdentity
    from lifesearch_local.rundir.manifest import manifest_data

    fp = ((manifest_data(Path(path).parent) or {}).get("fingerprints") or {}).get(judge) if path and judge else None
    return JudgeIdentity.model_validate(fp) if fp else None


def certify_study(files: StudyFiles, reference: Reference, settings: CertifySettings, *, n_resamples: int,
                  seed: int) -> tuple[dict, list]:
    """The whole study as JSON (and X's judgments, for the caveats)."""
    from lifesearch_local.analysis.agreement import collect_items
    from lifesearch_local.analysis.certify import certify, compare_fingerprints
    from lifesearch_local.analysis.labels import label_index
    from lifesearch_local.records import Judgment, Label
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    tasks = load_tasks(files.tasks)
    ref_id = files.label_judge.split("#")[0] if files.label_judge else None
    judge, mine = candidate(read_records(files.judgments, Judgment), files.judge, ref_id)
    items, _ = collect_items(tasks, mine, reference.index)
    human = label_index(read_records(files.human, Label), files.human_source) if files.human else None
    human_items = collect_items(tasks, mine, human)[0] if human else None
    out: dict = {"judge": judge, "reference": reference.source, "human": files.human,
                 "n_reference_labels": len(reference.index), "n_human_labels": len(human) if human else 0}
    out.update(certify(tasks, items, category_field=settings.category_field, human_items=human_items,
                       reference=reference.index, margin=settings.margin, n_resamples=n_resamples, seed=seed,
                       names=(judge, reference.source)))
    if human:
        add_ppi(out, tasks, mine, human)
    ref_fp = fingerprint(files.labels_from_judgments, ref_id) or fingerprint(files.labels, reference.source)
    out["fingerprints"] = compare_fingerprints(fingerprint(files.judgments, judge), ref_fp)
    return out, mine


def add_ppi(out: dict, tasks: list, mine: list, human: dict) -> None:
    """agents.<name>.ppi: X's eq.-1 score on every task it judged, corrected with the human-labelled tasks."""
    from lifesearch_local.analysis.ppi import RANDOM_SUBSET, agent_ppi
    from lifesearch_local.analysis.scoring import score_agents
    from lifesearch_local.errors import LifesearchError

    first = [j for j in mine if j.judge_run == min(x.judge_run for x in mine)]
    judged = {j.task_id for j in first}
    try:
        rows = score_agents([t for t in tasks if t.id in judged], first)
    except LifesearchError as e:  # X did not judge every rubric: its eq.-1 scores would be wrong
        for a in out["agents"].values():
            a["ppi"] = {"mean": None, "ci95": None, "n_labelled_tasks": 0, "reason": str(e)}
        return
    for a, entry in out["agents"].items():
        if a in rows:
            entry["ppi"] = agent_ppi(tasks, rows[a], human)
    out["ppi_note"] = f"ppi: the judge's eq.-1 score (0–1, as `score`) corrected with the human labels; {RANDOM_SUBSET}"
