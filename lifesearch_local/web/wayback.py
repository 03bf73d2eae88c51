"""As-of fetching: the last Wayback capture at or before a cutoff (CDX API, raw `id_` body, digest)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
from urllib.parse import urlencode

from lifesearch_local.web.extract import supported
from lifesearch_local.web.http import HttpClient, RawResponse
from lifesearch_local.web.records import FetchError
from serving import JSONError, loads

_CAPTURE_TS = re.compile(r"/web/(\d{8,14})id_/")


def cdx_url(base: str, url: str, cutoff: dt.date) -> str:
    query = {"url": url, "to": cutoff.strftime("%Y%m%d"), "output": "json", "limit": "-1", "filter": "statuscode:200"}
    return f"{base.rstrip('/')}/cdx/search/cdx?{urlencode(query)}"


def capture_url(base: str, timestamp: str, original: str) -> str:
    return f"{base.rstrip('/')}/web/{timestamp}id_/{original}"


async def last_capture(http: HttpClient, base: str, url: str, cutoff: dt.date) -> dict[str, str]:
    """The CDX row of the latest 200 capture at or before the cutoff; not_archived if none."""
    resp = await http.get(cdx_url(base, url, cutoff), robots=False, limit=5_000_000)
    text = resp.text().strip()
    try:
        rows = loads(text) if text else []
    except JSONError as e:
        raise FetchError("http_error", f"CDX answer is not JSON: {e}") from None
    if not isinstance(rows, list) or not all(isinstance(r, list) and all(isinstance(x, str) for x in r) for r in rows):
        raise FetchError("http_error", "CDX answer is not a list of rows of text")
    if len(rows) < 2:
        raise FetchError("not_archived", f"no archived capture of {url} at or before {cutoff}")
    header = rows[0]
    last = cutoff.strftime("%Y%m%d") + "235959"
    # Kept even if the server ignored `to`: a capture after the cutoff must never be served.
    captures = [dict(zip(header, r, strict=False)) for r in rows[1:]]
    captures = [c for c in captures if c.get("timestamp", "9") <= last]
    if not captures:
        raise FetchError("not_archived", f"no archived capture of {url} at or before {cutoff}")
    return max(captures, key=lambda c: c["timestamp"])


def _b32sha1(data: bytes) -> str:
    return base64.b32encode(hashlib.sha1(data).digest()).decode()


async def fetch_capture(http: HttpClient, base: str, url: str, cutoff: dt.date, *, verify: bool = True) -> tuple[RawResponse, str]:
    """(the capture's raw response, its timestamp); every failure is a FetchError."""
    row = await last_capture(http, base, url, cutoff)
    ts, original = row["timestamp"], row.get("original") or url
    try:
        resp = await http.get(capture_url(base, ts, original), robots=False, accept=supported)
    except FetchError as e:
        if e.kind == "not_found":
            raise FetchError("not_archived", f"capture {ts} of {url} is listed but not served") from e
        raise
    # The archive may redirect to a neighbouring capture; one after the cutoff is refused.
    m = _CAPTURE_TS.search(resp.url)
    served = m.group(1) if m else ts
    if served[:8] > cutoff.strftime("%Y%m%d"):
        raise FetchError("not_archived", f"the archive served capture {served}, after the cutoff {cutoff}")
    digest = row.get("digest", "")
    # The CDX digest is over the payload as captured: compare before and after content decoding.
    if verify and digest and digest not in (resp.raw_sha1_b32, _b32sha1(resp.body)):
        raise FetchError("digest_mismatch", f"capture {ts} of {url}: body does not match CDX digest {digest}")
    return resp, served
