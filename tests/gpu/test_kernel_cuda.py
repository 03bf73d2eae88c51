"""The packed kernel's CUDA form (two_stage, what `auto` picks there) equals scoring each prompt alone
(fp32 within LOGP_TOL, bf16 bounded).

Random-weight models of three architectures (GQA Llama, Qwen3 with q/k norms, Mistral with a
sliding window shorter than the prefix) are built in memory: no tokenizer, no download.
Run on a GPU machine: `pytest -q -s tests/gpu` (prints the measured differences).
"""

from __future__ import annotations

import json
import math
import os
import random

import pytest

from tests.helpers.tolerances import LOGP_TOL

pytestmark = pytest.mark.gpu

FORMS = ("two_stage",)
# bf16 keeps 8 mantissa bits: any two kernels that sum in another order differ by a few bf16
# ulps per layer. The bound is therefore relative to bf16 itself: a packed form's error
# against the fp32 truth may not exceed twice the error of the bf16 one-prompt reference
# (plus 2e-3 of slack for the sigmoid's flat regions), i.e. packing adds no error of its own
# beyond what bf16 rounding already costs.
BF16_REL = 2.0
BF16_SLACK = 2e-3

ARCHS = {
    "llama": ("LlamaConfig", dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6,
                                  num_attention_heads=8, num_key_value_heads=2, rope_theta=500000.0)),
    "qwen3": ("Qwen3Config", dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6,
                                  num_attention_heads=8, num_key_value_heads=4, head_dim=128,
                                  use_sliding_window=False)),
    "mistral": ("MistralConfig", dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6,
                                      num_attention_heads=8, num_key_value_heads=2, sliding_window=256)),
}


def build(arch: str, device: str = "cuda"):
    """fp32 random weights; a larger init range than the default so attention visibly matters."""
    import torch
    import transformers

    cls, kw = ARCHS[arch]
    cfg = getattr(transformers, cls)(vocab_size=4096, max_position_embeddings=4096, initializer_range=0.1, **kw)
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    return model.eval()


def groups(seed: int = 0):
    from serving.chat import Item

    rng = random.Random(seed)
    out = []
    for plen in (700, 333, 1200):  # prefixes longer than the Mistral window, odd lengths
        prefix = [rng.randrange(16, 4096) for _ in range(plen)]
        out.append([Item(prefix + [rng.randrange(16, 4096) for _ in range(rng.randrange(5, 90))], [17, 18])
                    for _ in range(rng.randrange(3, 9))])
    return out


def p_true(lps) -> list[float]:
    return [1 / (1 + math.exp(b - a)) for g in lps for a, b in g]


def score(model, form: str, gs, budget: int = 4096):
    from serving.kernels.kernel import PackedScorer

    return PackedScorer(model, form=form, token_budget=budget).score(gs)


def _record(name: str, row: dict) -> None:
    print(f"{name}: {json.dumps(row)}")
    out = os.environ.get("LIFESEARCH_GPU_RESULTS")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps({"check": name, **row}) + "\n")


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_forms_equal_single_fp32(arch):
    model = build(arch)
    gs = groups()
    ref = score(model, "single", gs)
    row = {}
    for form in FORMS:
        got = score(model, form, gs)
        d = max(abs(x - y) for g1, g2 in zip(ref, got) for r1, r2 in zip(g1, g2) for x, y in zip(r1, r2))
        row[form] = d
        assert d <= LOGP_TOL, (arch, form, d)  # fp32 sums in another order
    _record(f"fp32 max |Δ logprob| vs single, {arch}", row)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_forms_bf16_bounded_by_bf16_itself(arch):
    import torch

    gs = groups(1)
    model = build(arch)
    truth = p_true(score(model, "single", gs))
    model = model.to(torch.bfloat16)  # the same weights, rounded
    single = p_true(score(model, "single", gs))
    base = max(abs(a - b) for a, b in zip(single, truth))
    row = {"single_vs_fp32": base}
    for form in FORMS:
        got = p_true(score(model, form, gs))
        err = max(abs(a - b) for a, b in zip(got, truth))
        row[form] = err
        row[form + "_vs_single_bf16"] = max(abs(a - b) for a, b in zip(got, single))
        assert err <= BF16_REL * base + BF16_SLACK, (arch, form, err, base)
    _record(f"bf16 max |Δ p_true| vs fp32 single, {arch}", row)
