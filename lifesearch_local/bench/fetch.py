"""The fetch benchmark: sequential vs concurrent fetching vs replay, against a loopback server with latency."""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing as mp
import random
import tempfile
import time
from pathlib import Path
from typing import Protocol

TARGET_IDEAL_RATIO = 2.0  # the concurrent fetcher within 2x of the latency-bound ideal
TARGET_REPLAY_PPS = 300.0


class Inputs(Protocol):
    """What the benchmark is asked to do (the command's arguments)."""

    pages: int
    latency_ms: float
    concurrency: int
    page_kb: int


_WORDS = (
    "grid", "operators", "reported", "output", "prices", "capacity", "region", "annual", "statistical", "release",
    "revised", "figures", "solar", "wind", "storage", "demand", "households", "industry", "imports", "exports",
    "tariff", "policy", "survey", "growth", "decline", "quarter", "forecast", "market",
)


def make_page(i: int, kb: int) -> bytes:
    """An article page of about `kb` KB whose paragraphs all differ (extractors drop repeated ones)."""
    rng = random.Random(i)
    paras, size = [], 0
    while size < kb * 1024:
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(25, 45)))
        para = f"<p>{words.capitalize()} in region {rng.randint(1, 99)} rose {rng.randint(1, 40)} percent.</p>\n"
        paras.append(para)
        size += len(para)
    body = "".join(paras)
    return f"<html><head><title>Bench page {i}</title></head><body><article><h1>Page {i}</h1>\n{body}</article></body></html>".encode()


def _serve(conn, pages: int, kb: int, latency_s: float) -> None:
    """Child process: a keep-alive HTTP/1.1 server that waits `latency_s` before each response."""
    bodies = [make_page(i, kb) for i in range(pages)]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            for _ in range(100_000):  # requests on one keep-alive connection
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                await asyncio.sleep(latency_s)
                i = int(path.rsplit("/", 1)[-1]) if path.startswith("/page/") else -1
                body = bodies[i] if 0 <= i < pages else b"not found"
                status = b"200 OK" if 0 <= i < pages else b"404 Not Found"
                writer.write(b"HTTP/1.1 %s\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        conn.send(server.sockets[0].getsockname()[1])
        async with server:
            await asyncio.get_running_loop().run_in_executor(None, _wait_for_stop, conn)

    asyncio.run(main())


def _wait_for_stop(conn) -> None:
    with contextlib.suppress(EOFError, OSError):  # "stop", or the parent went away
        conn.recv()


async def _timed(fetcher, urls: list[str], limit: int) -> tuple[float, int]:
    """(seconds, documents) for fetching `urls` with at most `limit` in flight."""
    from lifesearch_local.runtime.concurrency import map_bounded

    t0 = time.perf_counter()
    results = await map_bounded(fetcher.fetch, urls, limit=limit, show=False)
    return time.perf_counter() - t0, sum(r.ok for r in results)


async def _measure(port: int, args: Inputs, cache_dir: Path) -> dict[str, tuple[float, int]]:
    from lifesearch_local.web.config import WebConfig
    from lifesearch_local.web.fetcher import Fetcher

    urls = [f"http://127.0.0.1:{port}/page/{i}" for i in range(args.pages)]
    base = {"allow_networks": ["127.0.0.0/8"], "respect_robots": False, "cache_dir": cache_dir}
    c = args.concurrency
    runs = {
        "sequential": (WebConfig(**base, mode="live", concurrency=1, per_host=1), 1),
        "concurrent": (WebConfig(**base, mode="record", concurrency=c, per_host=c), c),
        "replay": (WebConfig(**base, mode="replay", concurrency=c, per_host=c), c),
    }
    # Warm-up, not timed: the first extraction imports trafilatura and friends (about a second).
    from lifesearch_local.web.extract import extract_html

    extract_html(make_page(args.pages, args.page_kb), "utf-8")
    out = {}
    for name, (config, limit) in runs.items():
        async with Fetcher(config) as f:
            out[name] = await _timed(f, urls, limit)
    return out


def run_bench(args: Inputs) -> dict[str, tuple[float, int]]:
    """(seconds, documents) of each way of fetching, against a page server in a child process."""
    from lifesearch_local.errors import LifesearchError

    ctx = mp.get_context("spawn")  # a fresh interpreter: no inherited threads, and it works everywhere
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, args.pages, args.page_kb, args.latency_ms / 1000), daemon=True)
    proc.start()
    child.close()  # so a child that dies makes recv() fail instead of waiting forever
    try:
        if not parent.poll(60):
            raise LifesearchError("the bench server did not start within 60 s")
        port = parent.recv()
        with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
            return asyncio.run(_measure(port, args, Path(tmp)))
    finally:
        with contextlib.suppress(OSError):
            parent.send("stop")
        proc.join(5)
        if proc.is_alive():
            proc.terminate()


