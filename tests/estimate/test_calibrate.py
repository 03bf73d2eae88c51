"""Calibrations and their profiles: what is timed, how it is kept, which settings make another profile."""

from __future__ import annotations

import contextlib
import time

import pytest

from lifesearch_local.estimate import calibrate
from lifesearch_local.estimate.calibrate import (
    ChoiceSample,
    EngineProfile,
    GenerateSample,
    calibrate_engine,
    engine_key,
    load_profile,
)
from serving.config import RayConfig, model_config
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest, ChoiceResult, Engine, Generation

STEP = 0.02


class Timed(Engine):
    """An engine whose calls take known times: 0.1 s a choice group, STEP s a generated token."""

    def score_choices(self, groups, choices):
        time.sleep(0.1 if groups[0].key != "calibrate" else 0.0)
        return [[ChoiceResult(probs=[0.5, 0.5], logprobs=[-0.7, -0.7]) for _ in g.requests] for g in groups]

    def generate(self, requests):
        n = requests[0].max_tokens
        time.sleep(STEP * n)
        return [Generation(text="x" * n, prompt_tokens=10, output_tokens=n) for _ in requests]


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    from lifesearch_local.runtime import skeleton

    d = tmp_path / "profiles"
    monkeypatch.setattr(calibrate, "cache_dir", lambda: d)

    @contextlib.contextmanager
    def opened(model, ray, name):
        time.sleep(0.2)  # "loading"
        yield Timed()

    monkeypatch.setattr(skeleton, "default_open", opened)
    return d


def test_a_calibration_times_opening_the_prompts_and_decoding_and_is_kept(profiles):
    group = ChoiceGroup(key="g", requests=[ChoiceRequest(messages=[{"role": "user", "content": "q"}])] * 3)
    gen = GenerateSample(requests=[ChatRequest(messages=[{"role": "user", "content": "q"}], max_tokens=64)] * 2,
                         prompt_tokens=20)
    model = model_config(model="m")
    prof = calibrate_engine(model, None, phase="judge/x", choice=ChoiceSample(group, ("a", "b"), 1e9, 500), generate=gen)
    assert prof.open_s >= 0.2 and 1 <= len(prof.choice_s) <= calibrate.REPEATS
    assert all(s >= 0.1 for s in prof.choice_s)
    assert prof.choice_rate() == pytest.approx(1e9 / (sorted(prof.choice_s)[len(prof.choice_s) // 2] - prof.call_s))
    assert prof.step_s == pytest.approx(STEP, rel=0.5) and prof.gen_rows == 2 and prof.prefill_tokens == 20
    stored = load_profile(EngineProfile, prof.key)
    assert stored == prof and (profiles / f"{prof.key}.json").is_file()


def test_the_fastest_repeat_gives_the_highest_rate():
    prof = EngineProfile(key="k", model="m", where="in-process", machine={}, measured_at="", load_average=[0, 0, 0],
                         open_s=1, close_s=0, warm_s=0, call_s=0.0, choice_s=[2.0, 1.0, 4.0], choice_flops=8.0)
    assert (prof.choice_rate(True), prof.choice_rate(), prof.choice_rate(False)) == (8.0, 4.0, 2.0)
    assert prof.model_copy(update={"choice_s": []}).choice_rate() is None


def test_settings_that_change_timings_make_another_profile_others_do_not():
    where = {"cpu": "x", "cores": 2}
    m = model_config(model="m", device="cpu")
    key = engine_key(m, None, where)
    assert engine_key(model_config(model="m", device="cpu", token_budget=4096), None, where) != key
    assert engine_key(m, RayConfig(replicas=2), where) != key
    assert engine_key(m, None, {**where, "cores": 4}) != key
    assert engine_key(m, RayConfig(replicas=2, call_timeout_s=5), where) == engine_key(m, RayConfig(replicas=2), where)


def test_a_profile_of_another_version_is_not_read(profiles):
    profiles.mkdir()
    (profiles / "k.json").write_text('{"version": 0, "key": "k"}')
    assert load_profile(EngineProfile, "k") is None
    assert load_profile(EngineProfile, "missing") is None
