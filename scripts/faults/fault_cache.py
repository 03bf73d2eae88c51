#!/usr/bin/env python3
"""Scripted cache tampering (a replayed page must be what was fetched, or fail): record pages from a loopback
server, tamper with the cache seven ways (blob overwritten, blob deleted, text edited in index.sqlite, a
forged row with its checksum set to NULL, a forged row with its unkeyed checksum recomputed, a blob replaced
by a FIFO, a blob replaced by a symlink to /dev/zero), replay and verify.

    python scripts/faults/fault_cache.py [--pages 60] [--tamper 45] [--seed 7] [--dir DIR]

Passes when replay serves every tampered page as a `cache_corrupt` failure (never content),
every untouched page intact, and `WebCache.verify` (what `lifesearch cache verify` runs) reports
every tampered entry. Exit 0 when everything holds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lifesearch_local.web.cache import WebCache, row_sha256  # noqa: E402
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


KINDS = ("overwrite", "delete", "edit", "forge_null", "forge_recomputed", "fifo", "devzero")
FORGERIES = ("edit", "forge_null", "forge_recomputed")


def _forge_row(cache_dir: Path, key: str, how: str) -> None:
    """Put forged text in a page's index row: checksums untouched (edit), the row's checksums set
    to NULL (forge_null), or its unkeyed checksum recomputed over the forged row (forge_recomputed)."""
    con = sqlite3.connect(cache_dir / "index.sqlite")
    with con:
        con.execute("UPDATE pages SET result = replace(result, 'Recorded page', 'Forged page') WHERE key = ?", (key,))
        if how == "forge_null":
            keyed = "row_mac" in {r[1] for r in con.execute("PRAGMA table_info(pages)")}
            con.execute(f"UPDATE pages SET row_sha256 = NULL{', row_mac = NULL' if keyed else ''} WHERE key = ?", (key,))
        elif how == "forge_recomputed":
            key_, url, as_of, result, body = con.execute(
                "SELECT key, url, as_of, result, body_sha256 FROM pages WHERE key = ?", (key,)).fetchone()
            con.execute("UPDATE pages SET row_sha256 = ? WHERE key = ?", (row_sha256(key_, url, as_of, result, body), key))
    con.close()


def tamper(cache_dir: Path, docs: list, which: list[int]) -> dict[int, str]:
    cache, kinds = WebCache(cache_dir), {}
    for n, i in enumerate(which):
        kinds[i] = KINDS[n % len(KINDS)]
        blob = cache.blob_path(docs[i].body_sha256)
        if kinds[i] == "overwrite":
            blob.write_bytes(page(i) + b" ")
        elif kinds[i] == "delete":
            blob.unlink()
        elif kinds[i] == "fifo":
            blob.unlink()
            os.mkfifo(blob)
        elif kinds[i] == "devzero":
            blob.unlink()
            os.symlink("/dev/zero", blob)
        else:
            _forge_row(cache_dir, docs[i].cache_key, kinds[i])
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
    report = WebCache(cache_dir).verify()
    problems = len(report.problems)
    named = sum(1 for i in kinds if any(recorded[i].cache_key in p or (recorded[i].body_sha256 or "-") in p
                                        for p in report.problems))
    counts = {k: sum(v == k for v in kinds.values()) for k in KINDS}
    forgeries = sum(counts[k] for k in FORGERIES)
    forgeries_detected = sum(1 for i, k in kinds.items() if k in FORGERIES and replay[i].type == "failure")
    ok = (detected == len(kinds) and intact == args.pages - len(kinds) and forged == 0 and named == len(kinds)
          and forgeries_detected == forgeries)
    print(f"tampered {len(kinds)} of {args.pages} pages ({', '.join(f'{counts[k]} {k}' for k in KINDS)}): "
          f"replay detected {detected}, served forged text {forged}; forgeries detected {forgeries_detected}/{forgeries}; "
          f"untouched pages intact {intact}/{args.pages - len(kinds)}; verify reported {problems} problem(s), "
          f"naming {named}/{len(kinds)} tampered entries")
    print(f"RESULT: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
