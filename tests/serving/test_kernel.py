"""The packed judge kernel equals scoring each prompt alone, for every tiny architecture."""

from __future__ import annotations

import math
import random

import pytest

torch = pytest.importorskip("torch")

from serving.chat import Item  # noqa: E402
from serving.engines import kernel as K  # noqa: E402
from serving.engines.kernel import PackedScorer, check_attention_only, common_prefix_len, plan_passes  # noqa: E402
from serving.protocol import UnsupportedModelError  # noqa: E402

ARCHS = ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-mistral"]
TOL = 1e-4


def load(name: str, **overrides):
    from transformers import AutoModelForCausalLM

    from lifesearch_local.models import tiny_model_dir
    from serving.engines.hf import attn_implementation

    path = tiny_model_dir(name)
    kw = {"attn_implementation": attn_implementation("cpu"), "dtype": torch.float32}
    if overrides:
        from transformers import AutoConfig

        kw["config"] = AutoConfig.from_pretrained(path, **overrides)
    return AutoModelForCausalLM.from_pretrained(path, **kw).eval()


@pytest.fixture(scope="module", params=ARCHS)
def model(request):
    return load(request.param)


def make_groups(seed: int, n_groups: int = 3, vocab: int = 600) -> list[list[Item]]:
    """Reports of different prefix lengths; rubric suffixes of different lengths; a group of one."""
    rng = random.Random(seed)
    groups = []
    for g in range(n_groups):
        prefix = [rng.randrange(20, vocab) for _ in range(rng.randrange(60, 220))]
        n = 1 if g == 0 else rng.randrange(2, 7)
        groups.append([
            Item(prefix + [rng.randrange(20, vocab) for _ in range(rng.randrange(1, 45))],
                 [rng.randrange(20, vocab), rng.randrange(20, vocab)])
            for _ in range(n)
        ])
    return groups


def p_true(lps):
    return [1 / (1 + math.exp(b - a)) for g in lps for a, b in g]


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(p_true(a), p_true(b)))


@pytest.mark.parametrize("form", ["dense", "two_stage", "naive"])
def test_packed_equals_each_prompt_alone(model, form):
    groups = make_groups(1)
    ref = PackedScorer(model, form="single").score(groups)
    got = PackedScorer(model, form=form, token_budget=700).score(groups)
    assert [len(g) for g in got] == [len(g) for g in groups]
    assert max_diff(ref, got) <= TOL
    # raw log-probs too, not only the renormalised p_true
    assert max(abs(x - y) for ga, gb in zip(ref, got) for ia, ib in zip(ga, gb) for x, y in zip(ia, ib)) <= TOL
    # the comparison is meaningful: the random model's p_true vary across prompts
    assert max(p_true(ref)) - min(p_true(ref)) > 0.2


def test_two_stage_batches_count_each_rows_copy_of_the_prefix_in_the_budget(monkeypatch):
    """Every row of a two_stage batch carries the prefix's KV: rows × (prefix + suffix width) stays
    within the token budget, and the split changes no result."""
    model = load("tiny-llama")
    groups = make_groups(3)
    seen = []
    batch = PackedScorer._batch

    def spy(self, rows, items, *, offset, cache):
        seen.append((len(rows), offset + max(len(r) for r in rows)))
        return batch(self, rows, items, offset=offset, cache=cache)

    ref = PackedScorer(model, form="two_stage", token_budget=100_000).score(groups)
    monkeypatch.setattr(PackedScorer, "_batch", spy)
    got = PackedScorer(model, form="two_stage", token_budget=500).score(groups)
    assert max_diff(ref, got) <= 1e-6
    assert all(rows * tokens <= 500 for rows, tokens in seen if rows > 1), seen
    assert len(seen) > len(groups) and max(rows for rows, _ in seen) > 1  # split, yet still batched


