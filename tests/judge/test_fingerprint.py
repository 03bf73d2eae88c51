"""The judge's fingerprint: written to the manifest by the judge stage, and another judge under the same id refused."""

from __future__ import annotations

import pytest

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.fingerprint import judge_identity
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.judge.verdict import verdict_schema_hash
from lifesearch_local.llm.prompts import load_template
from lifesearch_local.records import Judgment
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import ConfigChanged
from serving.protocol import EngineInfo
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.judging import REPORTS, TASKS


class Engine(ScriptedBackend):
    """A scripted engine that says what it is, as a loaded hf engine does."""

    def __init__(self, dtype: str = "float32", form: str = "shared", weights: str = "w1", **kw):
        super().__init__(**kw)
        self.info = EngineInfo(engine="hf", weights_hash=weights, version="5.0", dtype=dtype, kernel_form=form)

    def identity(self) -> EngineInfo:
        return self.info


def test_the_judge_stage_writes_its_fingerprint_to_the_manifest(tmp_path):
    rd = RunDir(tmp_path)
    judge_stage(rd, TASKS, REPORTS, JudgeConfig(id="j"), Engine(), show=False)
    fp = rd.manifest().fingerprints["j"]
    assert (fp.weights_hash, fp.engine, fp.engine_version, fp.dtype, fp.kernel_form) == ("w1", "hf", "5.0", "float32",
                                                                                        "shared")
    assert fp.prompt_hashes == {"judge_en": load_template("judge_en")[1], "judge_zh": load_template("judge_zh")[1]}
    assert fp.schema_hash is None  # choice mode decodes no schema


def test_generate_mode_fingerprints_the_schema_not_the_kernel(tmp_path):
    rd = RunDir(tmp_path)
    reply = Engine(texts=lambda req: '{"satisfied": true, "reason": "ok"}')
    judge_stage(rd, TASKS[:1], REPORTS[:1], JudgeConfig(id="g", mode="generate"), reply, show=False)
    fp = rd.manifest().fingerprints["g"]
    assert fp.schema_hash == verdict_schema_hash() and fp.kernel_form is None


@pytest.mark.parametrize(("other", "what"), [
    ({"dtype": "bfloat16"}, "dtype: 'float32' != 'bfloat16'"),
    ({"weights": "w2"}, "weights_hash: 'w1' != 'w2'"),
])
def test_a_resume_by_another_judge_under_the_same_id_is_refused_unless_forced(tmp_path, other, what):
    rd = RunDir(tmp_path)
    judge_stage(rd, TASKS[:1], REPORTS[:2], JudgeConfig(id="j"), Engine(), show=False)
    before = len(rd.load("judgments.jsonl", Judgment))
    with pytest.raises(ConfigChanged, match="made by another judge .*" + what.replace("(", r"\(")):
        judge_stage(rd, TASKS, REPORTS, JudgeConfig(id="j"), Engine(**other), show=False)
    assert len(rd.load("judgments.jsonl", Judgment)) == before  # refused before its first decision
    assert rd.manifest().fingerprints["j"] == judge_identity(JudgeConfig(id="j"), Engine())  # still the first judge's
    # the same judge resumes; --force-config adds to the records and records the new fingerprint and what it overrode
    judge_stage(rd, TASKS, REPORTS[:3], JudgeConfig(id="j"), Engine(), show=False)
    judge_stage(rd, TASKS, REPORTS, JudgeConfig(id="j"), Engine(**other), show=False, force_config=True)
    m = rd.manifest()
    assert len(rd.load("judgments.jsonl", Judgment)) == 6
    assert m.fingerprints["j"] == judge_identity(JudgeConfig(id="j"), Engine(**other))
    assert any(what in d for d in m.stages["judge/j"]["fingerprint_forced_over"])


def test_another_kernel_form_resumes_and_is_recorded_not_refused(tmp_path):
    # the forms agree within fp32 rounding and `kernel` is an execution setting: the same judge run another way
    rd = RunDir(tmp_path)
    judge_stage(rd, TASKS[:1], REPORTS[:2], JudgeConfig(id="j"), Engine(), show=False)
    judge_stage(rd, TASKS, REPORTS, JudgeConfig(id="j"), Engine(form="two_stage"), show=False)
    m = rd.manifest()
    assert len(rd.load("judgments.jsonl", Judgment)) == 6
    assert m.fingerprints["j"].kernel_form == "two_stage"
    assert m.stages["judge/j"]["fingerprint_ran_otherwise"] == ["kernel_form: 'shared' != 'two_stage'"]
    assert "fingerprint_forced_over" not in m.stages["judge/j"]
