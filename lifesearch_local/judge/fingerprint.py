"""A judge's fingerprint (records.JudgeIdentity): built from its config and loaded engine, checked on resume."""

from __future__ import annotations

import logging

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.verdict import verdict_schema_hash
from lifesearch_local.llm.prompts import load_template
from lifesearch_local.records import JudgeIdentity
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import ConfigChanged
from serving import Engine

log = logging.getLogger(__name__)

JUDGE_PROMPTS = ("judge_en", "judge_zh")
# Fields that say how the judge ran, not which judge it is: the kernel forms agree within fp32
# rounding (`kernel` is an execution setting), and a library's patch release is the same model. A
# resume across them is recorded and said, not refused; every other difference is another judge.
HOW_IT_RAN = ("engine_version", "kernel_form")


def judge_identity(cfg: JudgeConfig, engine: Engine) -> JudgeIdentity:
    """The fingerprint of `cfg` judging on this loaded engine: weights, engine and version,
    dtype, prompt hashes, the verdict schema (generate mode), the kernel form (choice mode:
    generate mode never runs the choice kernel)."""
    info = engine.identity()
    return JudgeIdentity(
        judge=cfg.id, weights_hash=info.weights_hash, engine=info.engine, engine_version=info.version,
        dtype=info.dtype, prompt_hashes={name: load_template(name)[1] for name in JUDGE_PROMPTS},
        schema_hash=verdict_schema_hash() if cfg.mode == "generate" else None,
        kernel_form=info.kernel_form if cfg.mode == "choice" else None,
    )


def check_identity(rd: RunDir, stage: str, now: JudgeIdentity, *, resuming: bool, force: bool = False) -> None:
    """Refuse (ConfigChanged) to add to a judge id's judgments with another judge than made them
    (another fingerprint in the manifest) unless `force`; then record `now` as its fingerprint.

    A fingerprint is a setting like the config's: other weights, prompts, verdict schema, engine or
    dtype under the same id is another judge; another engine version or kernel form (HOW_IT_RAN) is
    logged and recorded. `resuming`: the id already has judgments here.
    """
    m = rd.manifest()
    before = m.fingerprints.get(now.judge) if m else None
    every = before.differences(now) if resuming and before is not None else []
    diffs = [d for d in every if not d.startswith(tuple(f"{f}:" for f in HOW_IT_RAN))]
    ran = [d for d in every if d not in diffs]
    if ran:
        log.info("%s: %s resumes with the same judge run another way (%s)", rd.path, stage, "; ".join(ran))
    if diffs:
        msg = f"{rd.path}: {stage} has judgments made by another judge ({'; '.join(diffs)})"
        if not force:
            raise ConfigChanged(f"{msg}; give this judge its own id, or pass --force-config to add to those "
                                "judgments anyway")
        log.warning("warning: --force-config: %s; its judgments now mix both", msg)
    fingerprints = {**(m.fingerprints if m else {}), now.judge: now}
    figures = {**({"fingerprint_forced_over": diffs} if diffs else {}), **({"fingerprint_ran_otherwise": ran} if ran else {})}
    rd.update_manifest(fingerprints=fingerprints, stage=(stage, figures) if figures else None)
