"""The `shared` form's own layer loop for Llama-family decoders on CPU: rubric rows packed without padding.

The transformers forward runs a batch as a padded (rows, width) tensor with a mask, and spends a third of
its CPU time outside matrix work on CPU (RMSNorm, rotary and SiLU as chains of element-wise ops over
strided halves, a mask bias rebuilt per layer, key copies for grouped-query heads, cache concatenation).
Here the rubric suffixes of a batch are one (tokens, hidden) matrix end to end (no padding, so no mask),
and per layer:
- q, k and v are one matrix multiply, on a copy of their weights made once: the input RMSNorm's weight
  folded in, and the rows of q and k reordered within each head so that the two rotary halves are
  interleaved. Attention scores are unchanged (q and k reordered alike), and rotary becomes one complex
  multiply (7× less time than the half-by-half form, measured);
- attention, in bf16 on a CPU with AMX, is serving.kernels.bf16_cpu: one pass over the report's keys
  (packed once per report for the rubric rows) and each row's own keys, its exponentials on AVX-512, its
  products on AMX tiles (torch's flash kernel is bound by its exponentials in bf16: 1.8-2× slower on
  drb-56's shapes). Elsewhere it is torch's fused flash attention, twice, merged exactly by log-sum-exp:
  every query of the batch against the report's KV (batch 1, each kv head's query heads stacked, the
  prefix never copied), and each rubric causally over its own keys (the query heads of a kv head as the
  batch, the keys shared by stride, never repeated); the merge writes the layer's output in place;
- the report's KV is written once into a preallocated buffer; residual adds and SiLU run in place;
- every linear of a layer (q/k/v together, o, gate and up together, down) runs through oneDNN on a copy
  of its weight packed once for it (`torch.ops.mkldnn`, the path torch's compiler takes on CPU), where
  torch has it: `F.linear` goes to a BLAS sgemm that reached 162 GFLOP/s on a (2048 × 576) × (576 × 1536)
  product at 2 threads on an AVX-512 EPYC, the packed oneDNN call 382 GFLOP/s (vLLM's CPU build computes
  its linears the same way). The output head uses the model's own weight;
- the MLP's SiLU and product and the two residual adds run inside those oneDNN calls, as post-ops on the
  fp32 accumulator (gate with SiLU; up times that; o and down plus the residual), on copies of gate and up
  with the post-attention norm's weight folded in: in bf16 on drb-56 these element-wise passes took a tenth
  of the rows' time as separate ops, and they round once instead of three times;
- the process keeps freed memory for reuse (serving._util.memory): each layer's large tensors are made anew,
  and fresh `mmap`s made every one of them page-fault in.

Applies to attention-only llama / mistral / qwen2 / qwen3 models (SiLU MLP, RMSNorm, standard rotary) on
CPU; anything else keeps the transformers forward (serving.kernels.kernel). Tests: this loop equals the
transformers forward (tests/serving/kernels/test_packed_rows.py), and the packed forms equal each prompt
alone (tests/serving/kernels/test_kernel.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

from .._util import stop
from .._util.memory import keep_freed_memory
from . import bf16_cpu
from .attention import flash_cpu_op

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")
_ONEDNN_ACT = {"none": "none", "silu": "swish"}  # oneDNN's name for SiLU
# Tokens a forward runs are padded to a multiple of this (≤ 63 more): see RowsForward._forward.
SHAPE_STEP = 64
log = logging.getLogger(__name__)


def config_supported(cfg: Any, device: str) -> bool:
    """Whether a model of this config on `device` runs this loop, as far as its config tells (the estimate
    counts the loop's batches where this holds; `supported` also checks the loaded modules)."""
    if device != "cpu" or getattr(cfg, "model_type", None) not in FAMILIES or getattr(cfg, "hidden_act", None) != "silu":
        return False
    return (getattr(cfg, "pretraining_tp", 1) or 1) == 1 and flash_cpu_op() is not None


def supported(model: Any) -> bool:
    """Whether this loop computes what the transformers forward of `model` computes."""
    if not config_supported(model.config, next(model.parameters()).device.type):
        return False
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or not all(hasattr(inner, a) for a in ("embed_tokens", "norm", "rotary_emb")):
        return False
    return all(_layer_ok(layer) for layer in layers) and _rotary_halves_equal(inner)


def _layer_ok(layer: Any) -> bool:
    attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    names = [(attn, "q_proj"), (attn, "k_proj"), (attn, "v_proj"), (attn, "o_proj"), (mlp, "gate_proj"),
             (mlp, "up_proj"), (mlp, "down_proj")]
    if any(getattr(m, n, None) is None for m, n in names) or not hasattr(attn, "scaling"):
        return False
    norms = [layer.input_layernorm, layer.post_attention_layernorm] + [getattr(attn, n) for n in ("q_norm", "k_norm")
                                                                     if hasattr(attn, n)]
    return all(hasattr(n, "variance_epsilon") and hasattr(n, "weight") for n in norms)


def _rotary_halves_equal(inner: Any) -> bool:
    """Rotary as one complex multiply needs cos/sin equal in both halves (every rope type of transformers
    builds them as cat(freqs, freqs)); checked on a few positions."""
    import torch

    p = next(inner.parameters())
    with torch.inference_mode():
        cos, sin = inner.rotary_emb(torch.zeros(1, 1, dtype=p.dtype, device=p.device),
                                    torch.arange(0, 4096, 511, device=p.device)[None])
    h = cos.shape[-1] // 2
    return bool(torch.equal(cos[..., :h], cos[..., h:]) and torch.equal(sin[..., :h], sin[..., h:]))


def rms_norm(x: Any, eps: float, weight: Any = None) -> Any:
    """transformers' RMSNorm (in fp32, then the weight, if any): one pass for the norm, one to scale."""
    import torch

    if x.dtype == torch.bfloat16 and x.device.type == "cpu" and bf16_cpu.ready():
        out = bf16_cpu.rms_norm(x, eps, weight)
        if out is not None:
            return out
    xf = x.float()
    var = torch.linalg.vector_norm(xf, dim=-1, keepdim=True).square_().div_(x.shape[-1])
    out = (xf * var.add_(eps).rsqrt_()).to(x.dtype)
    return out if weight is None else out.mul_(weight)


def interleave(w: Any, heads: int) -> Any:
    """Rows (heads × dim, …) reordered within each head from [first half, second half] to interleaved pairs."""
    d = w.shape[0] // heads
    return w.reshape(heads, 2, d // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def rotary(x: Any, freqs: Any) -> Any:
    """Rotary on interleaved (tokens, heads, dim): each (first-half, second-half) pair times its complex
    frequency (tokens, dim / 2), which is `x * cos + rotate_half(x) * sin` on the usual layout."""
    import torch

    if x.dtype == torch.bfloat16 and x.device.type == "cpu" and bf16_cpu.available(x.dtype, x.shape[-1]):
        out = bf16_cpu.rotary(x, freqs)
        if out is not None:
            return out
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * freqs[:, None]).reshape(x.shape).to(x.dtype)


def attend(q: Any, k: Any, v: Any, past: tuple[Any, Any] | None, starts: Sequence[int], scale: float) -> Any:
    """Attention of packed rows (tokens, heads, dim): every query over `past` (kv_heads, P, dim) keys, all
    visible, and causally over its own row's keys (rows begin at `starts`, end at the next start), merged
    exactly by log-sum-exp. Heads are kv-major (head = kv × g + i). Returns (tokens, heads × dim)."""
    import torch

    op = flash_cpu_op()
    t, h, d = q.shape
    kvh = k.shape[1]
    g = h // kvh
    out = torch.empty((t, kvh, g, d), dtype=q.dtype, device=q.device)
    o1 = l1 = None
    if past is not None and past[0].shape[1]:
        # each kv head's g query heads stacked as g × tokens queries against the one prefix KV
        qs = q.view(t, kvh, g, d).permute(1, 2, 0, 3).reshape(1, kvh, g * t, d)
        o1, l1 = op(qs, past[0][None], past[1][None], 0.0, False, scale=scale)
        o1, l1 = o1.view(kvh, g, t, d).permute(2, 0, 1, 3), l1[0].view(kvh, g, t)  # (t, kvh, g, d), views
    qg = q.view(t, kvh, g, d).permute(2, 1, 0, 3)  # (g, kvh, t, d): a kv head's query heads as the batch
    kg, vg = k.transpose(0, 1)[None], v.transpose(0, 1)[None]
    bounds = list(starts) + [t]
    for a, b in zip(bounds, bounds[1:]):
        shape = (g, kvh, b - a, d)  # keys expanded over the batch by a zero stride: never repeated
        o2, l2 = op(qg[:, :, a:b], kg[:, :, a:b].expand(shape), vg[:, :, a:b].expand(shape), 0.0, True, scale=scale)
        o2 = o2.permute(2, 1, 0, 3)  # (rows, kvh, g, d)
        if o1 is None:
            out[a:b] = o2
            continue
        w = torch.sigmoid(l1[:, :, a:b] - l2.transpose(0, 1)).permute(2, 0, 1)[..., None]  # the past's share
        if q.dtype == torch.float32:
            torch.lerp(o2, o1[a:b], w, out=out[a:b])
        else:
            out[a:b] = torch.lerp(o2.float(), o1[a:b].float(), w)
    return out.view(t, h * d)


class Linear:
    """`x @ weight.T + bias` for 2-D `x`, through oneDNN on a copy of the weight packed once for it where
    torch has that path (CPU; float32, or bfloat16 on a CPU with bf16 instructions), else `F.linear` on the
    weight as given."""

    def __init__(self, weight: Any, bias: Any = None, pack: bool = True):
        import torch

        self.weight, self.bias, self.packed = weight, bias, None
        mkldnn = getattr(torch.ops, "mkldnn", None)
        # bf16 only where the CPU computes it (elsewhere oneDNN may have no bf16 kernel to pack for)
        dtypes = (torch.float32, torch.bfloat16) if _bf16_here() else (torch.float32,)
        if (pack and weight.device.type == "cpu" and weight.dtype in dtypes
                and torch.backends.mkldnn.is_available() and hasattr(mkldnn, "_linear_pointwise")
                and hasattr(mkldnn, "_reorder_linear_weight")):
            try:
                self.packed = mkldnn._reorder_linear_weight(weight.detach().contiguous(), None)
            except RuntimeError as e:  # oneDNN found no kernel for this shape or ISA: the plain path works
                log.info("packed rows: a %s weight not packed for oneDNN (%s)", tuple(weight.shape), e)
            else:
                # the packed copy serves every call: a weight made for it (fused q/k/v, [gate | up]) is freed
                self.weight = None

    def __call__(self, x: Any, act: str = "none") -> Any:
        """The product, then `act` ("none" or "silu") applied to it: inside oneDNN's call where packed, on
        the fp32 accumulator before the product is rounded to the weight's dtype."""
        import torch
        import torch.nn.functional as F

        if self.packed is None:
            y = F.linear(x, self.weight, self.bias)
            return F.silu(y, inplace=True) if act == "silu" else y
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias, _ONEDNN_ACT[act], [], "")

    def then(self, x: Any, op: str, other: Any) -> Any:
        """The product `op` ("add" or "mul") `other` (same shape): one oneDNN call where packed (the product
        never written alone), else the plain product and the op in place."""
        import torch
        import torch.nn.functional as F

        if self.packed is None:
            y = F.linear(x, self.weight, self.bias)
            return y.add_(other) if op == "add" else y.mul_(other)
        return torch.ops.mkldnn._linear_pointwise.binary(x.contiguous(), other.contiguous(), self.packed, self.bias, op)


