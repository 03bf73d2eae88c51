"""Decoding generated token ids to text without U+FFFD from multi-byte characters split across tokens."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

REPLACEMENT = "\ufffd"


@functools.lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte-level alphabet: each printable stand-in character -> its byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def _byte_level_bytes(tokenizer: Any, ids: Sequence[int]) -> bytes | None:
    """The raw bytes of `ids` for a byte-level BPE tokenizer (special tokens skipped, added tokens
    as their UTF-8), or None when a token is not in the byte-level alphabet (another tokenizer kind)."""
    table = _byte_decoder()
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = {i: t.content for i, t in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).items()}
    out = bytearray()
    for i in ids:
        if i in special:
            continue
        if i in added:
            out += added[i].encode("utf-8")
            continue
        token = tokenizer.convert_ids_to_tokens(int(i))
        if token is None or any(c not in table for c in token):
            return None
        out += bytes(table[c] for c in token)
    return bytes(out)


def decode_generated(tokenizer: Any, ids: Sequence[int]) -> str:
    """Decode a generated id sequence whole; bytes that never complete a UTF-8 character (a cut at
    max_tokens, or a model emitting a lone byte token) are dropped instead of becoming U+FFFD.
    A U+FFFD the model spelled out as complete bytes is kept."""
    text = tokenizer.decode(list(ids), skip_special_tokens=True)
    if REPLACEMENT not in text:
        return text
    raw = _byte_level_bytes(tokenizer, ids)
    if raw is not None:
        return raw.decode("utf-8", errors="ignore")
    # Other tokenizers (SentencePiece byte fallback): hold back an incomplete tail of up to 4 bytes.
    for k in range(1, min(4, len(ids)) + 1):
        if not text.endswith(REPLACEMENT):
            break
        text = tokenizer.decode(list(ids[: len(ids) - k]), skip_special_tokens=True)
    return text
