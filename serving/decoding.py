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


class JsonObjectEnd:
    """Finds where the first top-level JSON object of a growing text closes: braces are counted
    outside strings (escapes honoured), so a `}` inside the reason does not end the answer.
    Fed the whole text so far at each step; only the new characters are scanned."""

    def __init__(self) -> None:
        self.scanned = ""
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.end: int | None = None

    def feed(self, text: str) -> int | None:
        """The index one past the closing brace once the object is closed, else None."""
        if self.end is not None:
            return self.end
        if not text.startswith(self.scanned):  # a held-back partial character changed the tail
            self.__init__()
        # an incomplete multi-byte character decodes as U+FFFD; it is never a brace or a quote
        stable = len(text.rstrip(REPLACEMENT))
        for i in range(len(self.scanned), stable):
            if self._step(text[i]):
                self.end = i + 1
                break
        self.scanned = text[: self.end if self.end is not None else stable]
        return self.end

    def _step(self, ch: str) -> bool:
        if self.in_string:
            if self.escape:
                self.escape = False
            elif ch == "\\":
                self.escape = True
            elif ch == '"':
                self.in_string = False
            return False
        if ch == '"' and self.depth > 0:
            self.in_string = True
        elif ch == "{":
            self.depth += 1
        elif ch == "}" and self.depth > 0:
            self.depth -= 1
            return self.depth == 0
        return False


def json_object_end(text: str) -> int | None:
    """One past the closing brace of the first top-level JSON object in `text`, or None."""
    return JsonObjectEnd().feed(text)


def cut_after_json(text: str) -> tuple[str, bool]:
    """`text` up to the closing brace of its first JSON object, and whether there was one."""
    end = json_object_end(text)
    return (text[:end], True) if end is not None else (text, False)


def json_stopped(gen: Any, stop_after_json: bool) -> Any:
    """A Generation cut after its JSON object where the request asked for that (engines that
    cannot stop there themselves); finished by that stop, not by length."""
    if not stop_after_json:
        return gen
    text, cut = cut_after_json(gen.text)
    return gen.model_copy(update={"text": text, "finish_reason": "stop"}) if cut else gen