class RowsForward:
    """A supported model's layers run on packed rows: the model's own weights, but for one copy of each
    layer's q/k/v weights (norm-folded, rotary-interleaved) and, on oneDNN, one packed copy of every
    linear's weight (so up to twice the memory of the layers' weights)."""

    def __init__(self, model: Any):
        import torch

        self.model = model
        self.inner = model.model
        cfg = model.config
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.qkv, self.linears = [], []
        p = next(model.parameters())
        self.attention = "amx" if p.device.type == "cpu" and bf16_cpu.available(p.dtype, self.head_dim) else "flash"
        """Which attention runs: "amx" (serving.kernels.bf16_cpu) or "flash" (torch's, see `attend`)."""
        self._report: tuple[Any, int, dict[int, Any]] | None = None  # the report KV `rows` packed for "amx", per layer
        keep_freed_memory()  # this loop's tensors are large and made anew each layer: reuse, not page faults
        pack = _room_to_pack(self.inner.layers)
        with torch.no_grad():
            for layer in self.inner.layers:
                w, b, sizes, qn, kn = self._fused_qkv(layer)
                self.qkv.append((Linear(w, b, pack), sizes, qn, kn))
                a, m = layer.self_attn, layer.mlp
                self.linears.append((Linear(a.o_proj.weight, a.o_proj.bias, pack),
                                     GateUp(m, layer.post_attention_layernorm.weight, pack),
                                     Linear(m.down_proj.weight, m.down_proj.bias, pack)))

    def _fused_qkv(self, layer: Any) -> tuple[Any, Any, list[int], Any, Any]:
        """(weight, bias, sizes, q_norm weight, k_norm weight) of one layer's q/k/v as one linear."""
        import torch

        a, ln = layer.self_attn, layer.input_layernorm.weight
        parts = [(a.q_proj, self.heads), (a.k_proj, self.kv_heads), (a.v_proj, None)]
        weight = torch.cat([interleave(m.weight, n) if n else m.weight for m, n in parts]) * ln[None, :]
        bias = None
        if any(m.bias is not None for m, _ in parts):
            bias = torch.cat([(interleave(m.bias, n) if n else m.bias) if m.bias is not None
                              else weight.new_zeros(m.weight.shape[0]) for m, n in parts])
        norms = [interleave(getattr(a, n).weight, 1) if hasattr(a, n) else None for n in ("q_norm", "k_norm")]
        return weight.contiguous(), bias, [m.weight.shape[0] for m, _ in parts], *norms

    def prefix(self, ids: Sequence[int], chunk: int) -> list[tuple[Any, Any]]:
        """Per layer, the keys and values (kv_heads, len, dim) of the report prefix `ids`, in chunks of
        `chunk` tokens (a stop request is honoured between chunks), written into one buffer per layer.
        The keys are in this loop's interleaved rotary layout: they serve `rows`, not the transformers forward."""
        import torch

        self._report = None  # the last report's packed copy, no longer needed
        p = next(self.model.parameters())
        shape = (self.kv_heads, len(ids), self.head_dim)
        kv = [(torch.empty(shape, dtype=p.dtype, device=p.device), torch.empty(shape, dtype=p.dtype, device=p.device))
              for _ in self.inner.layers]
        for a in range(0, len(ids), chunk):
            stop.check()
            part = list(ids[a : a + chunk])
            self._forward(part, list(range(a, a + len(part))), [0], kv, a, write_at=a)
        return kv

    def rows(self, rows: Sequence[Sequence[int]], offset: int, past: list[tuple[Any, Any]]) -> Any:
        """Logits (rows, vocab) at each row's last token: every row continues after the `offset` tokens whose
        KV is `past` (per layer, from `prefix`), sees those and itself, never another row."""
        ids = [t for r in rows for t in r]
        pos = [offset + j for r in rows for j in range(len(r))]
        starts, n = [], 0
        for r in rows:
            starts.append(n)
            n += len(r)
        ends = [s + len(r) - 1 for s, r in zip(starts, rows)]
        x = self._forward(ids, pos, starts, past, offset, write_at=None)
        return self.model.lm_head(self.inner.norm(x[ends]))

    def _forward(self, ids: list[int], pos: list[int], starts: list[int], kv: list[tuple[Any, Any]], seen: int,
                 write_at: int | None) -> Any:
        """Hidden states (tokens, hidden) of packed rows; each attends to kv[:, :seen] and causally to its own
        row. With `write_at`, the rows' keys and values are also stored into kv at that position.

        The tokens run padded to a multiple of SHAPE_STEP by one more row of padding (its keys never stored,
        its states dropped): oneDNN builds a linear's primitive for every new number of tokens (about 15 ms
        each in bf16 on a 2-core Xeon, against 5 ms for the product), so a run over many reports, every batch
        a new size, would pay it in every batch; padded, the sizes repeat and the primitives are reused (six
        DeepResearch Bench reports judged cold in bf16: 2% less time)."""
        import torch

        n = len(ids)
        pad = -n % SHAPE_STEP
        if pad:
            ids, pos, starts = [*ids, *[0] * pad], [*pos, *[pos[-1]] * pad], [*starts, n]
        dev = next(self.model.parameters()).device
        x = self.inner.embed_tokens(torch.tensor(ids, dtype=torch.long, device=dev))
        cos, sin = self.inner.rotary_emb(x[None], torch.tensor([pos], dtype=torch.long, device=dev))
        h = cos.shape[-1] // 2
        freqs = torch.complex(cos[0, :, :h].float(), sin[0, :, :h].float())
        t, d = len(ids), self.head_dim
        rows = bf16_cpu.row_starts(starts, t) if self.attention == "amx" else None
        for i, layer in enumerate(self.inner.layers):
            attn = layer.self_attn
            qkv, sizes, qn, kn = self.qkv[i]
            o_proj, gate_up, down = self.linears[i]
            q, k, v = (y.view(t, -1, d) for y in qkv(rms_norm(x, layer.input_layernorm.variance_epsilon))
                       .split(sizes, dim=1))
            if qn is not None:
                q, k = rms_norm(q, attn.q_norm.variance_epsilon, qn), rms_norm(k, attn.k_norm.variance_epsilon, kn)
            q, k = rotary(q, freqs), rotary(k, freqs)
            if self.attention == "amx":
                a = bf16_cpu.attend(q, k, v, self._packed(kv, i, seen, write_at is None), rows, attn.scaling)
            else:
                a = attend(q, k, v, (kv[i][0][:, :seen], kv[i][1][:, :seen]) if seen else None, starts, attn.scaling)
            if write_at is not None:
                kv[i][0][:, write_at : write_at + n] = k[:n].transpose(0, 1)
                kv[i][1][:, write_at : write_at + n] = v[:n].transpose(0, 1)
            x = o_proj.then(a, "add", x)  # the residual added in its call
            norm = layer.post_attention_layernorm
            x = down.then(gate_up(rms_norm(x, norm.variance_epsilon, None if gate_up.folded else norm.weight)), "add", x)
        return x[:n]

    def _packed(self, kv: list[tuple[Any, Any]], i: int, seen: int, keep: bool) -> Any:
        """Layer i's first `seen` keys and values packed for the AMX kernel (None if none); with `keep`, once
        per report (the rubric rows' batches all read the same report KV)."""
        if not seen:
            return None
        if not keep:
            return bf16_cpu.pack(kv[i][0][:, :seen], kv[i][1][:, :seen], 1)
        if self._report is None or self._report[0] is not kv or self._report[1] != seen:
            self._report = (kv, seen, {})
        cache = self._report[2]
        if i not in cache:
            cache[i] = bf16_cpu.pack(kv[i][0][:, :seen], kv[i][1][:, :seen], 1)
        return cache[i]


