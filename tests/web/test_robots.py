"""robots.txt: disallowed paths refused, fetched once per origin, checked on redirect targets."""

from __future__ import annotations

import pytest

from tests.helpers.web import fetch_all, fetch_one, make_config
from tests.helpers.web_server import Reply

PAGE = b"<html><body><article><p>" + b"Useful content about the topic at hand. " * 20 + b"</p></article></body></html>"


def test_robots_disallowed_and_fetched_once_per_origin(server):
    server.routes["/robots.txt"] = Reply(body=b"User-agent: *\nDisallow: /private\n", content_type="text/plain")
    server.routes["/public"] = Reply(body=PAGE)
    server.routes["/private/report"] = Reply(body=PAGE)
    urls = [server.url("/public"), server.url("/private/report"), server.url("/public")]
    results, _ = fetch_all(make_config(), urls)
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].kind == "robots_disallowed"
    assert server.hits["/private/report"] == 0 and server.hits["/robots.txt"] == 1


def test_robots_checked_on_redirect_target(server):
    server.routes["/robots.txt"] = Reply(body=b"User-agent: lifesearch-local\nDisallow: /members\n", content_type="text/plain")
    server.routes["/go"] = Reply(302, headers={"Location": "/members/page"})
    assert fetch_one(make_config(), server.url("/go")).kind == "robots_disallowed"
    assert server.hits["/members/page"] == 0


def test_missing_robots_allows_everything(server):
    server.routes["/page"] = Reply(body=PAGE)
    assert fetch_one(make_config(), server.url("/page")).ok


def robots(server, body: bytes | None = None, **reply) -> None:
    server.routes["/robots.txt"] = Reply(body=body or b"", content_type="text/plain", **reply)
    for path in ("/page", "/private/x", "/files/report.pdf", "/files/report.pdf.html", "/aXYZb", "/aXYZb/ok"):
        server.routes[path] = Reply(body=PAGE)


def test_a_robots_txt_that_errors_or_stalls_disallows_everything(server):
    """RFC 9309 2.3.1.4: a 5xx or an unreachable robots.txt means complete disallow."""
    robots(server, status=503)
    got = fetch_one(make_config(), server.url("/page"))
    assert got.kind == "robots_disallowed" and "unreachable (HTTP 503)" in got.message
    assert server.hits["/page"] == 0
    robots(server, b"User-agent: *\nAllow: /\n", delay=2.0)  # slower than the fetch's timeout
    got = fetch_one(make_config(limits={"timeout_s": 0.5, "retries": 0}), server.url("/page"))
    assert got.kind == "robots_disallowed" and "unreachable (timeout)" in got.message and server.hits["/page"] == 0


@pytest.mark.parametrize("status", [401, 403, 404, 410])
def test_a_robots_txt_that_is_unavailable_allows_everything(server, status):
    """RFC 9309 2.3.1.3: a 4xx means no rules."""
    robots(server, b"User-agent: *\nDisallow: /\n", status=status)
    assert fetch_one(make_config(), server.url("/page")).ok


def test_a_robots_txt_over_500_kib_is_parsed_not_ignored(server):
    """RFC 9309 2.5: at least the first 500 KiB are parsed; a longer file keeps its first rules."""
    pad = b"# " + b"x" * 78 + b"\n"
    body = b"User-agent: *\nDisallow: /private\n" + pad * 6000 + b"Disallow: /page\n" + pad * 6000  # 960 KB
    assert len(body) > 900_000 and body.index(b"Disallow: /page") < 500 * 1024
    robots(server, body)
    results, _ = fetch_all(make_config(), [server.url("/private/x"), server.url("/page")])
    assert [r.kind for r in results] == ["robots_disallowed", "robots_disallowed"]


def test_wildcards_and_end_anchors(server):
    robots(server, b"User-agent: *\nDisallow: /*.pdf$\nDisallow: /a*b\nAllow: /a*b/ok\n")
    urls = [server.url(p) for p in ("/files/report.pdf", "/files/report.pdf.html", "/aXYZb", "/aXYZb/ok")]
    results, _ = fetch_all(make_config(), urls)
    assert [r.ok for r in results] == [False, True, False, True]


def test_redirects_are_followed_five_hops(server):
    """RFC 9309 2.3.1.2: the rules a robots.txt redirect chain of five hops reaches are followed."""
    robots(server)
    server.routes["/robots.txt"] = Reply(301, headers={"Location": "/r1"})
    for i in range(1, 5):
        server.routes[f"/r{i}"] = Reply(302, headers={"Location": f"/r{i + 1}"})
    server.routes["/r5"] = Reply(body=b"User-agent: *\nDisallow: /private\n", content_type="text/plain")
    results, _ = fetch_all(make_config(), [server.url("/private/x"), server.url("/page")])
    assert [r.ok for r in results] == [False, True] and server.hits["/r5"] == 1


def test_answers_are_kept_for_a_bounded_time_and_origins():
    import asyncio

    import httpx

    from lifesearch_local.web.records import FetchError
    from lifesearch_local.web.robots import RobotsCache

    now, asked = [0.0], []

    async def get(url):
        asked.append(url)
        if "down" in url:
            raise FetchError("network_error", "refused")
        return 200, "User-agent: *\nDisallow: /no\n"

    async def go():
        rc = RobotsCache("ua", get, ttl_s=100, error_ttl_s=10, max_origins=2, clock=lambda: now[0])
        a, down = httpx.URL("http://a.test/no"), httpx.URL("http://down.test/x")
        assert not await rc.allowed(a) and not await rc.allowed(down)
        now[0] = 50
        await rc.allowed(a), await rc.allowed(down)  # the error answer expired at 10; the rules hold till 100
        assert asked == ["http://a.test/robots.txt", "http://down.test/robots.txt", "http://down.test/robots.txt"]
        now[0] = 101
        await rc.allowed(a)
        assert asked[-1] == "http://a.test/robots.txt" and len(asked) == 4
        await rc.allowed(httpx.URL("http://b.test/")), await rc.allowed(httpx.URL("http://c.test/"))
        assert len(rc._rules) == 2  # at most max_origins answers held

    asyncio.run(go())
