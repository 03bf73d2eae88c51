"""The shared form's own layer loop computes what the transformers forward computes, for every tiny architecture."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from serving.kernels import packed_rows as R  # noqa: E402
from tests.helpers.tolerances import ACTIVATION_TOL, LOGP_TOL  # noqa: E402

ARCHS = ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-mistral"]


def load(name: str):
    from transformers import AutoModelForCausalLM

    from lifesearch_local.llm.models import tiny_model_dir
    from serving.engines.hf import attn_implementation

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir(name), attn_implementation=attn_implementation("cpu"),
                                                dtype=torch.float32).eval()


def prompts(seed: int, rows: int = 5, prefix: int = 130):
    rng = random.Random(seed)
    return ([rng.randrange(20, 600) for _ in range(prefix)],
            [[rng.randrange(20, 600) for _ in range(rng.randrange(1, 40))] for _ in range(rows)])


def alone(model, prefix, rows):
    """Log-probs at each prompt's last token, every prompt through the transformers forward alone."""
    with torch.inference_mode():
        return torch.stack([model(input_ids=torch.tensor([prefix + r])).logits[0, -1] for r in rows]).log_softmax(-1)


@pytest.mark.parametrize("name", ARCHS)
def test_rows_equal_each_prompt_through_the_transformers_forward(name):
    model = load(name)
    assert R.supported(model)
    prefix, rows = prompts(0)
    forward = R.RowsForward(model)
    with torch.inference_mode():
        kv = forward.prefix(prefix, 50)  # three chunks, the last a partial one
        got = forward.rows(rows, len(prefix), kv).log_softmax(-1)
    want = alone(model, prefix, rows)
    assert (got - want).abs().max() <= LOGP_TOL
    assert (want[0] - want[1]).abs().max() > 0.1  # the rows' answers differ: the comparison means something


def test_the_linears_run_on_packed_weights_and_without_room_on_the_models_own(monkeypatch, caplog):
    model = load("tiny-qwen2")  # q/k/v biases: the fused bias goes to oneDNN too
    prefix, rows = prompts(2)
    packed = R.RowsForward(model)
    if R.Linear(torch.ones(2, 2)).packed is None:
        pytest.skip("this torch has no oneDNN linear")
    o, gate_up, down = packed.linears[0]
    assert o.packed is not None and down.packed is not None and gate_up.gate.packed is not None
    assert packed.qkv[0][0].packed is not None and gate_up.folded  # the post-attention norm's weight in gate and up
    # the folded copies (q/k/v, gate, up) live only packed: one copy of the layers' weights more, not two
    assert packed.qkv[0][0].weight is None and gate_up.gate.weight is None and gate_up.up.weight is None

    class Tight:  # the packed copies would take more than half of what is free
        available = 1

    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Tight())
    with caplog.at_level("INFO", logger=R.__name__):
        plain = R.RowsForward(model)
    o, gate_up, down = plain.linears[0]
    assert o.packed is None and down.packed is None and gate_up.gate.packed is None and not gate_up.folded
    assert "not packed for oneDNN" in caplog.text
    # nothing copied but q/k/v: gate and up on the model's own weights
    mlp = model.model.layers[0].mlp
    assert gate_up.gate.weight is mlp.gate_proj.weight and gate_up.up.weight is mlp.up_proj.weight
    with torch.inference_mode():
        a = packed.rows(rows, len(prefix), packed.prefix(prefix, 64)).log_softmax(-1)
        b = plain.rows(rows, len(prefix), plain.prefix(prefix, 64)).log_softmax(-1)
    assert (a - b).abs().max() <= LOGP_TOL and (a - alone(model, prefix, rows)).abs().max() <= LOGP_TOL


def test_no_prefix_and_one_token_rows():
    model = load("tiny-llama")
    _, rows = prompts(1)
    rows[2] = rows[2][:1]
    forward = R.RowsForward(model)
    with torch.inference_mode():
        got = forward.rows(rows, 0, forward.prefix([], 64)).log_softmax(-1)
    assert (got - alone(model, [], rows)).abs().max() <= LOGP_TOL


