"""A column's FLOPs follow the positions it computes; the matmul rate is a positive measured figure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lifesearch_local.bench import rates

SHAPE = rates.Shape(layer_params=1000, layers=2, heads=3, head_dim=4, hidden=8, vocab=10)


def groups():
    item = lambda ids: SimpleNamespace(ids=ids)  # noqa: E731
    # one report: prefix of 40 tokens shared by three prompts, suffixes of 5, 3 and 7 tokens
    prefix = list(range(100, 140))
    return [[item(prefix + [1, 2, 3, 4, 5]), item(prefix + [6, 7, 8]), item(prefix + [9, 10, 11, 12, 13, 14, 15])]]


def test_spans_per_column():
    g = groups()
    assert rates.spans(g, "single") == [(0, 45), (0, 43), (0, 47)]
    assert rates.spans(g, "prefix") == [(0, 40)]
    assert rates.spans(g, "packed") == [(0, 40), (40, 45), (40, 43), (40, 47)]
    # vLLM: the first prompt whole; the others from the last 16-token block inside the prefix (32)
    assert rates.spans(g, "vllm", block=16) == [(0, 45), (32, 43), (32, 47)]


def test_flops_count_weights_attention_pairs_and_the_head():
    # 3 tokens from position 2: attention pairs 3 + 4 + 5 = 12
    assert SHAPE.flops([(2, 5)], 0) == 2 * 1000 * 3 + 4 * 2 * 3 * 4 * 12
    assert SHAPE.flops([(2, 5)], 2) - SHAPE.flops([(2, 5)], 0) == 2 * 2 * 8 * 10
    g = groups()
    packed, single = (SHAPE.flops(rates.spans(g, h), 3) for h in ("packed", "single"))
    assert packed < single  # the prefix once, not three times


def test_column_rates_against_the_matmul_rate():
    g = groups()
    res = {"dtype": "float32", "packed_s": 1e-6, "naive_s": 4e-6}  # microseconds: GFLOP/s in the hundreds
    out = rates.column_rates(res, SHAPE, g, {"float32": 1000.0})
    want = SHAPE.flops(rates.spans(g, "packed"), 3) / 1e-6 / 1e9
    assert want > 100 and out["packed_gflops"] == pytest.approx(want, abs=0.06)
    assert out["packed_of_matmul"] == pytest.approx(want / 1000.0, abs=1e-3)
    assert out["naive_gflops"] == pytest.approx(SHAPE.flops(rates.spans(g, "single"), 3) / 4e-6 / 1e9, abs=0.06)
    assert "vllm_gflops" not in out and "prefix_gflops" not in out


def test_matmul_rate_is_measured():
    r = rates.matmul_rate("float32", "cpu", [(64, 128)], budget_s=0.02, rows=64)
    assert 0 < r < 1e5  # GFLOP/s: a CPU does more than nothing and less than 100 TFLOP/s


def test_the_rate_times_the_same_product_both_ways_on_cpu():
    torch = pytest.importorskip("torch")
    a, b = torch.randn(32, 48), torch.randn(48, 80)
    products = rates._products(a, b, "cpu")
    if torch.backends.mkldnn.is_available():
        assert len(products) == 2  # torch's matmul and oneDNN's packed linear
    for product in products:
        assert torch.allclose(product(), a @ b, atol=1e-4)  # the weight packed as (outer, inner): no transposed product
    assert len(rates._products(a, b, "cuda")) == 1
