"""The kernel's plan: which models may take the one-prefix-KV forms, and how a group splits into passes."""

from __future__ import annotations

import pytest

from serving.kernels.plan import (
    check_attention_only,
    choice_form,
    common_prefix_len,
    plan_group,
    row_chunks,
    sliding_window,
    token_chunks,
)
from serving.protocol import UnsupportedModelError


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
        sliding_window(_Cfg(sliding_window=128, layer_types=["sliding_attention", "full_attention"]))


def test_common_prefix_keeps_a_suffix_token():
    assert common_prefix_len([[1, 2, 3], [1, 2, 3]]) == 2
    assert common_prefix_len([[1, 2, 3]]) == 2
    assert common_prefix_len([[1, 2, 3], [1, 5]]) == 1
    assert common_prefix_len([[4], [4, 5]]) == 0


def test_shared_is_auto_on_cpu_only_for_plain_attention():
    assert choice_form("auto", _Cfg(model_type="llama"), "cpu") == "shared"
    assert choice_form("auto", _Cfg(model_type="llama"), "cuda") == "two_stage"
    assert choice_form("auto", _Cfg(model_type="mistral", sliding_window=64), "cpu") == "two_stage"
    assert choice_form("auto", _Cfg(model_type="gemma2", attn_logit_softcapping=50.0), "cpu") == "two_stage"
    assert choice_form("auto", _Cfg(model_type="jamba"), "cpu") == "two_stage"
    assert choice_form("single", _Cfg(model_type="jamba"), "cpu") == "single"


def test_batches_fit_the_budget():
    assert token_chunks([3, 3, 3], 4, 10) == [[0, 1], [2]]  # 4 + 3 + 3 ≤ 10, then 4 + 3 + 3 + 3 > 10
    assert row_chunks([2, 5, 1], 4, 14) == [[0, 1], [2]]  # 4 + 2 × 5 ≤ 14; 4 + 3 × 5 > 14
    assert token_chunks([20], 4, 10) == [[0]]  # a row over the budget runs alone


def test_two_stage_prefills_in_chunks_and_copies_the_prefix_per_row():
    ids = [[7] * 10 + [1, 2], [7] * 10 + [3], [7] * 10 + [4, 5, 6]]
    plan = plan_group(ids, "two_stage", 30, chunk=4)
    assert plan.prefix == 10 and plan.prefill == ((0, 4), (4, 8), (8, 10))
    assert plan.batches == ((0, 1), (2,))  # 30 // (10 + 3) = 2 rows a batch
    assert plan.widths == (2, 1, 3)


def test_shared_runs_the_prefix_once_and_sorts_padded_rows_by_length():
    ids = [[7] * 10 + [1, 2], [7] * 10 + [3], [7] * 10 + [4, 5, 6]]
    plan = plan_group(ids, "shared", 14, chunk=4)
    assert plan.prefill == ((0, 10),) and not plan.packed
    assert plan.batches == ((1, 0), (2,))  # by length: 10 + 2 × 2 ≤ 14, then 10 + 2 × 3 > 14
    packed = plan_group(ids, "shared", 14, rows_loop=True)
    assert packed.packed and packed.batches == ((0, 1), (2,))  # 10 + 2 + 1 ≤ 14, consecutive
    assert plan_group(ids, "single").batches == ((0,), (1,), (2,))
    with pytest.raises(ValueError, match="no plan"):
        plan_group(ids, "dense")
