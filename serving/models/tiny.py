"""Tiny random models for tests, benchmarks and the offline demo, built locally and deterministically.

The tokenizer is a byte-level BPE trained with `tokenizers` on texts the caller passes in
(lifesearch_local.llm.models gives the bundled prompts, sample tasks and web corpus); the models are random-weight Llama / Qwen2 / Qwen3 / Mistral configurations with grouped-query
attention and a 32k context. Nothing is downloaded. Builds are cached by content hash.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TINY_MODELS = ("tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-mistral")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Single tokens, but not special (as in Qwen's tokenizers): decoding keeps them, so the
# harness sees the model's <tool_call> tags.
MARKUP_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
VOCAB_SIZE = 8192
BUILD_VERSION = "4"  # bump when the recipe below changes

# A Qwen-style ChatML template with a thinking switch and Hermes tool calls, so the
# harness's template handling is exercised by the tiny models exactly as by real ones.
CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n\nYou may call one or more functions. Function signatures are within <tools></tools>:\n<tools>"
    "{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools>\n\n"
    "For each call, return a JSON object within <tool_call></tool_call> tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'user' %}<|im_start|>user\n{{ m.content }}<|im_end|>\n"
    "{% elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content or '' }}"
    "{% for c in (m.tool_calls or []) %}\n<tool_call>\n"
    '{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments if c.function.arguments is string else (c.function.arguments | tojson) }}}'
    "\n</tool_call>{% endfor %}<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}"
)

# Small, so that the suite and the demo spend their time in the harness rather than in matmuls
# (build 3 was 256 wide and 4 deep: the demo's judge took 4.4× longer; the suite passes on both);
# big enough for grouped-query heads, a KV cache over layers and spread-out probabilities.
_COMMON: dict[str, Any] = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    # Wider than the usual 0.02 so that random models give spread-out probabilities:
    # equivalence tests then compare values that actually differ between prompts.
    initializer_range=0.08,
    tie_word_embeddings=False,
    bos_token_id=None,
    eos_token_id=2,
    pad_token_id=0,
)
_ARCH: dict[str, tuple[str, dict[str, Any]]] = {
    "tiny-llama": ("LlamaConfig", {"rope_theta": 500000.0}),
    "tiny-qwen2": ("Qwen2Config", {"rope_theta": 1000000.0, "use_sliding_window": False}),
    "tiny-qwen3": ("Qwen3Config", {"rope_theta": 1000000.0, "head_dim": 32, "use_sliding_window": False}),
    "tiny-mistral": ("MistralConfig", {"rope_theta": 1000000.0, "sliding_window": None}),
}


def cache_root() -> Path:
    return Path(os.environ.get("LIFESEARCH_CACHE", Path.home() / ".cache" / "lifesearch-local"))


def train_tokenizer(texts: Sequence[str], vocab_size: int = VOCAB_SIZE, *, add_prefix_space: bool = False, fuse_words: bool = False):
    """Train a byte-level BPE `tokenizers.Tokenizer`.

    `fuse_words=True` skips the regex pre-split, so merges may fuse punctuation, spaces and
    words (e.g. `": true`); tests use it to check the first-differing-token logic.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=not fuse_words)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    return tok


def wrap_tokenizer(tok):
    """A transformers fast tokenizer around a `tokenizers.Tokenizer`, with the chat template."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=_COMMON["max_position_embeddings"],
    )


def tiny_config(name: str, **overrides: Any):
    """The transformers config of a tiny model (random weights come from `build_tiny`)."""
    import transformers

    if name not in _ARCH:
        raise ValueError(f"unknown tiny model {name!r}; choose from {', '.join(TINY_MODELS)}")
    cls_name, arch = _ARCH[name]
    cfg = getattr(transformers, cls_name)(**{**_COMMON, **arch, **overrides})
    return cfg


def _key(name: str, texts: Sequence[str], seed: int) -> str:
    h = hashlib.sha256(f"{BUILD_VERSION}|{name}|{seed}|{json.dumps(_COMMON, sort_keys=True)}|{_ARCH[name]}".encode())
    for t in texts:
        h.update(t.encode("utf-8"))
    return h.hexdigest()[:12]


def build_tiny(name: str, texts: Sequence[str], seed: int = 0) -> Path:
    """Directory of a ready-to-load tiny model whose tokenizer learns from `texts` (built on first
    use, then cached by name, seed and texts)."""
    out = cache_root() / "tiny" / f"{name}-s{seed}-{_key(name, texts, seed)}"
    if (out / "done").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several test workers or Ray actors may build at once
        if not (out / "done").exists():
            _build_into(out, name, texts, seed)
    return out


def _build_into(out: Path, name: str, texts: Sequence[str], seed: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = wrap_tokenizer(train_tokenizer(texts))
    cfg = tiny_config(name, eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
                      pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.generation_config.eos_token_id = cfg.eos_token_id
    model.generation_config.pad_token_id = cfg.pad_token_id
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "done").write_text("ok\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
