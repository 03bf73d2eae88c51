"""The web layer's configuration: one pydantic model other stages embed in their YAML configs."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from serving import Execution, Result

CacheMode = Literal["live", "record", "replay", "replay-or-live"]


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FetchLimits(_Cfg):
    """Caps on one fetch."""

    max_bytes: Result[int] = Field(10_000_000, gt=0)
    """Largest body accepted, counted both on the wire and after decompression."""
    timeout_s: Result[float] = Field(30.0, gt=0)
    """Total wall time for one fetch, from its first request: redirects, retries and body together."""
    connect_timeout_s: Result[float] = Field(10.0, gt=0)
    """Time to open one connection."""
    max_redirects: Result[int] = Field(5, ge=0)
    """Redirects followed before failing with too_many_redirects."""
    retries: Result[int] = Field(2, ge=0)
    """Extra attempts after a 429, a 5xx or a connection error."""
    backoff_s: Execution[float] = Field(0.5, ge=0)
    """First backoff delay; doubles each retry (Retry-After overrides it)."""
    max_backoff_s: Result[float] = Field(10.0, ge=0)
    """Longest wait between attempts; a larger Retry-After fails at once instead."""


class SearchConfig(_Cfg):
    """Which search backend to use and its settings."""

    backend: Result[str] = "local"
    """A name in the search registry: searxng, serper, local or replay."""
    num: Result[int] = Field(10, gt=0)
    """Results per query."""
    searxng_url: Result[str] = "http://127.0.0.1:8888"
    """Base URL of a self-hosted SearXNG with the JSON format enabled."""
    serper_url: Result[str] = "https://google.serper.dev/search"
    """Serper endpoint (used only when the key variable is set)."""
    serper_key_env: Execution[str] = "SERPER_API_KEY"
    """Environment variable holding the Serper API key."""
    index_dir: Result[Path | None] = None
    """Saved local BM25 index (from `lifesearch corpus build`); built from `corpus_dirs` if absent."""
    replay_backend: Result[str | None] = None
    """For `replay`: serve only results recorded from this backend (any backend when unset)."""
    timeout_s: Result[float] = Field(20.0, gt=0)
    """Total time for one search request."""
    retries: Result[int] = Field(2, ge=0)
    """Extra attempts after a 429, a 5xx or a connection error."""
    backoff_s: Execution[float] = Field(0.5, ge=0)
    """First backoff delay; doubles each retry."""


class WebConfig(_Cfg):
    """Fetching, caching, as-of enforcement and search."""

    mode: Result[CacheMode] = "live"
    """live (no cache), record (fetch and store), replay (cache only; a miss is an error), replay-or-live."""
    cache_dir: Result[Path | None] = None
    """Directory of the cache (blobs/ + index.sqlite); required unless mode is live."""
    allow_private: Result[bool] = False
    """Allow private and loopback addresses (never link-local, multicast or reserved). Lab use only."""
    allow_networks: Result[list[str]] = Field(default_factory=list)
    """CIDR ranges allowed although not global, e.g. 127.0.0.0/8 for loopback test servers."""
    user_agent: Result[str] = "lifesearch-local/0.1 (research benchmark; offline replay)"
    """User-Agent header, also the agent name matched in robots.txt."""
    respect_robots: Result[bool] = True
    """Check robots.txt (cached per origin) before fetching a live page."""
    concurrency: Execution[int] = Field(16, gt=0)
    """Requests in flight at once, over all hosts."""
    per_host: Execution[int] = Field(4, gt=0)
    """Requests in flight at once to one host."""
    http2: Execution[bool] = False
    """Offer HTTP/2 (needs the h2 package)."""
    limits: Result[FetchLimits] = Field(default_factory=FetchLimits)
    """Caps on size, time, redirects and retries."""
    wayback_url: Result[str] = "https://web.archive.org"
    """Base of the Wayback Machine (CDX API at /cdx/search/cdx, captures at /web/)."""
    verify_archive_digest: Result[bool] = True
    """Check an archived body against the CDX digest (base32 SHA-1)."""
    corpus_dirs: Result[list[Path]] = Field(default_factory=list)
    """Local corpora (manifest.jsonl + pages) whose URLs are served from disk instead of the web."""
    drop_undated: Result[bool] = False
    """With a cutoff, also refuse undated search results and corpus pages (default: keep them)."""
    search: Result[SearchConfig] = Field(default_factory=SearchConfig)
    """Search backend settings."""

    @field_validator("allow_networks")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for net in v:
            ipaddress.ip_network(net, strict=False)
        return v
