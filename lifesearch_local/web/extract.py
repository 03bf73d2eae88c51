"""Body to markdown: trafilatura for HTML, pypdf for PDF, decoded text otherwise; block-page checks."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass

from lifesearch_local.web.decode import decode_text

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


def extract_html(body: bytes, charset: str | None, url: str | None = None, *, favor_recall: bool = False) -> Extracted:
    """Decode (before trafilatura sees it), then markdown with tables and links, plus metadata.
    `favor_recall` keeps more of a page that is all content (an imported report: its lists and
    references) at the price of some boilerplate on a web page."""
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
        favor_recall=favor_recall,
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


MAX_PDF_PAGES = 200  # pages extracted from one PDF; the rest are named, not read


def extract_pdf(body: bytes, charset: str | None = None, url: str | None = None, max_pages: int = MAX_PDF_PAGES) -> Extracted:
    """Text of the first `max_pages` pages, each after a `[page N]` marker (a note names the pages
    left out); title and date from the PDF info. In this process, unbounded in time: what the
    fetcher runs on a body from the network is `extract_pdf_bounded`."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(body))
    n = len(reader.pages)
    pages = [f"[page {i}]\n{(reader.pages[i - 1].extract_text() or '').strip()}" for i in range(1, min(n, max_pages) + 1)]
    text = "\n\n".join(pages) if any(p.split("\n", 1)[1] for p in pages) else ""
    if text and n > max_pages:
        text += f"\n\n[pages {max_pages + 1}-{n} not extracted: over the {max_pages}-page cap]"
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


class ExtractTimeout(Exception):
    """Extraction ran past its time cap and was killed."""


def extract_pdf_bounded(body: bytes, timeout_s: float, max_pages: int = MAX_PDF_PAGES) -> Extracted:
    """`extract_pdf` in a child process killed after `timeout_s` (ExtractTimeout): a thread cannot
    be stopped, and a small PDF whose pages share one heavy content stream takes minutes."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    # the child imports this very package, wherever it came from (a checkout on sys.path, an install)
    path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]))
    try:
        res = subprocess.run([sys.executable, "-m", "lifesearch_local.web.pdf_worker", str(max_pages)], input=body,
                             capture_output=True, timeout=timeout_s, check=False, env={**os.environ, "PYTHONPATH": path})
    except subprocess.TimeoutExpired:  # run() kills the child before raising
        raise ExtractTimeout(f"PDF text extraction passed the {timeout_s:.1f} s left of the fetch's time cap") from None
    if res.returncode != 0:
        last = (res.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1]
        raise ValueError(f"the PDF reader failed: {last[:300]}")
    return Extracted(**json.loads(res.stdout))


def extract(body: bytes, mt: str, charset: str | None, url: str | None = None, timeout_s: float | None = None) -> Extracted:
    """Dispatch on the media type (which must be `supported`); with `timeout_s`, a PDF is read in
    a child process killed at that time (ExtractTimeout)."""
    if mt in PDF_TYPES and timeout_s is not None:
        return extract_pdf_bounded(body, timeout_s)
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
