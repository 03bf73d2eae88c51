"""robots.txt: disallowed paths refused, fetched once per origin, checked on redirect targets."""

from __future__ import annotations

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
