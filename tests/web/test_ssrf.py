"""SSRF guard: literal addresses, names resolving to them, redirects, and pinning to the checked address."""

from __future__ import annotations

import asyncio

import pytest

from lifesearch_local.web.ssrf import AddressPolicy, StaticResolver, UnsafeAddressError, checked_addresses
from tests.helpers.web import RecordingConnector, fetch_all, fetch_one, make_config
from tests.helpers.web_server import Reply

REFUSED = [
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "127.0.0.1",
    "127.255.0.9",
    "169.254.169.254",
    "0.0.0.0",
    "100.64.0.1",
    "224.0.0.1",
    "224.0.1.1",
    "240.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "ff02::1",
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "2002:a00:1::1",  # 6to4 wrapping 10.0.0.1
    "64:ff9b::a00:1",  # NAT64 wrapping 10.0.0.1
    "::10.0.0.1",  # deprecated IPv4-compatible
    "fec0::1",  # deprecated site-local: Python's is_global says True
    "feff:ffff::1",  # the top of fec0::/10
    "0.1.2.3",  # 'this network'
    "192.88.99.1",  # deprecated 6to4 relay anycast: is_global says True
    "3fff::1",  # documentation (RFC 9637): is_global says True
    "5f00::1",  # segment routing SIDs
    "64:ff9b:1::a00:1",  # local-use NAT64
    "2002:c0a8:101::1",  # 6to4 wrapping 192.168.1.1
    "2002:7f00:1::1",  # 6to4 wrapping 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 wrapping the metadata address
    "2001:0:4136:e378:8000:63bf:f5ff:fff8",  # Teredo whose client is 10.0.0.7
    "64:ff9b::7f00:1",  # NAT64 wrapping 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 wrapping the metadata address
    "::ffff:0:a00:1",  # IPv4-translated 10.0.0.1
    "::ffff:192.168.0.1",  # mapped private
]
ALLOWED = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:93.184.216.34", "2002:5db8:d822::1", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", REFUSED)
def test_non_global_literals_are_refused(address):
    assert AddressPolicy().refusal(address) is not None


@pytest.mark.parametrize("address", ALLOWED)
def test_global_literals_are_allowed(address):
    assert AddressPolicy().refusal(address) is None


def test_allow_private_never_opens_link_local_multicast_or_unspecified():
    policy = AddressPolicy(allow_private=True)
    assert policy.refusal("10.0.0.1") is None and policy.refusal("127.0.0.1") is None and policy.refusal("::1") is None
    for a in ("169.254.169.254", "fe80::1", "224.0.0.1", "0.0.0.0", "::ffff:169.254.169.254", "fec0::1", "0.1.2.3",
              "2002:a9fe:a9fe::1", "64:ff9b::a9fe:a9fe"):
        assert policy.refusal(a) is not None, a


def test_site_local_is_named_in_the_refusal():
    assert AddressPolicy().refusal("fec0::1") == "fec0::1 is site-local"
    assert "documentation" in AddressPolicy().refusal("3fff::1")


def test_allow_networks_opens_only_those_ranges():
    policy = AddressPolicy.from_config(False, ["127.0.0.0/8"])
    assert policy.refusal("127.0.0.1") is None
    assert policy.refusal("::ffff:127.0.0.1") is None  # the mapped form of an allowed address
    assert policy.refusal("10.0.0.1") is not None and policy.refusal("::1") is not None


@pytest.mark.parametrize(
    "name,addresses",
    [("intranet.test", ["10.0.0.7"]), ("v6.test", ["::1"]), ("mapped.test", ["::ffff:192.168.0.1"]), ("mixed.test", ["93.184.216.34", "10.0.0.7"])],
)
def test_names_resolving_to_non_global_addresses_are_refused(name, addresses):
    resolver = StaticResolver({name: addresses})
    with pytest.raises(UnsafeAddressError, match=name):
        asyncio.run(checked_addresses(name, 80, AddressPolicy(), resolver))


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/",
        "http://[::1]/",
        "http://[::ffff:a00:7]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://intranet.test/",
        "http://router.test/",
        "http://metadata.test/",
        "http://v6loop.test/",
        "http://mapped.test/",
        "http://mixed.test/",
        "https://intranet.test/",
    ],
)
def test_fetch_refuses_without_connecting(url, tmp_path):
    connector = RecordingConnector(refuse=True)
    # Loopback is allowed in tests; these must be refused all the same, before any connect.
    config = make_config(allow_networks=["127.0.0.0/8"], respect_robots=False)
    result = fetch_one(config, url, connector=connector)
    assert result.kind == "unsafe_address", result
    assert connector.hosts == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x", "gopher://example.org/", "http:///nohost"])
