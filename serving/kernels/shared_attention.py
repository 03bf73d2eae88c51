"""Attention of many rows over one shared prefix KV: every row's queries against the prefix once (batch 1,
no per-row copy), merged exactly with each row's own suffix attention by log-sum-exp.

Used by shared-prefix decoding (serving.kernels.prefix_decode: the rubric rows of a report decoded over
its KV) and by the packed kernel's `shared` choice form (serving.kernels.kernel). Registered as the
attention implementation NAME; the model's forward gets the per-call state as `shared_prefix`.
On CPU both the many-query suffix prefill and the one-query decoding steps run torch's fused flash
attention twice (prefix, suffix), each returning its log-sum-exp, and merge the two exactly; elsewhere
(or without that kernel) a score-matrix form and a form that repeats the prefix for a few rows at a
time (within the token budget) compute the same.
"""

from __future__ import annotations

from typing import Any

from .._util import stop
from .attention import flash_cpu_op, lse_merge

NAME = "lifesearch_shared_prefix"
# Attention scores held at once per layer (rows × heads × queries × keys); the suffix prefill
# runs its queries in slices under this, so long prompts do not make a large transient.
SCORE_ELEMS = 1 << 22


class SharedPrefixKV:
    """The KV of one group's prefix (batch 1) and of its rows' suffixes (preallocated, per row)."""

    def __init__(self, prefix: list[tuple[Any, Any]], rows: int, length: int, budget: int):
        import torch

        self.prefix = prefix  # per layer: (kv_heads, P, head_dim) keys and values
        self.cursor = 0
        self.budget = budget
        self.suffix = [tuple(torch.empty((rows, k.shape[0], length, k.shape[-1]), dtype=k.dtype, device=k.device)
                             for _ in range(2)) for k, _ in prefix]

    def select(self, keep: Any) -> None:
        """Keep only the rows at indices `keep` (finished rows leave the batch)."""
        self.suffix = [(k.index_select(0, keep), v.index_select(0, keep)) for k, v in self.suffix]


