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
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=0.0, scale=scaling,
        enable_gqa=key.shape[1] != query.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


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