@functools.cache
def _bf16_here() -> bool:
    from .._util.cpu_features import bf16_native

    return bool(bf16_native())


def _room_to_pack(layers: Any) -> bool:
    """Whether the packed copies of the layers' weights fit: at most half the memory available now
    (a large model on a small machine keeps `F.linear` on its own weights, slower, rather than run out)."""
    import psutil

    need = sum(p.numel() * p.element_size() for layer in layers for p in layer.parameters())
    free = psutil.virtual_memory().available
    if 2 * need > free:
        log.info("packed rows: %.1f GiB of layer weights, %.1f GiB free: linears on the model's own weights "
                 "(not packed for oneDNN)", need / 2**30, free / 2**30)
        return False
    return True


class GateUp:
    """The MLP's `silu(gate(x)) * up(x)`: where packed, gate with SiLU applied inside its oneDNN call and up
    multiplied by that inside its own (no [gate | up] tensor, no separate SiLU or product pass), on copies of
    the weights with the post-attention norm's weight folded in (`norm`); with no room to pack, each on the
    model's own weight (no copy) and the norm's weight applied by the caller."""

    def __init__(self, mlp: Any, norm: Any, pack: bool = True):
        gate, up = mlp.gate_proj, mlp.up_proj
        self.folded = pack  # `norm` in gate's and up's weights; unpacked, the caller applies it
        if pack:
            self.gate, self.up = (Linear((m.weight * norm[None, :]).contiguous(), m.bias) for m in (gate, up))
        else:
            self.gate, self.up = Linear(gate.weight, gate.bias, False), Linear(up.weight, up.bias, False)

    def __call__(self, x: Any) -> Any:
        return self.up.then(x, "mul", self.gate(x, "silu"))