def summarize(args: Inputs, timings: dict[str, tuple[float, int]]) -> dict:
    latency = args.latency_ms / 1000
    rounds = math.ceil(args.pages / args.concurrency)
    ideal = args.pages / (rounds * latency) if latency > 0 else float("inf")
    pps = {k: args.pages / max(t, 1e-9) for k, (t, _) in timings.items()}
    return {
        "inputs": {"pages": args.pages, "latency_ms": args.latency_ms, "concurrency": args.concurrency, "page_kb": args.page_kb},
        "seconds": {k: round(t, 3) for k, (t, _) in timings.items()},
        "documents": {k: n for k, (_, n) in timings.items()},
        "pages_per_s": {k: round(v, 1) for k, v in pps.items()},
        "ideal_pages_per_s": round(ideal, 1),
        "ratios": {
            "concurrent_vs_sequential": round(pps["concurrent"] / pps["sequential"], 2),
            "ideal_vs_concurrent": round(ideal / pps["concurrent"], 2),
            "replay_vs_sequential": round(pps["replay"] / pps["sequential"], 1),
        },
        "targets": {
            "concurrent_within_2x_of_ideal": ideal / pps["concurrent"] <= TARGET_IDEAL_RATIO,
            "replay_at_least_300_pps": pps["replay"] >= TARGET_REPLAY_PPS,
        },
    }


def format_report(r: dict) -> str:
    i, pps, s = r["inputs"], r["pages_per_s"], r["seconds"]
    mark = {True: "met", False: "MISSED"}
    lines = [
        f"bench fetch: {i['pages']} pages of ~{i['page_kb']} KB, {i['latency_ms']:g} ms server latency, concurrency {i['concurrency']}",
        f"  sequential (live, 1 in flight)         {pps['sequential']:9.1f} pages/s  ({s['sequential']:.2f} s)",
        f"  concurrent (record into cache)         {pps['concurrent']:9.1f} pages/s  ({s['concurrent']:.2f} s)",
        f"  replay from cache (no network)         {pps['replay']:9.1f} pages/s  ({s['replay']:.2f} s)",
        f"  ideal, latency-bound                   {r['ideal_pages_per_s']:9.1f} pages/s",
        f"  concurrent / sequential  {r['ratios']['concurrent_vs_sequential']:.2f}x",
        f"  ideal / concurrent       {r['ratios']['ideal_vs_concurrent']:.2f}x  (target <= 2: {mark[r['targets']['concurrent_within_2x_of_ideal']]})",
        f"  replay / sequential      {r['ratios']['replay_vs_sequential']:.1f}x  (replay target >= 300 pages/s: {mark[r['targets']['replay_at_least_300_pps']]})",
    ]
    if len(set(r["documents"].values())) != 1 or r["documents"]["sequential"] != i["pages"]:
        lines.append(f"  WARNING: documents per run {r['documents']} (expected {i['pages']} each)")
    return "\n".join(lines)