def test_a_row_that_sees_another_row_is_detected(monkeypatch):
    """Negative control: were the rows one causal sequence (each seeing the rows before it), the answers would move."""
    model = load("tiny-llama")
    prefix, rows = prompts(2)
    forward = R.RowsForward(model)
    attend = R.attend
    monkeypatch.setattr(R, "attend", lambda q, k, v, past, starts, scale: attend(q, k, v, past, [0], scale))
    with torch.inference_mode():
        got = forward.rows(rows, len(prefix), forward.prefix(prefix, 64)).log_softmax(-1)
    assert (got - alone(model, prefix, rows))[1:].abs().max() > 1e-2


def test_attend_equals_masked_sdpa():
    """Past keys all visible, each row causal over its own keys only, grouped-query heads: as SDPA with the
    explicit mask over [past, rows] computes it."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    starts, t, past_len = [0, 7, 8, 20], 31, 13
    q, k, v = (torch.randn(t, 6, 16, generator=g) for _ in range(3))
    k, v = k[:, :2].contiguous(), v[:, :2].contiguous()
    pk, pv = torch.randn(2, past_len, 16, generator=g), torch.randn(2, past_len, 16, generator=g)
    row = torch.zeros(t, dtype=torch.long)
    for s in starts[1:]:
        row[s:] += 1
    own = (row[:, None] == row[None, :]) & (torch.arange(t)[None, :] <= torch.arange(t)[:, None])
    mask = torch.cat([torch.ones(t, past_len, dtype=torch.bool), own], dim=1)
    keys, values = torch.cat([pk, k.transpose(0, 1)], 1), torch.cat([pv, v.transpose(0, 1)], 1)
    want = F.scaled_dot_product_attention(q.transpose(0, 1)[None], keys[None], values[None], attn_mask=mask,
                                          enable_gqa=True, scale=0.25)[0].transpose(0, 1).reshape(t, -1)
    assert (R.attend(q, k, v, (pk, pv), starts, 0.25) - want).abs().max() <= ACTIVATION_TOL
    no_past = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                                             attn_mask=own, enable_gqa=True, scale=0.25)[0].transpose(0, 1).reshape(t, -1)
    assert (R.attend(q, k, v, None, starts, 0.25) - no_past).abs().max() <= ACTIVATION_TOL


def test_norm_and_interleaved_rotary_equal_transformers():
    """RMSNorm as transformers computes it; rotary as one complex multiply on interleaved halves equals
    `x * cos + rotate_half(x) * sin`, once the result is put back in the usual order."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, apply_rotary_pos_emb

    g = torch.Generator().manual_seed(1)
    norm = LlamaRMSNorm(24, eps=1e-5)
    norm.weight.data = torch.randn(24, generator=g)
    x = torch.randn(9, 24, generator=g) * 3
    assert (R.rms_norm(x, 1e-5, norm.weight) - norm(x)).abs().max() <= ACTIVATION_TOL
    q = torch.randn(9, 4, 16, generator=g)
    angle = torch.randn(9, 8, generator=g)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
    want, _ = apply_rotary_pos_emb(q.transpose(0, 1)[None], q.transpose(0, 1)[None], cos[None], sin[None])
    def pairs(t):  # [first half, second half] → interleaved pairs, on the last dimension
        return t.unflatten(-1, (2, 8)).transpose(-1, -2).flatten(-2)

    got = R.rotary(pairs(q), torch.polar(torch.ones(9, 8), angle))
    assert (got - pairs(want[0].transpose(0, 1))).abs().max() <= ACTIVATION_TOL
    # reordering a projection's rows does the same to its output, head by head
    w, h = torch.randn(64, 24, generator=g), torch.randn(5, 24, generator=g)
    assert torch.equal(h @ R.interleave(w, 4).T, pairs((h @ w.T).view(5, 4, 16)).reshape(5, 64))


def test_other_models_keep_the_transformers_forward():
    model = load("tiny-llama")
    model.config.hidden_act = "gelu"
    assert not R.supported(model)
    model.config.hidden_act = "silu"
    model.config.pretraining_tp = 2
    assert not R.supported(model)


