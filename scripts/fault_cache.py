#!/usr/bin/env python3
"""Scripted cache tampering (issue 16): record pages from a loopback server, tamper with the cache
three ways (blob overwritten, blob deleted, text edited in index.sqlite), replay and verify.

    python scripts/fault_cache.py [--pages 60] [--tamper 45] [--seed 7] [--dir DIR]

Passes when replay serves every tampered page as a `cache_corrupt` failure (never content),
every untouched page intact, and `WebCache.verify` (what `lifesearch cache verify` runs) reports
every tampered entry. Exit 0 when everything holds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lifesearch_local.web.cache import WebCache  # noqa: E402
from lifesearch_local.web.config import WebConfig  # noqa: E402
from lifesearch_local.web.fetcher import Fetcher  # noqa: E402


def page(i: int) -> bytes:
    return b"<html><body><article><p>" + f"Recorded page {i}. ".encode() * 40 + b"</p></article></body></html>"


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = page(int(self.path.strip("/p") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def fetch_all(urls: list[str], mode: str, cache_dir: Path) -> list:
    async def go() -> list:
        cfg = WebConfig(mode=mode, cache_dir=cache_dir, allow_networks=["127.0.0.0/8"], respect_robots=False)
        async with Fetcher(cfg) as f:
            return [await f.fetch(u) for u in urls]

    return asyncio.run(go())


def tamper(cache_dir: Path, docs: list, which: list[int]) -> dict[int, str]:
    cache, kinds = WebCache(cache_dir), {}
    for n, i in enumerate(which):
        kinds[i] = ("overwrite", "delete", "edit")[n % 3]
        if kinds[i] == "overwrite":
            cache.blob_path(docs[i].body_sha256).write_bytes(page(i) + b" ")
        elif kinds[i] == "delete":
            cache.blob_path(docs[i].body_sha256).unlink()
        else:
            con = sqlite3.connect(cache_dir / "index.sqlite")
            with con:
                con.execute("UPDATE pages SET result = replace(result, 'Recorded page', 'Forged page') WHERE key = ?",
                            (docs[i].cache_key,))
            con.close()
    return kinds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pages", type=int, default=60)
    p.add_argument("--tamper", type=int, default=45)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--dir", help="work directory (default: a new temp directory)")
    args = p.parse_args()
    cache_dir = Path(args.dir or tempfile.mkdtemp(prefix="fault_cache-")) / "cache"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = [f"http://127.0.0.1:{server.server_port}/p{i}" for i in range(args.pages)]
    recorded = fetch_all(urls, "record", cache_dir)
    server.shutdown()
    if not all(r.ok for r in recorded):
        print("RESULT: FAIL (recording failed)")
        return 1
    order = list(range(args.pages))
    random.Random(args.seed).shuffle(order)
    kinds = tamper(cache_dir, recorded, order[: args.tamper])
    replay = fetch_all(urls, "replay", cache_dir)  # the server is down: replay must not need it
    detected = sum(1 for i in kinds if replay[i].type == "failure" and replay[i].kind == "cache_corrupt")
    intact = sum(1 for i in range(args.pages) if i not in kinds and replay[i].ok and replay[i].text == recorded[i].text)
    forged = sum(1 for r in replay if r.ok and "Forged" in r.text)
    problems = len(WebCache(cache_dir).verify().problems)
    counts = {k: sum(v == k for v in kinds.values()) for k in ("overwrite", "delete", "edit")}
    ok = detected == len(kinds) and intact == args.pages - len(kinds) and forged == 0 and problems >= len(kinds)
    print(f"tampered {len(kinds)} of {args.pages} pages ({counts['overwrite']} overwritten, {counts['delete']} deleted, "
          f"{counts['edit']} edited in the index): replay detected {detected}, served forged text {forged}; "
          f"untouched pages intact {intact}/{args.pages - len(kinds)}; verify reported {problems} problem(s)")
    print(f"RESULT: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