def test_several_reports_share_one_pass(model):
    groups = make_groups(2, n_groups=4)
    scorer = PackedScorer(model, form="dense", token_budget=100_000)
    got = scorer.score(groups)
    assert scorer.stats.passes == 1 and scorer.stats.forms == {"dense": 1}
    assert max_diff(PackedScorer(model, form="single").score(groups), got) <= TOL
    # packing counts each shared prefix once
    expected = 0
    for g in groups:
        p = common_prefix_len([it.ids for it in g])
        expected += p + sum(len(it.ids) - p for it in g)
    assert scorer.stats.forward_tokens == expected < sum(len(it.ids) for g in groups for it in g)


def test_broken_mask_is_detected(monkeypatch):
    """Negative control: if suffixes could see each other, the equivalence test would fail."""
    model = load("tiny-llama")
    groups = make_groups(3)
    ref = PackedScorer(model, form="single").score(groups)
    real = K.dense_mask

    def leaky(pk, window, device):
        m = real(pk, window, device)
        idx = torch.arange(len(pk.ids))
        return m | (idx[None, :] <= idx[:, None])[None, None]  # plain causal: crosses suffixes and groups

    monkeypatch.setattr(K, "dense_mask", leaky)
    got = PackedScorer(model, form="dense", token_budget=100_000).score(groups)
    assert max_diff(ref, got) > 1e-2


def test_budget_never_splits_a_group():
    groups = make_groups(4, n_groups=5)
    sizes = [K.packed_size(g) for g in groups]
    budget = max(sizes) - 1  # the largest group alone exceeds it
    bins = plan_passes(groups, budget)
    assert sorted(i for b in bins for i in b) == list(range(5))
    for b in bins:
        assert len(b) == 1 or sum(sizes[i] for i in b) <= budget


def test_sliding_window_model():
    """A windowed model (window smaller than the prompts) still matches each prompt alone."""
    model = load("tiny-mistral", sliding_window=48)
    assert K.sliding_window(model.config) == 48
    groups = make_groups(5)
    ref = PackedScorer(model, form="single").score(groups)
    for form in ("dense", "two_stage"):
        assert max_diff(ref, PackedScorer(model, form=form, token_budget=800).score(groups)) <= TOL


@pytest.mark.slow
def test_flex_attention_form():
    """FlexAttention block masks (the CUDA form) agree too; on CPU this compiles, so it is slow."""
    from torch.nn.attention.flex_attention import create_block_mask  # noqa: F401

    model = load("tiny-qwen3")
    groups = make_groups(6, n_groups=2)
    ref = PackedScorer(model, form="single").score(groups)
    attn = model.config._attn_implementation
    assert max_diff(ref, PackedScorer(model, form="flex", token_budget=2000).score(groups)) <= TOL
    # The flex pass must hand the shared model back as it found it: left on flex_attention, later
    # forwards with a boolean mask were wrong (two_stage on an H200: Δ logprob 4.6).
    assert model.config._attn_implementation == attn
    assert max_diff(ref, PackedScorer(model, form="two_stage").score(groups)) <= TOL


class _Cfg:
    def __init__(self, **kw):
        self.__dict__.update(kw)


@pytest.mark.parametrize("cfg", [
    _Cfg(model_type="qwen3_next", layer_types=["linear_attention", "full_attention"]),
    _Cfg(model_type="jamba"),
    _Cfg(model_type="custom", layer_types=["mamba", "full_attention"]),
])
def test_hybrid_models_are_refused(cfg):
    with pytest.raises(UnsupportedModelError, match="attention-only"):
        check_attention_only(cfg)


def test_attention_only_models_pass():
    check_attention_only(_Cfg(model_type="llama"))
    check_attention_only(_Cfg(model_type="qwen3", layer_types=["full_attention"] * 4))
    with pytest.raises(UnsupportedModelError, match="mixed sliding"):
        K.sliding_window(_Cfg(sliding_window=128, layer_types=["sliding_attention", "full_attention"]))


def test_common_prefix_keeps_a_suffix_token():
    assert common_prefix_len([[1, 2, 3], [1, 2, 3]]) == 2
    assert common_prefix_len([[1, 2, 3]]) == 2
    assert common_prefix_len([[1, 2, 3], [1, 5]]) == 1
    assert common_prefix_len([[4], [4, 5]]) == 0
