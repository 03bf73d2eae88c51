"""Every typed failure of a fetch, each produced by a loopback server behaving badly."""

from __future__ import annotations

import gzip
import socket
import time

from tests.helpers.web import fetch_all, fetch_one, make_config
from tests.helpers.web_server import Reply, counter_route, slow_body

PAGE = b"<html><body><article><p>" + b"Useful content about the topic at hand. " * 20 + b"</p></article></body></html>"
MB = 1_000_000


def test_stalled_server_times_out(server):
    server.routes["/stall"] = Reply(body=PAGE, delay=30)
    server.routes["/stall-body"] = Reply(body=slow_body(server, b"<html><body>", 30))
    config = make_config(respect_robots=False, limits={"timeout_s": 0.5, "retries": 0})
    t0 = time.perf_counter()
    results, _ = fetch_all(config, [server.url("/stall"), server.url("/stall-body")])
    assert [r.kind for r in results] == ["timeout", "timeout"]
    assert time.perf_counter() - t0 < 20  # at the 0.5 s timeout, not after the server's 30 s stall


def test_fifty_megabytes_is_too_large(server):
    chunk = b"x" * 65536
    sent = {"chunked": 0, "declared": 0}

    def body(name):
        for _ in range(50 * MB // len(chunk)):
            sent[name] += len(chunk)
            yield chunk

    server.routes["/big-chunked"] = Reply(body=body("chunked"))
    server.routes["/big-declared"] = Reply(body=body("declared"), headers={"Content-Length": str(50 * MB)})
    config = make_config(respect_robots=False, limits={"max_bytes": 1 * MB})
    results, _ = fetch_all(config, [server.url("/big-chunked"), server.url("/big-declared")])
    assert [r.kind for r in results] == ["too_large", "too_large"]
    assert "Content-Length" in results[1].message  # refused from the header, before reading
    # the reader stopped past the cap: the server could send little more than the cap and its socket buffers
    assert sent["chunked"] < 20 * MB and sent["declared"] < 20 * MB, sent


def test_gzip_bomb_is_too_large(server):
    bomb = gzip.compress(b"\0" * (50 * MB), compresslevel=9)
    assert len(bomb) < 100_000
    server.routes["/bomb"] = Reply(body=bomb, headers={"Content-Encoding": "gzip"})
    result = fetch_one(make_config(respect_robots=False, limits={"max_bytes": 1 * MB}), server.url("/bomb"))
    assert result.kind == "too_large" and "decompressed" in result.message


def test_redirect_loop_and_long_chain(server):
    server.routes["/a"] = Reply(302, headers={"Location": "/b"})
    server.routes["/b"] = Reply(301, headers={"Location": server.url("/a")})
    for i in range(10):
        server.routes[f"/r{i}"] = Reply(302, headers={"Location": f"/r{i + 1}"})
    config = make_config(respect_robots=False, limits={"max_redirects": 5})
    loop, chain = fetch_all(config, [server.url("/a"), server.url("/r0")])[0]
    assert loop.kind == "too_many_redirects" and "loop" in loop.message
    assert chain.kind == "too_many_redirects" and server.hits["/r6"] == 0


def test_redirect_followed_to_final_url(server):
    server.routes["/old"] = Reply(301, headers={"Location": "/new"})
    server.routes["/new"] = Reply(body=PAGE)
    doc = fetch_one(make_config(respect_robots=False), server.url("/old"))
    assert doc.ok and doc.final_url == server.url("/new") and doc.url == server.url("/old")


def test_429_then_success_honours_retry_after(server):
    server.routes["/busy"] = counter_route(Reply(429, b"slow down", headers={"Retry-After": "0.3"}), Reply(body=PAGE))
    # A long backoff proves the wait came from Retry-After, not from the policy.
    config = make_config(respect_robots=False, limits={"backoff_s": 30.0, "max_backoff_s": 30.0})
    t0 = time.perf_counter()
    results, fetcher = fetch_all(config, [server.url("/busy")])
    elapsed = time.perf_counter() - t0
    assert results[0].ok and server.hits["/busy"] == 2
    assert 0.3 <= elapsed < 20  # Retry-After's 0.3 s, not the policy's 30 s
    assert fetcher.stats.retries == 1


def test_persistent_5xx_is_http_error_after_bounded_retries(server):
    server.routes["/down"] = Reply(503, b"<html><body>maintenance</body></html>")
    result = fetch_one(make_config(respect_robots=False, limits={"retries": 2}), server.url("/down"))
    assert result.kind == "http_error" and result.status == 503
    assert server.hits["/down"] == 3


def test_retry_after_over_the_cap_fails_at_once(server):
    server.routes["/later"] = Reply(429, b"", headers={"Retry-After": "3600"})
    result = fetch_one(make_config(respect_robots=False), server.url("/later"))
    assert result.kind == "http_error" and result.status == 429 and server.hits["/later"] == 1


CHALLENGE = b"""<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>
<div id="cf-chl-widget">Checking your browser before accessing the site.</div>
<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1"></script></body></html>"""


def test_challenge_pages(server):
    server.routes["/cf"] = Reply(503, CHALLENGE)
    server.routes["/captcha"] = Reply(200, b"<html><body><h1>Are you a robot?</h1><div class='g-recaptcha'></div></body></html>")
    server.routes["/flagged"] = Reply(403, b"<html><body>denied</body></html>", headers={"cf-mitigated": "challenge"})
    results, _ = fetch_all(make_config(respect_robots=False), [server.url(p) for p in ("/cf", "/captcha", "/flagged")])
    assert [r.kind for r in results] == ["challenge", "challenge", "challenge"]
    assert server.hits["/cf"] == 1  # a challenge is not retried


def test_status_failures(server):
    server.routes["/forbidden"] = Reply(403, b"<html><body>Forbidden</body></html>")
    server.routes["/gone"] = Reply(410, b"")
    server.routes["/pay"] = Reply(402, b"")
    server.routes["/teapot"] = Reply(418, b"")
    urls = [server.url(p) for p in ("/forbidden", "/missing", "/gone", "/pay", "/teapot")]
    results, _ = fetch_all(make_config(respect_robots=False), urls)
    assert [r.kind for r in results] == ["blocked", "not_found", "not_found", "paywall", "http_error"]
    assert [r.status for r in results] == [403, 404, 410, 402, 418]


def test_paywall_teaser(server):
    teaser = b"""<html><head><script type="application/ld+json">{"@type": "NewsArticle", "isAccessibleForFree": false}</script>
    </head><body><article><p>The first two sentences of a story. Subscribe to continue reading.</p></article></body></html>"""
    server.routes["/story"] = Reply(body=teaser)
    assert fetch_one(make_config(respect_robots=False), server.url("/story")).kind == "paywall"


def test_connection_refused_is_network_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = fetch_one(make_config(respect_robots=False, limits={"retries": 1}), f"http://127.0.0.1:{port}/")
    assert result.kind == "network_error"


def test_failure_renders_for_the_agent(server):
    result = fetch_one(make_config(respect_robots=False), server.url("/missing"))
    assert result.render().startswith("[fetch failed: not_found]")
