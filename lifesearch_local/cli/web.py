"""`lifesearch fetch`, `search`, `corpus build|search` and `cache verify`: the local web layer from the shell."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys


def register_fetch(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("fetch", help="fetch one URL as markdown (exit 1 on a typed failure)",
                       description="Fetch one URL through the local web layer (SSRF guard, caps, robots.txt, "
                       "charset detection, trafilatura to markdown, PDF text) and print the document, or the "
                       "typed failure with exit code 1. --as-of fetches the last archived capture at or before "
                       "the date.")
    f.add_argument("url")
    _common(f)
    f.set_defaults(func=run_fetch)


def register_search(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("search", help="search with a backend (searxng, serper, local, replay)",
                       description="Search and print Serper-shaped results (title, link, snippet, date, "
                       "position); --as-of drops results dated after the date.")
    _search_args(s)
    s.set_defaults(func=run_search)


def register_corpus(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("corpus", help="build or search a local BM25 index",
                       description="The local search backend: a BM25 index over corpora (manifest.jsonl + "
                       "pages, e.g. the bundled data/web) and/or the pages of a web cache.")
    csub = p.add_subparsers(dest="corpus_command", metavar="CMD")
    b = csub.add_parser("build", help="build a local BM25 index from corpora and/or a cache")
    b.add_argument("--out", required=True, help="directory to write the index into")
    b.add_argument("--corpus", action="append", default=[], help="corpus directory with manifest.jsonl (repeatable)")
    b.add_argument("--cache", help="also index the documents in this web cache")
    b.set_defaults(func=run_index)
    s = csub.add_parser("search", help="search a saved index (or corpora directly) with the local backend")
    _search_args(s)
    s.set_defaults(func=run_search, backend="local")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def register_cache(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="check a web cache",
                       description="Web cache maintenance. `verify` checks every index row against its row "
                       "checksum and every page body blob against its sha256.")
    csub = p.add_subparsers(dest="cache_command", metavar="CMD")
    v = csub.add_parser("verify", help="check every entry of a cache (exit 1 when anything is corrupt)",
                        description="Check a web cache: each index row against its checksum, each page's body "
                        "blob against its sha256 (missing or altered), stray blobs, SQLite's integrity check. "
                        "Prints one line per problem and a summary; exit 0 when clean, 1 when corrupt, 2 when "
                        "DIR is not a cache.")
    v.add_argument("dir", help="cache directory (holds index.sqlite and blobs/)")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=run_cache_verify)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def run_cache_verify(args: argparse.Namespace) -> int:
    import dataclasses
    import sqlite3
    from pathlib import Path

    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.web.cache import CacheCorrupt, WebCache
    from lifesearch_local.web.cache_key import CacheNotPrivate

    root = Path(args.dir)
    if not (root / "index.sqlite").is_file():
        raise LifesearchError(f"{root}: not a web cache (no index.sqlite); pass the directory given as cache_dir")
    try:
        report = WebCache(root).verify()
    except CacheNotPrivate:  # not damage: another user's (or an open) cache, refused in one line
        raise
    except (sqlite3.DatabaseError, CacheCorrupt) as e:
        print(f"{root}: CORRUPT: the index cannot be read ({e})", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**dataclasses.asdict(report), "ok": report.ok}, indent=2, ensure_ascii=False))
    else:
        for line in report.problems:
            print(line)
        print(f"{root}: {report.summary()}", file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1


def _search_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("query")
    s.add_argument("--backend", help="search backend (default: the config's, else local)")
    s.add_argument("--num", type=int, help="results wanted")
    s.add_argument("--index", help="saved local index directory (for --backend local)")
    s.add_argument("--searxng-url", help="base URL of a SearXNG instance")
    _common(s)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML file of web settings (the WebConfig fields); flags override it")
    p.add_argument("--as-of", type=dt.date.fromisoformat, help="cutoff date YYYY-MM-DD (archived pages, dated results)")
    p.add_argument("--cache", help="cache directory")
    p.add_argument("--mode", choices=["live", "record", "replay", "replay-or-live"], help="cache mode")
    p.add_argument("--allow-private", action="store_true", help="allow private and loopback addresses (lab use)")
    p.add_argument("--corpus", action="append", default=[], help="local corpus directory (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON")


def load_config(args: argparse.Namespace):
    """The config file (if any) with the command-line flags applied over it."""
    from pathlib import Path

    import yaml
    from pydantic import ValidationError

    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.web.config import WebConfig

    data = yaml.safe_load(Path(args.config).read_text()) if args.config else {}
    data = dict(data or {})
    search = dict(data.get("search") or {})
    flags = {"cache_dir": args.cache, "mode": args.mode, "allow_private": args.allow_private or None, "corpus_dirs": args.corpus or None}
    data.update({k: v for k, v in flags.items() if v is not None})
    sflags = {"backend": getattr(args, "backend", None), "index_dir": getattr(args, "index", None), "searxng_url": getattr(args, "searxng_url", None)}
    search.update({k: v for k, v in sflags.items() if v is not None})
    try:
        return WebConfig.model_validate({**data, "search": search})
    except ValidationError as e:
        raise LifesearchError(f"{args.config or 'web settings'}: {e}") from e


def run_fetch(args: argparse.Namespace) -> int:
    from lifesearch_local.runtime.concurrency import run_sync
    from lifesearch_local.web.fetcher import Fetcher

    config = load_config(args)

    async def go():
        async with Fetcher(config, as_of=args.as_of) as f:
            return await f.fetch(args.url)

    result = run_sync(go)
    print(result.model_dump_json(indent=2) if args.json else result.render(), file=sys.stdout if result.ok else sys.stderr)
    return 0 if result.ok else 1


def run_search(args: argparse.Namespace) -> int:
    from lifesearch_local.runtime.concurrency import run_sync
    from lifesearch_local.web.search import Searcher

    searcher = Searcher(load_config(args), as_of=args.as_of)
    results = run_sync(lambda: searcher.search(args.query, num=args.num))
    if args.json:
        print(json.dumps({"query": args.query, "organic": [r.model_dump() for r in results]}, indent=2, ensure_ascii=False))
        return 0
    for r in results:
        date = f" ({r.date})" if r.date else ""
        print(f"{r.position}. {r.title}{date}\n   {r.link}\n   {r.snippet}")
    return 0


def run_index(args: argparse.Namespace) -> int:
    from lifesearch_local.web.cache import WebCache
    from lifesearch_local.web.search.local import build_index

    index = build_index(corpus_dirs=args.corpus, cache=WebCache(args.cache) if args.cache else None)
    out = index.save(args.out)
    print(f"indexed {len(index.docs)} pages into {out}")
    return 0
