"""The compiled bf16 CPU kernels compute what torch's ops compute: attention against a float64 reference,
rows that never see each other, RMSNorm and rotary within a bf16 rounding of torch's, and the fallback
where they cannot be built."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")

from serving.kernels import bf16_cpu as B  # noqa: E402
from serving.kernels import packed_rows as R  # noqa: E402

needs_kernels = pytest.mark.skipif(not B.ready(), reason="needs a CPU with AMX and AVX512-BF16 and a C compiler")


def reference(q, k, v, past, starts, scale):
    """Attention in float64 by its definition: query i sees every past key and its own row's keys up to i."""
    t, h, d = q.shape
    g = h // k.shape[1]
    keys, vals = k.transpose(0, 1).double(), v.transpose(0, 1).double()
    p = past[0].shape[1] if past is not None else 0
    if p:
        keys, vals = torch.cat([past[0].double(), keys], 1), torch.cat([past[1].double(), vals], 1)
    row = torch.zeros(t, dtype=torch.long)
    for a, b in zip(starts, [*starts[1:], t]):
        row[a:b] = a
    own, i = torch.arange(p + t) - p, torch.arange(t)[:, None]
    seen = (own[None] < 0) | ((own[None] >= row[:, None]) & (own[None] <= i))
    out = torch.empty(t, h, d, dtype=torch.float64)
    for hh in range(h):
        s = (q[:, hh].double() @ keys[hh // g].T * scale).masked_fill(~seen, float("-inf"))
        out[:, hh] = s.softmax(-1) @ vals[hh // g]
    return out.reshape(t, h * d)


def inputs(t, p, h, kvh, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(t, n, d, generator=g).mul(2).bfloat16() for n in (h, kvh, kvh))
    past = (torch.randn(kvh, p, d, generator=g).mul(2).bfloat16(), torch.randn(kvh, p, d, generator=g).bfloat16())
    return q, k, v, past if p else None


SHAPES = [  # tokens, past, rows' starts, heads, kv heads, head dim
    (100, 0, [0], 9, 3, 64),  # a prefix's first chunk: causal only
    (300, 200, [0], 4, 2, 64),  # a later chunk: the past not a multiple of the kernel's key block
    (700, 2292, [0, 330, 333, 660], 9, 3, 64),  # rubric rows, one of 3 tokens, blocks crossing rows
    (77, 45, [0, 10, 50], 4, 2, 128),
    (1, 5, [0], 2, 1, 32),
    (40, 0, [*range(40)], 2, 2, 32),  # rows of one token each: each sees only itself
]


@needs_kernels
@pytest.mark.parametrize("shape", SHAPES)
def test_attention_equals_the_definition_as_closely_as_torchs_flash_kernel(shape):
    t, p, starts, h, kvh, d = shape
    q, k, v, past = inputs(t, p, h, kvh, d)
    want = reference(q, k, v, past, starts, d**-0.5)
    got = B.attend(q, k, v, B.pack(*past, 1) if past else None, B.row_starts(starts, t), d**-0.5).double()
    flash = R.attend(q, k, v, past, starts, d**-0.5).double()
    err, flash_err = (got - want).abs().max().item(), (flash - want).abs().max().item()
    assert err <= 1.25 * flash_err + 1e-3, (err, flash_err)
    assert err < 0.03  # a bf16 rounding of outputs of size ~2


@needs_kernels
def test_a_row_never_sees_another_and_every_row_sees_the_whole_past():
    t, p, starts = 200, 150, [0, 70, 71, 160]
    q, k, v, past = inputs(t, p, 4, 2, 64, seed=1)
    rows = B.row_starts(starts, t)
    assert rows[69:72].tolist() == [0, 70, 71] and rows[-1] == 160
    base = B.attend(q, k, v, B.pack(*past, 1), rows, 0.125)
    k2, v2, q2 = k.clone(), v.clone(), q.clone()
    k2[71:160], v2[71:160], q2[71:160] = k2[71:160] * 3, -v2[71:160], q2[71:160] + 1  # the third row changed
    other = B.attend(q2, k2, v2, B.pack(*past, 1), rows, 0.125)
    unchanged = torch.ones(t, dtype=torch.bool)
    unchanged[71:160] = False
    assert torch.equal(base[unchanged], other[unchanged])  # bit for bit: masked keys add exactly 0
    assert not torch.equal(base[71:160], other[71:160])
    moved = B.attend(q, k, v, B.pack(past[0], -past[1], 1), rows, 0.125)
    assert ((moved - base).abs().amax(-1) > 0).all()  # the last past key matters to the first query too


@needs_kernels
def test_the_result_does_not_depend_on_the_thread_count_the_layout_or_what_lies_past_the_keys():
    q, k, v, past = inputs(130, 100, 4, 2, 64, seed=2)
    rows = B.row_starts([0, 64], 130)
    buf = torch.full((2, 300, 64), float("nan"), dtype=torch.bfloat16)  # the past in a larger buffer, NaN after it
    buf[:, :100] = past[0]
    vbuf = torch.full_like(buf, float("nan"))
    vbuf[:, :100] = past[1]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = B.attend(q, k, v, B.pack(buf[:, :100], vbuf[:, :100], 1), rows, 0.125)
    finally:
        torch.set_num_threads(threads)
    many = B.attend(q, k, v, B.pack(*past, 1), rows, 0.125)
    assert torch.isfinite(one).all() and torch.equal(one, many)
    head_major = q.transpose(0, 1).contiguous().transpose(0, 1)  # same values, a token's heads not one row
    assert torch.equal(B.attend(head_major, k, v, B.pack(*past, 1), rows, 0.125), many)


@needs_kernels
def test_rms_norm_and_rotary_equal_torchs_within_one_bf16_rounding(monkeypatch):
    g = torch.Generator().manual_seed(3)
    wide = torch.randn(300, 960, generator=g).mul(3).bfloat16()
    x, w = wide[:, :576], torch.randn(576, generator=g).bfloat16()  # strided rows, as q/k/v's output is
    q = wide[:, :576].view(300, 9, 64)
    freqs = torch.polar(torch.ones(300, 32), torch.randn(300, 32, generator=g))
    fast = {"norm": R.rms_norm(x, 1e-5), "weighed": R.rms_norm(x.contiguous(), 1e-5, w), "rotary": R.rotary(q, freqs)}
    monkeypatch.setattr(B, "ready", lambda: False)
    monkeypatch.setattr(B, "available", lambda *a: False)
    slow = {"norm": R.rms_norm(x, 1e-5), "weighed": R.rms_norm(x.contiguous(), 1e-5, w), "rotary": R.rotary(q, freqs)}
    for name in fast:
        a, b = fast[name].float(), slow[name].float()
        assert fast[name].shape == slow[name].shape
        assert ((a - b).abs() <= b.abs() / 128 + 1e-30).all(), name  # one bf16 step at most
        assert (a == b).float().mean() > 0.99, name  # and nearly always none


@needs_kernels
@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen2", "tiny-qwen3"])  # q/k/v biases; q and k norms
def test_the_rows_loop_takes_the_kernels_in_bf16_and_answers_as_with_torchs_ops(name):
    from transformers import AutoModelForCausalLM

    from lifesearch_local.llm.models import tiny_model_dir

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir(name), dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(6)
    prefix = torch.randint(20, 600, (130,), generator=g).tolist()
    rows = [torch.randint(20, 600, (n,), generator=g).tolist() for n in (1, 7, 39, 12)]
    forward = R.RowsForward(model)
    assert forward.attention == "amx"
    with torch.inference_mode():
        fast = forward.rows(rows, len(prefix), forward.prefix(prefix, 50)).float().log_softmax(-1)
        forward.attention = "flash"
        slow = forward.rows(rows, len(prefix), forward.prefix(prefix, 50)).float().log_softmax(-1)
    # bf16 rounds each op to 4e-3 of its value, in another order in each path: log-probs moved 0.03-0.05 here
    # (tiny-llama, tiny-qwen3), while a row reading another row's keys moves them by ~5 (the rows differ so)
    assert (fast - slow).abs().max() < 0.15
    assert (slow[0] - slow[1]).abs().max() > 1


def test_without_a_compiler_the_loop_keeps_torchs_ops(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("LIFESEARCH_KERNEL_CACHE", str(tmp_path))
    with pytest.raises(OSError, match="no C compiler"):
        B.build("no-such-cc")
    monkeypatch.setenv("CC", "no-such-cc")
    monkeypatch.setattr(B, "NEEDED", ())  # as if this CPU had every flag
    B._library.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=B.__name__):
            assert not B.ready()
        assert "torch's ops are used instead" in caplog.text and "no-such-cc" in caplog.text
        assert not B.available(torch.bfloat16, 64)
        assert list(tmp_path.iterdir()) == []
    finally:
        B._library.cache_clear()


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("LIFESEARCH_CPU_KERNELS", "0")
    B._library.cache_clear()
    try:
        assert not B.ready()
    finally:
        B._library.cache_clear()