def shared_prefix_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                            dropout: float = 0.0, scaling: float | None = None, shared_prefix: Any = None,
                            **kwargs: Any) -> tuple[Any, None]:
    """Attention of each row's new queries over the shared prefix KV and the row's own suffix KV.

    `attention_mask`: (rows, 1, queries, suffix keys so far) bool, True = visible; every prefix key is visible.
    """
    import torch

    if shared_prefix is None:
        raise RuntimeError(f"attention {NAME!r} needs the per-call `shared_prefix` state (prefix_decode, the kernel's shared form)")
    if any(kwargs.get(k) is not None for k in ("softcap", "s_aux", "sinks", "sliding_window")):
        raise RuntimeError("shared-prefix decoding does not support softcapping, sinks or sliding windows")
    st: SharedPrefixKV = shared_prefix
    pk, pv = st.prefix[module.layer_idx]
    sk, sv = st.suffix[module.layer_idx]
    b, h, q, d = query.shape
    kvh, c, p = key.shape[1], st.cursor, pk.shape[1]
    g = h // kvh
    sk[:, :, c : c + q] = key
    sv[:, :, c : c + q] = value
    ks, vs = sk[:, :, : c + q], sv[:, :, : c + q]
    scale = scaling if scaling is not None else d**-0.5
    if q > 1:
        fused = _suffix_prefill_fused(query, ks, vs, pk, pv, attention_mask, scale)
        if fused is not None:
            return fused, None
        return _suffix_prefill(query, ks, vs, pk, pv, attention_mask, scale, max(1, st.budget // (p + c + q)))
    fused = _decode_step_fused(query, ks, vs, pk, pv, attention_mask, scale)
    if fused is not None:
        return fused, None
    # heads are kv-major, so (rows, kv_heads, group × queries, dim) is a view: no key is repeated
    qs = query * scale
    out = torch.empty_like(query)
    step = max(1, SCORE_ELEMS // max(1, b * h * (p + c + q)))
    for a in range(0, q, step):
        n = min(step, q - a)
        qc = qs[:, :, a : a + n].reshape(b, kvh, g * n, d)
        # the prefix is one batch-1 tensor: every row's queries are stacked against it in one matmul
        sp = (qc.transpose(0, 1).reshape(kvh, b * g * n, d) @ pk.transpose(-1, -2)).view(kvh, b, g * n, p)
        ss = (qc @ ks.transpose(-1, -2)).view(b, kvh, g, n, c + q)
        ss = ss.masked_fill(~attention_mask[:, :, None, a : a + n], float("-inf")).view(b, kvh, g * n, c + q)
        probs = torch.cat([sp.transpose(0, 1), ss], dim=-1).float().softmax(dim=-1).to(query.dtype)
        op = probs[..., :p].transpose(0, 1).reshape(kvh, b * g * n, p) @ pv
        o = op.view(kvh, b, g * n, d).transpose(0, 1) + probs[..., p:] @ vs
        out[:, :, a : a + n] = o.reshape(b, h, n, d)
    return out.transpose(1, 2).contiguous(), None


def _decode_step_fused(query: Any, ks: Any, vs: Any, pk: Any, pv: Any, mask: Any, scale: float) -> Any:
    """One query per row on CPU: torch's fused attention over the prefix (every row's queries
    stacked, batch 1) and over each row's suffix, each returning its log-sum-exp, merged
    exactly; None where that kernel is not available (the score-matrix form runs instead)."""
    import torch

    op = _flash_cpu(query, pk)
    if op is None:
        return None
    b, h, _, d = query.shape
    kvh = ks.shape[1]
    g = h // kvh
    qs = query.reshape(b, kvh, g, d)
    o1, l1 = op(qs.transpose(0, 1).reshape(1, kvh, b * g, d), pk[None], pv[None], 0.0, False, scale=scale)
    bias = torch.zeros(mask.shape, dtype=query.dtype, device=query.device).masked_fill(~mask, float("-inf"))
    o2, l2 = op(qs, ks.contiguous(), vs.contiguous(), 0.0, False, attn_mask=bias, scale=scale)
    o1, l1 = o1.reshape(kvh, b, g, d).transpose(0, 1), l1.reshape(kvh, b, g).transpose(0, 1)
    return lse_merge(o1, l1, o2, l2).to(query.dtype).reshape(b, 1, h, d)


def _flash_cpu(query: Any, pk: Any) -> Any:
    """torch's fused CPU flash attention that also returns the log-sum-exp, where it applies (else None)."""
    op = flash_cpu_op()
    return None if op is None or query.device.type != "cpu" or pk.shape[1] == 0 else op


def _suffix_prefill_fused(query: Any, ks: Any, vs: Any, pk: Any, pv: Any, mask: Any, scale: float) -> Any:
    """Many queries per row on CPU: every row's queries stacked against the one prefix KV (batch 1: the prefix
    is never copied per row), then each row against its own suffix keys under `mask`, merged exactly.
    Returns (rows, queries, heads, dim), or None where the fused kernel is not available."""
    import torch

    op = _flash_cpu(query, pk)
    if op is None:
        return None
    b, h, q, d = query.shape
    kvh, k = ks.shape[1], ks.shape[2]
    g = h // kvh
    qs = query.reshape(b, kvh, g * q, d)  # heads are kv-major: each kv head's g query heads, q queries each
    o1, l1 = op(qs.transpose(0, 1).reshape(1, kvh, b * g * q, d), pk[None], pv[None], 0.0, False, scale=scale)
    m = mask[:, :, None].expand(b, 1, g, q, k).reshape(b, 1, g * q, k)
    bias = torch.zeros(m.shape, dtype=query.dtype, device=query.device).masked_fill(~m, float("-inf"))
    o2, l2 = op(qs, ks.contiguous(), vs.contiguous(), 0.0, False, attn_mask=bias, scale=scale)
    o1, l1 = o1.reshape(kvh, b, g * q, d).transpose(0, 1), l1.reshape(kvh, b, g * q).transpose(0, 1)
    out = lse_merge(o1, l1, o2, l2).to(query.dtype).reshape(b, h, q, d)
    return out.transpose(1, 2).contiguous()


def _suffix_prefill(query: Any, ks: Any, vs: Any, pk: Any, pv: Any, mask: Any, scale: float, rows_per: int) -> tuple[Any, None]:
    """Many queries per row (the rubric suffixes): fused SDPA over the prefix KV repeated for a
    slice of rows at a time (a transient within the token budget, one layer at a time); faster
    than the score-matrix form, which is kept for the one-query decoding steps."""
    import torch
    import torch.nn.functional as F

    b, h, q, _ = query.shape
    out = []
    for a in range(0, b, rows_per):
        n = min(rows_per, b - a)
        k = torch.cat([pk.unsqueeze(0).expand(n, -1, -1, -1), ks[a : a + n]], dim=2)
        v = torch.cat([pv.unsqueeze(0).expand(n, -1, -1, -1), vs[a : a + n]], dim=2)
        m = torch.cat([mask.new_ones((n, 1, q, pk.shape[1])), mask[a : a + n]], dim=-1)
        out.append(F.scaled_dot_product_attention(query[a : a + n], k, v, attn_mask=m, scale=scale,
                                                  enable_gqa=k.shape[1] != h))
    return torch.cat(out).transpose(1, 2).contiguous(), None


def register() -> str:
    """Make NAME usable as `attn_implementation` (idempotent); returns NAME."""
    from .attention import register_attention

    return register_attention(NAME, shared_prefix_attention)




def prefill_kv(model: Any, ids: list[int], chunk: int) -> list[tuple[Any, Any]]:
    """Per layer, the keys and values (kv_heads, len, head_dim) of `ids` run once through `model` (batch 1)
    in chunks of `chunk` tokens (a stop request is honoured between chunks)."""
    import torch
    from transformers import DynamicCache

    cfg = model.config
    device = next(model.parameters()).device
    if not ids:
        kvh = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        empty = torch.empty((kvh, 0, hd), dtype=next(model.parameters()).dtype, device=device)
        return [(empty, empty)] * cfg.num_hidden_layers
    cache = DynamicCache(config=cfg)
    for a in range(0, len(ids), chunk):
        stop.check()
        model(input_ids=torch.tensor([ids[a : a + chunk]], dtype=torch.long, device=device), past_key_values=cache,
              use_cache=True, logits_to_keep=1)
    return [(layer.keys[0], layer.values[0]) for layer in cache.layers]


def left_padded(suffixes: list[list[int]], offset: int, device: Any) -> tuple[Any, Any, Any, int]:
    """(ids, positions, (rows, 1, w, w) bool mask, w) of suffixes left-padded to one width after `offset`
    prefix tokens: every row's last token is the last column; a padding query sees itself only, so no
    softmax row is empty (its output is never read)."""
    import torch

    w = max(len(s) for s in suffixes)
    pad = torch.tensor([w - len(s) for s in suffixes], device=device)
    ids = torch.tensor([[0] * (w - len(s)) + list(s) for s in suffixes], dtype=torch.long, device=device)
    j = torch.arange(w, device=device)
    real = j[None, :] >= pad[:, None]
    pos = offset + (j[None, :] - pad[:, None]).clamp(min=0)
    eye = torch.eye(w, dtype=torch.bool, device=device)
    mask = ((j[None, :] <= j[:, None])[None] & real[:, None, :]) | eye
    return ids, pos, mask[:, None], w
