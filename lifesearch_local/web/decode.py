"""Bytes to text: bounded decompression (gzip bombs) and charset from BOM, header, meta, detection."""

from __future__ import annotations

import codecs
import re
import zlib

# GBK and GB2312 pages routinely use characters only GB18030 has; GB18030 is their superset.
# Latin-1 labels mean windows-1252 on the web (WHATWG).
# Keys are codecs.lookup() names; web labels Python does not know map through _LABELS first.
_ALIASES = {"gbk": "gb18030", "gb2312": "gb18030", "iso8859-1": "cp1252", "ascii": "cp1252"}
_LABELS = {"x-gbk": "gbk", "gb_2312-80": "gb2312", "gb_2312": "gb2312", "csgb2312": "gb2312", "x-sjis": "shift_jis"}
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)


class TooLarge(Exception):
    """The body is over the byte cap (raw or decompressed)."""


class UnsupportedEncoding(Exception):
    """A Content-Encoding we do not decode."""


class BoundedDecoder:
    """Content-Encoding decoder that never produces more than `limit` bytes in total."""

    def __init__(self, encoding: str, limit: int):
        enc = (encoding or "identity").strip().lower()
        wbits = {"identity": None, "": None, "gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
        if enc not in wbits:
            raise UnsupportedEncoding(f"content-encoding {enc!r}")
        self._z = None if wbits[enc] is None else zlib.decompressobj(wbits[enc])
        self._deflate = enc == "deflate"
        self.limit, self.out = limit, 0

    def feed(self, chunk: bytes) -> bytes:
        if self._z is None:
            data = chunk
        else:
            # max_length bounds the expansion of this chunk; leftover input means over the cap.
            data = self._inflate(chunk)
            if self._z.unconsumed_tail:
                raise TooLarge(f"decompressed body over {self.limit} bytes")
        self.out += len(data)
        if self.out > self.limit:
            raise TooLarge(f"body over {self.limit} bytes")
        return data

    def _inflate(self, chunk: bytes) -> bytes:
        room = self.limit - self.out + 1
        try:
            return self._z.decompress(chunk, room)  # type: ignore[union-attr]
        except zlib.error:
            if not (self._deflate and self.out == 0):
                raise
            # Some servers send raw deflate without the zlib header.
            self._z, self._deflate = zlib.decompressobj(-zlib.MAX_WBITS), False
            return self._z.decompress(chunk, room)

    def flush(self) -> bytes:
        data = b"" if self._z is None else self._z.flush()
        self.out += len(data)
        if self.out > self.limit:
            raise TooLarge(f"body over {self.limit} bytes")
        return data


def normalize_charset(label: str | None) -> str | None:
    """Python codec name for a charset label (with the web's aliases), or None if unknown."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    try:
        name = codecs.lookup(_LABELS.get(label, label)).name
    except LookupError:
        return None
    return _ALIASES.get(name, name)


def _try(body: bytes, label: str | None) -> str | None:
    enc = normalize_charset(label)
    if enc is None:
        return None
    try:
        body.decode(enc)
    except UnicodeDecodeError:
        # A stray bad byte keeps the declared charset; a charset the bytes contradict
        # (a GBK page labelled UTF-8 is common) falls through to the next source.
        bad = body.decode(enc, errors="replace").count("\ufffd")
        return enc if bad <= len(body) // 1000 else None
    return enc


def sniff_charset(body: bytes, header_charset: str | None, *, html: bool = True) -> str:
    """Pick the encoding: BOM, then the HTTP header, then a meta tag, then detection."""
    for bom, enc in _BOMS:
        if body.startswith(bom):
            return enc
    enc = _try(body, header_charset)
    if enc:
        return enc
    if html:
        m = _META.search(body[:4096])
        enc = _try(body, m.group(1).decode("ascii", "ignore") if m else None)
        if enc:
            return enc
    if not body:
        return "utf-8"
    from charset_normalizer import from_bytes

    best = from_bytes(body[:200_000]).best()
    guess = normalize_charset(best.encoding) if best else None
    return guess or "utf-8"


def decode_text(body: bytes, header_charset: str | None, *, html: bool = True) -> tuple[str, str]:
    """(text, encoding) for a text body; undecodable bytes become U+FFFD, never an exception."""
    enc = sniff_charset(body, header_charset, html=html)
    text = body.decode(enc, errors="replace")
    return text.lstrip("\ufeff"), enc


def charset_param(content_type: str | None) -> str | None:
    m = re.search(r"charset\s*=\s*[\"']?([^\"';\s]+)", content_type or "", re.I)
    return m.group(1) if m else None
