"""An SDPA attention function for CPU that keeps grouped-query attention un-repeated under a mask.

transformers' `sdpa` repeats K/V heads whenever a mask is given (to stay on CUDA's fast
kernels); on CPU, torch's SDPA handles GQA with a mask natively, and the packed kernel
always passes a mask, so repeating costs copies for nothing. Registered under NAME.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NAME = "lifesearch_sdpa"
_REGISTERED: set[str] = set()


def gqa_sdpa_forward(module: Any, query, key, value, attention_mask, dropout: float = 0.0,
                     scaling: float | None = None, is_causal: bool | None = None, **kwargs: Any):
    import torch.nn.functional as F
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if attention_mask is None or query.device.type != "cpu":
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    mask = attention_mask[..., : key.shape[-2]]
    fast = _causal_chunk(query, key, value, mask, scaling)
    if fast is not None:
        return fast, None
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=0.0, scale=scaling,
        enable_gqa=key.shape[1] != query.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


def flash_cpu_op() -> Any:
    """torch's fused CPU flash attention that also returns the log-sum-exp, or None on a torch without it."""
    import torch

    return getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def lse_merge(o1: Any, l1: Any, o2: Any, l2: Any) -> Any:
    """Two attentions over disjoint key sets, as one softmax over both: weights from their log-sum-exps (fp32)."""
    import torch

    top = torch.maximum(l1, l2)
    w1, w2 = (l1 - top).exp()[..., None], (l2 - top).exp()[..., None]
    return (w1 * o1.float() + w2 * o2.float()) / (w1 + w2)


def _causal_chunk(query, key, value, mask, scale):
    """A prefill chunk after a cache (or alone): `mask` plain causal over the chunk's own keys with every
    earlier key visible. SDPA with such a boolean mask takes torch's unfused math kernel on CPU (2–3× slower
    on a 1,024-token chunk of smollm2-135m); here the fused flash kernel runs twice, over the earlier keys
    and causally over the chunk, and the two are merged exactly by their log-sum-exps. None for any other mask."""
    import torch

    op = flash_cpu_op()
    b, h, q, _ = query.shape
    past = key.shape[-2] - q
    if op is None or mask.dtype != torch.bool or past < 0 or tuple(mask.shape[:2]) != (1, 1) or mask.shape[-2] != q:
        return None
    m = mask[0, 0]
    if not (m[:, :past].all() and torch.equal(m[:, past:], torch.ones(q, q, dtype=torch.bool, device=m.device).tril())):
        return None
    g = h // key.shape[1]
    k, v = (key.repeat_interleave(g, 1), value.repeat_interleave(g, 1)) if g > 1 else (key, value)
    scale = scale if scale is not None else query.shape[-1] ** -0.5
    o2, l2 = op(query, k[:, :, past:].contiguous(), v[:, :, past:].contiguous(), 0.0, True, scale=scale)
    if past == 0:
        return o2.transpose(1, 2).contiguous()
    o1, l1 = op(query, k[:, :, :past].contiguous(), v[:, :, :past].contiguous(), 0.0, False, scale=scale)
    out = lse_merge(o1, l1, o2, l2).to(query.dtype)
    return out.transpose(1, 2).contiguous()


def register_attention(name: str, forward: Callable[..., Any]) -> str:
    """Make `name` usable as `attn_implementation`, computed by `forward` with SDPA's masks
    (idempotent); returns `name`."""
    if name not in _REGISTERED:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(name, forward)
        AttentionMaskInterface.register(name, sdpa_mask)
        _REGISTERED.add(name)
    return name


def register() -> str:
    """Make NAME usable as `attn_implementation` (idempotent); returns NAME."""
    return register_attention(NAME, gqa_sdpa_forward)
