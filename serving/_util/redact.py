"""Secret redaction: every configured secret, in every encoding it may be shown in, becomes `***`.

One function for logs, records, errors and tool observations (`lifesearch_local` imports it from
here; `serving` imports nothing from `lifesearch_local`). A secret is registered when it is read
from the environment (`secret_from_env`). Forms caught, case-insensitively: the raw value (so
upper- and lower-cased too), URL-encoded (with any `safe` set, every byte, or twice), JSON-escaped
(`\\uXXXX` too), any mix of these character by character, hex, and base64 (standard and URL-safe,
padded or not) of any text that contains the value at any offset — `Bearer <key>`, `user:<key>`,
`<key>:` — in which case the whole base64 token is masked.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_SECRET_CHARS = 6  # shorter values would mask ordinary words; no real API key is this short
_MIN_B64_CORE = 8  # a shorter base64 fragment could occur by chance
_B64_SET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]*=*")
_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def _b64_cores(secret: bytes) -> set[str]:
    """The base64 characters fixed by `secret` alone, for each of the 3 alignments it can have in a
    longer text: any base64 of a text containing the secret contains one of them."""
    cores = set()
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + secret).decode()
        start, end = -(-k * 8 // 6), (k + len(secret)) * 8 // 6
        core = enc[start:end]
        if len(core) >= _MIN_B64_CORE:
            cores |= {core, core.translate(str.maketrans("+/", "-_"))}
    return cores


def _plain_forms(secret: str) -> set[str]:
    forms = {secret, quote(secret, safe=""), quote_plus(secret), secret.encode().hex()}
    for ascii_only in (True, False):
        escaped = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        forms |= {escaped, escaped.replace("/", "\\/")}
    return forms


def _char_forms(secret: str) -> str:
    """A pattern for `secret` with each character in any of the forms it may be escaped to, mixed
    freely: itself, percent-encoded once or more (`%2F`, `%252F`, …: `quote` with any `safe`, every
    byte encoded, double encoding), or JSON `\\uXXXX` escaped (once or inside another JSON string)."""
    parts = []
    for ch in secret:
        pct = "".join(f"%(?:25)*{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
        alts = [re.escape(ch), pct] + ([rf"\\+u{ord(ch):04x}"] if ord(ch) < 0x10000 else [])
        if ch == "/":
            alts.append(r"\\+/")
        parts.append(f"(?:{'|'.join(alts)})")
    return "".join(parts)


def _compile(secrets: set[str]) -> re.Pattern[str] | None:
    if not secrets:
        return None
    plain = sorted({f for s in secrets for f in _plain_forms(s)}, key=len, reverse=True)
    cores = sorted({c for s in secrets for c in _b64_cores(s.encode())}, key=len, reverse=True)
    b64 = f"(?P<b64>{'|'.join(map(re.escape, cores))})|" if cores else ""
    mixed = "|".join(_char_forms(s) for s in sorted(secrets, key=len, reverse=True))
    return re.compile(b64 + f"(?:{'|'.join(map(re.escape, plain))})|{mixed}", re.IGNORECASE)


def register_secret(value: str | None) -> None:
    """Redact `value` from now on in this process (values under MIN_SECRET_CHARS are ignored)."""
    global _pattern
    if not value or len(value.strip()) < MIN_SECRET_CHARS:
        return
    with _lock:
        if value not in _secrets:
            _secrets.add(value)
            _pattern = _compile(_secrets)


def secret_from_env(name: str) -> str | None:
    """The environment variable's value (None when unset or empty), registered for redaction."""
    value = os.environ.get(name) or None
    register_secret(value)
    return value


def redact(text: str) -> str:
    """`text` with every registered secret masked, whatever its encoding."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    out, last = [], 0
    for m in pattern.finditer(text):
        start, end = max(m.start(), last), m.end()
        if end <= last:  # inside a base64 token already masked
            continue
        if m.lastgroup == "b64":
            # Mask the whole token the core sits in. Widened here, not in the pattern: a leading
            # `[…]*` in the pattern would backtrack quadratically over a long base64 run.
            while start > last and text[start - 1] in _B64_SET:
                start -= 1
            end = _B64_RUN.match(text, end).end()  # type: ignore[union-attr]
        out += [text[last:start], MASK]
        last = end
    return "".join(out) + text[last:] if out else text


def redact_obj(obj: Any) -> Any:
    """Strings anywhere inside dicts and lists (keys too) redacted; other values unchanged."""
    if _pattern is None:
        return obj
    try:
        return _walk(obj)
    except RecursionError:  # absurdly deep data: mask the serialized text instead
        return redact(json.dumps(obj, ensure_ascii=False))


def _walk(obj: Any) -> Any:
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {_walk(k): _walk(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_walk(v) for v in obj]
    return obj


def install_log_redaction() -> None:
    """Redact the final message of every log record this process creates (idempotent)."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "redacting", False):
        return

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        if _pattern is not None:
            record.msg, record.args = redact(record.getMessage()), None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return record

    make.redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(make)
