"""Body to markdown: trafilatura for HTML, pypdf for PDF, decoded text otherwise; block-page checks."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass

from .decode import decode_text

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain", "text/markdown", "text/csv", "application/json", "text/xml", "application/xml")
PDF_TYPES = ("application/pdf",)

# Bot checks: strong signs that a page is a challenge rather than content (matched lower-cased).
_CHALLENGE = (
    "cf-chl-", "challenge-platform", "<title>just a moment", "checking your browser", "attention required! | cloudflare",
    "verify you are human", "verify you are a human", "are you a robot", "px-captcha", "_incapsula_resource",
    "ddos-guard", "g-recaptcha", "h-captcha", "enable javascript and cookies to continue",
)
_NOT_FREE = re.compile(r"""["']isaccessibleforfree["']\s*:\s*["']?false""")
_PAYWALL = (
    "paywall", "subscribe to continue reading", "subscribe to keep reading", "subscribe to read",
    "available to subscribers", "for subscribers only", "already a subscriber?",
)
TEASER_CHARS = 1500  # extracted text shorter than this next to paywall signs is a teaser


@dataclass
class Extracted:
    """Text and metadata pulled out of one body."""

    text: str
    title: str | None = None
    date: str | None = None
    encoding: str | None = None
    raw_html: str = ""


def media_type(content_type: str | None, body: bytes = b"") -> str:
    """The media type without parameters; sniffed from the body when the header says nothing useful."""
    mt = (content_type or "").split(";")[0].strip().lower()
    if mt and mt not in ("application/octet-stream", "binary/octet-stream"):
        return mt
    head = body[:1024].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        return "text/html"
    return mt or "application/octet-stream"


def supported(mt: str) -> bool:
    return mt in HTML_TYPES or mt in TEXT_TYPES or mt in PDF_TYPES


def _strip_xml_decl(html: str) -> str:
    # lxml refuses str input that still declares an encoding; the text is already decoded.
    return re.sub(r"^\s*<\?xml[^>]*\?>", "", html, count=1)


def _fallback_text(html: str) -> str:
    import trafilatura

    return (trafilatura.html2txt(html) or "").strip()


def extract_html(body: bytes, charset: str | None, url: str | None = None) -> Extracted:
    """Decode (before trafilatura sees it), then markdown with tables and links, plus metadata."""
    import trafilatura
    from trafilatura.metadata import extract_metadata

    html, enc = decode_text(body, charset, html=True)
    html = _strip_xml_decl(html)
    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_tables=True,
        include_links=True,
        include_comments=False,
        with_metadata=False,
    )
    text = (text or "").strip() or _fallback_text(html)
    # Dates from metadata and the URL only: guesses from the running text cost more than the
    # extraction itself and are too unreliable to hold a page against a cutoff.
    meta = extract_metadata(html, default_url=url, extensive=False) if html.strip() else None
    title = (meta.title if meta else None) or _title_tag(html)
    return Extracted(text=text, title=title, date=meta.date if meta else None, encoding=enc, raw_html=html)


def _title_tag(html: str) -> str | None:
    m = re.search(r"<title[^>]*>(.*?)</title>", html[:20000], re.I | re.S)
    if m is None:
        return None
    return re.sub(r"\s+", " ", m.group(1)).strip() or None


def extract_pdf(body: bytes, charset: str | None = None, url: str | None = None) -> Extracted:
    """Text of every page, each after a `[page N]` marker; title and date from the PDF info."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(body))
    pages = [f"[page {i}]\n{(p.extract_text() or '').strip()}" for i, p in enumerate(reader.pages, 1)]
    text = "\n\n".join(pages) if any(p.split("\n", 1)[1] for p in pages) else ""
    info = reader.metadata
    title = str(info.title) if info and info.title else None
    created = info.creation_date if info else None
    return Extracted(text=text, title=title, date=created.date().isoformat() if created else None)


def extract_plain(body: bytes, charset: str | None = None, url: str | None = None) -> Extracted:
    text, enc = decode_text(body, charset, html=False)
    return Extracted(text=text.strip(), encoding=enc)


EXTRACTORS: dict[str, Callable[[bytes, str | None, str | None], Extracted]] = {
    **{t: extract_html for t in HTML_TYPES},
    **{t: extract_plain for t in TEXT_TYPES},
    **{t: extract_pdf for t in PDF_TYPES},
}


def extract(body: bytes, mt: str, charset: str | None, url: str | None = None) -> Extracted:
    """Dispatch on the media type (which must be `supported`)."""
    return EXTRACTORS[mt](body, charset, url)


def is_challenge(html: str, status: int, text: str, headers_challenge: bool = False) -> bool:
    """A bot-check page: flagged by the server, or its signs on an error or a near-empty page."""
    if headers_challenge:
        return True
    if status not in (403, 429, 503) and len(text) >= TEASER_CHARS:
        return False  # a real page may mention captchas; only short or refused pages are checks
    low = html[:100_000].lower()
    return any(m in low for m in _CHALLENGE)


def is_paywall(html: str, status: int, text: str) -> bool:
    """402, or a page marked not free (or showing a subscribe wall) whose text is only a teaser."""
    if status == 402:
        return True
    if len(text) >= TEASER_CHARS:
        return False
    low = html[:200_000].lower()
    return _NOT_FREE.search(low) is not None or any(m in low for m in _PAYWALL)