def test_bf16_weights_are_packed_only_where_the_cpu_computes_bf16(monkeypatch):
    w = torch.randn(8, 4)
    monkeypatch.setattr(R, "_bf16_here", lambda: False)
    assert R.Linear(w.bfloat16()).packed is None  # plain F.linear on a CPU without bf16 instructions
    x = torch.randn(3, 4)
    assert torch.allclose(R.Linear(w.bfloat16())(x.bfloat16()).float(), x @ w.t(), atol=0.1)
    if R.Linear(w).packed is None:
        pytest.skip("this torch has no oneDNN linear")
    monkeypatch.setattr(R, "_bf16_here", lambda: True)
    assert R.Linear(w.bfloat16()).packed is not None


def test_a_weight_onednn_cannot_pack_keeps_the_plain_linear(monkeypatch, caplog):
    def refuse(*args):
        raise RuntimeError("could not create a primitive")

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", refuse, raising=False)
    w, x = torch.randn(8, 4), torch.randn(3, 4)
    with caplog.at_level("INFO", logger=R.__name__):
        lin = R.Linear(w)
    assert lin.packed is None and torch.allclose(lin(x), x @ w.t(), atol=1e-5)
    if torch.backends.mkldnn.is_available():
        assert "not packed for oneDNN (could not create a primitive)" in caplog.text


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_linears_fused_activation_and_op_equal_the_product_then_the_op(dtype):
    """SiLU, + and × applied inside oneDNN's call (packed) or after the plain product compute the same: the
    MLP's silu(gate) · up and the residual adds rest on it."""
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(3)
    w, b = torch.randn(24, 16, generator=g), torch.randn(24, generator=g)
    x, other = torch.randn(7, 16, generator=g), torch.randn(7, 24, generator=g)
    want = {"silu": F.silu(x @ w.T + b), "add": x @ w.T + b + other, "mul": (x @ w.T + b) * other}
    tol = 1e-5 if dt == torch.float32 else 0.1
    for pack in (True, False):
        lin = R.Linear(w.to(dt), b.to(dt), pack)
        got = {"silu": lin(x.to(dt), "silu"), "add": lin.then(x.to(dt), "add", other.to(dt)),
               "mul": lin.then(x.to(dt), "mul", other.to(dt))}
        for name in want:
            assert got[name].dtype == dt and (got[name].float() - want[name]).abs().max() <= tol * want[name].abs().max()


def test_gate_up_folds_the_norms_weight_only_into_packed_copies():
    model = load("tiny-llama")
    layer = model.model.layers[0]
    norm = layer.post_attention_layernorm.weight
    with torch.no_grad():
        norm.copy_(torch.linspace(0.5, 1.5, norm.shape[0]))
    x = torch.randn(5, norm.shape[0], generator=torch.Generator().manual_seed(4))
    mlp = layer.mlp
    with torch.inference_mode():
        want = torch.nn.functional.silu(mlp.gate_proj(x * norm)) * mlp.up_proj(x * norm)
        folded, plain = R.GateUp(mlp, norm, pack=True), R.GateUp(mlp, norm, pack=False)
        assert folded.folded and not plain.folded
        assert (folded(x) - want).abs().max() <= ACTIVATION_TOL
        assert (plain(x * norm) - want).abs().max() <= ACTIVATION_TOL  # unfolded: the caller applies the weight


def test_every_forward_runs_a_token_count_that_repeats(monkeypatch):
    """Prefix chunks and row batches of any length reach the linears padded to a multiple of SHAPE_STEP (so
    oneDNN reuses its primitives across reports), and the padding changes no answer."""
    model = load("tiny-llama")
    prefix, rows = prompts(5, rows=4, prefix=77)
    forward = R.RowsForward(model)
    seen: list[int] = []
    call = R.Linear.__call__
    monkeypatch.setattr(R.Linear, "__call__", lambda self, x, act="none": seen.append(x.shape[0]) or call(self, x, act))
    with torch.inference_mode():
        kv = forward.prefix(prefix, 50)  # chunks of 50 and 27 tokens
        got = forward.rows(rows, len(prefix), kv).log_softmax(-1)
    assert seen and all(n % R.SHAPE_STEP == 0 for n in seen) and len(set(seen)) == 2  # 64 (both chunks), the rows'
    assert tuple(kv[0][0].shape[1:2]) == (len(prefix),)  # the padding's keys are never stored
    assert (got - alone(model, prefix, rows)).abs().max() <= LOGP_TOL
