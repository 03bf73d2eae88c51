"""The fetcher: corpus, cache modes, as-of (Wayback) and live fetching, returning Document or Failure."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterable

import httpcore

from lifesearch_local.errors import LifesearchError
from lifesearch_local.runtime.concurrency import map_bounded
from lifesearch_local.web.cache import ReplayMiss, WebCache, page_key
from lifesearch_local.web.config import WebConfig
from lifesearch_local.web.corpus import Corpus, CorpusEntry
from lifesearch_local.web.dates import after_cutoff
from lifesearch_local.web.decode import charset_param
from lifesearch_local.web.extract import (
    ExtractTimeout,
    extract,
    is_challenge,
    is_paywall,
    media_type,
    supported,
)
from lifesearch_local.web.http import HttpClient, RawResponse
from lifesearch_local.web.records import Document, Failure, FailureKind, FetchError, FetchStats
from lifesearch_local.web.ssrf import Resolver
from lifesearch_local.web.wayback import fetch_capture

# mode -> (read the cache, write the cache, use the network)
MODES: dict[str, tuple[bool, bool, bool]] = {
    "live": (False, False, True),
    "record": (False, True, True),
    "replay": (True, False, False),
    "replay-or-live": (True, True, True),
}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class Fetcher:
    """Fetches pages for one run; the as-of cutoff is the harness's, never the model's.

    `resolver` replaces DNS (tests map names to addresses); `connector` replaces the socket
    layer under the SSRF guard. Replay mode never creates an HTTP client at all.
    """

    def __init__(
        self,
        config: WebConfig | None = None,
        *,
        as_of: dt.date | None = None,
        cache: WebCache | None = None,
        resolver: Resolver | None = None,
        connector: httpcore.AsyncNetworkBackend | None = None,
    ):
        self.config = config or WebConfig()
        self.as_of = as_of
        self.read_cache, self.write_cache, self.network = MODES[self.config.mode]
        if (self.read_cache or self.write_cache) and cache is None:
            if self.config.cache_dir is None:
                raise LifesearchError(f"web mode {self.config.mode!r} needs a cache directory (cache_dir)")
            cache = WebCache(self.config.cache_dir)
        self.cache = cache
        self.corpus = Corpus.load(self.config.corpus_dirs)
        self.http = HttpClient(self.config, resolver=resolver, connector=connector)
        self.stats = FetchStats()

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def fetch(self, url: str, *, as_of: dt.date | None = None) -> Document | Failure:
        """One URL as a Document or a typed Failure; a replay miss raises ReplayMiss."""
        cutoff = as_of or self.as_of
        try:
            key = page_key(url, cutoff)
        except ValueError as e:
            result: Document | Failure = Failure(kind="unsafe_address", url=url, message=f"invalid URL: {e}", fetched_at=_now())
        else:
            result = self._from_corpus(url, key, cutoff) or self._from_cache(url, key, cutoff) or await self._from_network(url, key, cutoff)
        self.stats.count(result)
        self.stats.retries = self.http.retries
        return result

    async def fetch_many(self, urls: Iterable[str], *, as_of: dt.date | None = None, show: bool = False) -> list[Document | Failure]:
        """Many URLs concurrently (the config's limits apply); results in input order."""
        return await map_bounded(lambda u: self.fetch(u, as_of=as_of), urls, limit=self.config.concurrency, desc="fetch", show=show, unit="page")

    # -- sources ------------------------------------------------------------------------
    def _from_corpus(self, url: str, key: str, cutoff: dt.date | None) -> Document | Failure | None:
        entry = self.corpus.get(url)
        if entry is None:
            return None
        if after_cutoff(entry.date, cutoff, drop_undated=self.config.drop_undated):
            return self._failure("after_cutoff", url, key, f"the corpus page is dated {entry.date or '(undated)'}, after the cutoff {cutoff}")
        return corpus_document(entry, key)

    def _from_cache(self, url: str, key: str, cutoff: dt.date | None) -> Document | Failure | None:
        if not self.read_cache:
            return None
        hit = self.cache.get_page(key)  # type: ignore[union-attr]
        if hit is not None:
            return hit.model_copy(update={"from_cache": True})
        if not self.network:
            when = f" as of {cutoff}" if cutoff else ""
            raise ReplayMiss(f"replay: {url}{when} is not in the cache {self.cache.root}; record it first (mode record or replay-or-live)")  # type: ignore[union-attr]
        return None

    async def _from_network(self, url: str, key: str, cutoff: dt.date | None) -> Document | Failure:
        raw: RawResponse | None = None
        try:
            if cutoff is not None:
                base = self.config.wayback_url
                raw, stamp = await fetch_capture(self.http, base, url, cutoff, verify=self.config.verify_archive_digest)
                result = await asyncio.to_thread(build_document, url, key, raw, "archive", stamp, url, self._budget(raw))
            else:
                raw = await self.http.get(url, accept=supported)
                result = await asyncio.to_thread(build_document, url, key, raw, "live", None, None, self._budget(raw))
        except FetchError as e:
            result = self._failure(e.kind, url, key, e.message, status=e.status, final_url=e.final_url)
        if self.write_cache:
            body = raw.body if raw is not None and result.ok else None
            self.cache.put_page(key, url, cutoff, result, body)  # type: ignore[union-attr]
        return result

    def _budget(self, raw: RawResponse) -> float:
        """What is left of the fetch's time cap for extracting its body (at least a moment)."""
        return max(0.5, self.config.limits.timeout_s - raw.elapsed_ms / 1000)

    @staticmethod
    def _failure(kind: FailureKind, url: str, key: str, message: str, **kw: object) -> Failure:
        return Failure(kind=kind, url=url, message=message, cache_key=key, fetched_at=_now(), **kw)  # type: ignore[arg-type]


def build_document(
    url: str, key: str, raw: RawResponse, source: str, archived_at: str | None = None, final_url: str | None = None,
    timeout_s: float | None = None,
) -> Document | Failure:
    """Extract a response into a Document, or the Failure it really is (challenge, paywall, empty,
    timeout when extracting a PDF passes `timeout_s`)."""
    t0 = time.perf_counter()
    doc = page_document(url, key, raw.body, raw.media_type, raw.charset, raw.status, final_url or raw.url, source,
                        timeout_s)
    if doc.ok:
        doc.archived_at, doc.elapsed_ms = archived_at, raw.elapsed_ms + (time.perf_counter() - t0) * 1000  # type: ignore[union-attr]
    return doc


def corpus_document(entry: CorpusEntry, key: str) -> Document | Failure:
    body = entry.read()
    mt = media_type(entry.content_type, body)
    doc = page_document(entry.url, key, body, mt, charset_param(entry.content_type), 200, entry.url, "corpus")
    if doc.ok:
        doc.title, doc.date = doc.title or entry.title, entry.date or doc.date  # type: ignore[union-attr]
    return doc


def page_document(url: str, key: str, body: bytes, mt: str, charset: str | None, status: int, final_url: str, source: str,
                  timeout_s: float | None = None) -> Document | Failure:
    def fail(kind: FailureKind, message: str) -> Failure:
        return Failure(kind=kind, url=url, message=message, status=status, final_url=final_url, cache_key=key, fetched_at=_now())

    if not supported(mt):
        return fail("unsupported_type", f"content type {mt}")
    try:
        ex = extract(body, mt, charset, final_url, timeout_s)
    except ExtractTimeout as e:
        return fail("timeout", str(e))
    except Exception as e:  # a parser's own errors (a broken PDF) are many and unrelated
        return fail("unsupported_type", f"could not read the {mt} body: {type(e).__name__}: {e}")
    if is_challenge(ex.raw_html, status, ex.text):
        return fail("challenge", "a bot-check page, not content")
    if is_paywall(ex.raw_html, status, ex.text):
        return fail("paywall", f"only a {len(ex.text)}-character teaser behind a paywall")
    if not ex.text.strip():
        return fail("empty", f"the {mt} body has no extractable text")
    return Document(
        url=url,
        final_url=final_url,
        title=ex.title,
        date=ex.date,
        text=ex.text,
        content_type=mt,
        status=status,
        bytes=len(body),
        encoding=ex.encoding,
        fetched_at=_now(),
        cache_key=key,
        source=source,  # type: ignore[arg-type]
    )


async def fetch(url: str, config: WebConfig | None = None, *, as_of: dt.date | None = None, **kw: object) -> Document | Failure:
    """Fetch one URL with a fetcher made for the purpose (see Fetcher for the keywords)."""
    async with Fetcher(config, as_of=as_of, **kw) as f:  # type: ignore[arg-type]
        return await f.fetch(url)