def test_only_http_and_https(url):
    result = fetch_one(make_config(respect_robots=False), url, connector=RecordingConnector(refuse=True))
    assert result.kind == "unsafe_address"


def test_loopback_refused_unless_configured(server):
    server.routes["/ok"] = Reply(body=b"<html><body><p>" + b"hello world " * 30 + b"</p></body></html>")
    config = make_config(allow_networks=[], respect_robots=False)
    assert fetch_one(config, server.url("/ok")).kind == "unsafe_address"
    assert server.hits["/ok"] == 0
    assert fetch_one(make_config(respect_robots=False), server.url("/ok")).ok


def test_connection_goes_to_the_checked_address(server):
    server.routes["/ok"] = Reply(body=b"<html><body><p>" + b"pinned page text " * 30 + b"</p></body></html>")
    connector = RecordingConnector()
    result = fetch_one(make_config(respect_robots=False), server.url("/ok", host="pages.test"), connector=connector)
    assert result.ok, result
    assert connector.hosts == ["127.0.0.1"]  # the socket layer saw the address, never the name
    assert server.requests[-1].headers["host"] == f"pages.test:{server.port}"


@pytest.mark.parametrize("target", ["http://10.1.2.3/secret", "http://intranet.test/secret", "http://[::ffff:10.0.0.7]/", "http://metadata.test/"])
def test_redirect_to_private_address_is_checked_again(server, target):
    server.routes["/go"] = Reply(302, headers={"Location": target})
    connector = RecordingConnector()
    result = fetch_one(make_config(respect_robots=False), server.url("/go"), connector=connector)
    assert result.kind == "unsafe_address"
    assert connector.hosts == ["127.0.0.1"]  # only the first hop was ever connected


def test_unresolvable_name_is_a_network_error():
    results, _ = fetch_all(make_config(respect_robots=False), ["http://nowhere.test/"], connector=RecordingConnector(refuse=True))
    assert results[0].kind == "network_error"


def test_system_resolver_reads_localhost_without_the_network(server):
    from lifesearch_local.web.fetcher import Fetcher
    from lifesearch_local.web.ssrf import SystemResolver

    addresses = asyncio.run(SystemResolver().resolve("localhost", 80))
    assert set(addresses) & {"127.0.0.1", "::1"}
    server.routes["/ok"] = Reply(body=b"<html><body><p>" + b"resolved by the system " * 30 + b"</p></body></html>")

    async def go(networks):
        async with Fetcher(make_config(allow_networks=networks, respect_robots=False)) as f:
            return await f.fetch(server.url("/ok", host="localhost"))

    assert asyncio.run(go([])).kind == "unsafe_address"  # localhost is loopback: refused by default
    if "::1" in addresses:
        # every address of a name must pass, so ::1 has to be allowed too
        assert asyncio.run(go(["127.0.0.0/8"])).kind == "unsafe_address"
    assert asyncio.run(go(["127.0.0.0/8", "::1/128"])).ok


@pytest.mark.parametrize("url", ["http://2130706433/", "http://0x7f.0.0.1/", "http://0177.0.0.1/", "http://127.1/"])
def test_odd_spellings_of_loopback_are_checked_after_resolution(url):
    from lifesearch_local.web.fetcher import Fetcher

    connector = RecordingConnector(refuse=True)

    async def go():
        async with Fetcher(make_config(allow_networks=[], respect_robots=False), connector=connector) as f:
            return await f.fetch(url)

    result = asyncio.run(go())
    assert result.kind == "unsafe_address", result
    assert connector.hosts == []


def _ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_ipv6_literal_urls_fetch_with_robots_on():
    from tests.helpers.web_server import LoopbackServer

    with LoopbackServer(bind="::1") as server:
        server.routes["/robots.txt"] = Reply(body=b"User-agent: *\nDisallow: /private\n", content_type="text/plain")
        server.routes["/ok"] = Reply(body=b"<html><body><p>" + b"served over IPv6 " * 30 + b"</p></body></html>")
        server.routes["/private"] = Reply(body=b"<html><body><p>" + b"secret " * 30 + b"</p></body></html>")
        config = make_config(allow_networks=["::1/128"])
        assert config.respect_robots  # the default: robots.txt is asked for first
        (ok, private), _ = fetch_all(config, [server.url("/ok"), server.url("/private")])
        assert ok.ok, ok
        assert private.kind == "robots_disallowed", private
        assert server.hits["/robots.txt"] == 1 and server.hits["/private"] == 0
