"""Typed results of the web layer: a fetched document, a typed failure, a search result, stats."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

# Why a fetch gave no page. The agent sees the kind, so it can decide to try elsewhere.
FailureKind = Literal[
    "blocked",  # 401/403/451: the site refuses us
    "challenge",  # a bot check / captcha page instead of content
    "paywall",  # 402, or a page marked not free whose text is only a teaser
    "timeout",  # the total time cap ran out (a stalled server)
    "too_large",  # body over the byte cap, raw or decompressed (gzip bomb)
    "too_many_redirects",  # over the redirect cap, or a redirect loop
    "not_found",  # 404 / 410
    "not_archived",  # as-of fetch: no capture at or before the cutoff
    "after_cutoff",  # a local-corpus page dated after the cutoff
    "digest_mismatch",  # an archived capture whose body does not match its CDX digest
    "robots_disallowed",  # robots.txt forbids the path for our user agent
    "unsupported_type",  # a content type or encoding we do not turn into text
    "unsafe_address",  # not http(s), or a host resolving to a non-global address
    "empty",  # the page decoded and extracted to no text at all
    "http_error",  # any other 4xx/5xx (after retries)
    "network_error",  # DNS failure, connection refused or reset
    "cache_corrupt",  # the cached entry or its body blob fails its recorded sha256 (edited, replaced, deleted)
]


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Document(_Rec):
    """A fetched page turned into markdown text."""

    type: Literal["document"] = "document"
    """Discriminator: always `document`."""
    url: str
    """The URL asked for."""
    final_url: str
    """The URL after redirects (for archive captures: the original URL archived)."""
    title: str | None = None
    """Page title from metadata, if any."""
    date: str | None = None
    """Publication date (ISO) from the page's metadata or the corpus manifest, if any."""
    text: str
    """Main content as markdown (tables and links kept); PDFs carry `[page N]` markers."""
    content_type: str
    """Media type without parameters, e.g. text/html or application/pdf."""
    status: int
    """HTTP status of the final response (200 for corpus pages)."""
    bytes: int
    """Size of the (decompressed) body in bytes."""
    encoding: str | None = None
    """Character encoding the body was decoded with (None for PDFs)."""
    fetched_at: str
    """UTC time the content was obtained (ISO seconds); kept as recorded when replayed."""
    elapsed_ms: float = 0.0
    """Wall time of the live fetch that produced it, in milliseconds."""
    cache_key: str
    """Key of this result in the web cache (normalized URL + as-of date, hashed)."""
    source: Literal["live", "archive", "corpus"] = "live"
    """Where the content came from: the live web, a Wayback capture, or the local corpus."""
    archived_at: str | None = None
    """Wayback capture timestamp (YYYYMMDDhhmmss) for archive documents."""
    body_sha256: str | None = None
    """sha256 of the raw body: the name of its content-addressed blob in the cache."""
    from_cache: bool = False
    """True when served from the cache rather than fetched in this run."""

    @property
    def ok(self) -> bool:
        return True

    def tally(self, stats: FetchStats) -> None:
        if self.from_cache or self.source == "corpus":
            stats.cached += self.from_cache
            stats.corpus += not self.from_cache
            stats.bytes_cached += self.bytes
            return
        stats.live += self.source == "live"
        stats.archive += self.source == "archive"
        stats.bytes_network += self.bytes

    def render(self) -> str:
        """The text shown to an agent: a short header, then the markdown."""
        head = [f"URL: {self.final_url}"]
        head += [f"Title: {self.title}"] if self.title else []
        head += [f"Date: {self.date}"] if self.date else []
        head += [f"Archived: {self.archived_at}"] if self.archived_at else []
        return "\n".join(head) + "\n\n" + self.text


class Failure(_Rec):
    """A typed reason why a fetch produced no page (never an empty page)."""

    type: Literal["failure"] = "failure"
    """Discriminator: always `failure`."""
    kind: FailureKind
    """What went wrong, from a fixed list the agent can act on."""
    url: str
    """The URL asked for."""
    message: str
    """A one-line human-readable detail."""
    status: int | None = None
    """HTTP status of the last response, when there was one."""
    final_url: str | None = None
    """The URL being fetched when it failed (after redirects), if it differs."""
    cache_key: str = ""
    """Key of this result in the web cache."""
    fetched_at: str = ""
    """UTC time of the attempt (ISO seconds)."""
    from_cache: bool = False
    """True when this recorded failure was replayed from the cache."""

    @property
    def ok(self) -> bool:
        return False

    def tally(self, stats: FetchStats) -> None:
        stats.failures[self.kind] = stats.failures.get(self.kind, 0) + 1
        stats.cached += self.from_cache

    def render(self) -> str:
        return f"[fetch failed: {self.kind}] {self.url}: {self.message}"


FetchResult = Annotated[Document | Failure, Field(discriminator="type")]
FETCH_RESULT: TypeAdapter[Document | Failure] = TypeAdapter(FetchResult)


class SearchResult(_Rec):
    """One organic search result, shaped as Serper returns it."""

    title: str
    """Result title."""
    link: str
    """Result URL."""
    snippet: str = ""
    """Short text from the page matching the query."""
    date: str | None = None
    """Publication date as the backend gave it (ISO where known); None when undated."""
    position: int
    """1-based rank after filtering."""


class FetchStats(BaseModel):
    """Counters for cost accounting, kept by one fetcher over its lifetime."""

    live: int = 0
    """Pages fetched from the live web in this run."""
    archive: int = 0
    """Pages fetched from the Wayback Machine in this run."""
    corpus: int = 0
    """Pages served from the local corpus."""
    cached: int = 0
    """Results (documents or recorded failures) served from the cache."""
    bytes_network: int = 0
    """Body bytes of the documents fetched over the network (after decompression)."""
    bytes_cached: int = 0
    """Body bytes of documents served from the cache or corpus."""
    retries: int = 0
    """Extra attempts made after 429/5xx or connection errors."""
    failures: dict[str, int] = Field(default_factory=dict)
    """Failures by kind (including replayed ones)."""

    def count(self, result: Document | Failure) -> None:
        """Add one result to the counters."""
        result.tally(self)


class FetchError(Exception):
    """A fetch that ends in a typed failure; the fetcher turns it into a `Failure` record."""

    def __init__(self, kind: FailureKind, message: str, status: int | None = None, final_url: str | None = None):
        super().__init__(message)
        self.kind, self.message, self.status, self.final_url = kind, message, status, final_url
