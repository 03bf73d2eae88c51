"""The local web layer: guarded fetching, search backends, a replay cache and as-of enforcement."""

from __future__ import annotations

import importlib
from typing import Any

# Exported names -> "module:attr", imported on first use so `lifesearch --help` stays light.
_EXPORTS: dict[str, str] = {
    "WebConfig": "lifesearch_local.web.config:WebConfig",
    "Document": "lifesearch_local.web.records:Document",
    "Failure": "lifesearch_local.web.records:Failure",
    "SearchResult": "lifesearch_local.web.records:SearchResult",
    "FetchStats": "lifesearch_local.web.records:FetchStats",
    "Fetcher": "lifesearch_local.web.fetcher:Fetcher",
    "fetch": "lifesearch_local.web.fetcher:fetch",
    "Searcher": "lifesearch_local.web.search:Searcher",
    "WebCache": "lifesearch_local.web.cache:WebCache",
    "ReplayMiss": "lifesearch_local.web.cache:ReplayMiss",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _EXPORTS[name].split(":")
    return getattr(importlib.import_module(module), attr)


__all__ = list(_EXPORTS)
