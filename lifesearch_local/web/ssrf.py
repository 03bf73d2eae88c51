"""SSRF guard: http(s) only, every resolved address global, and connect to the address checked."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOWED_SCHEMES = ("http", "https")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")


class UnsafeAddressError(Exception):
    """A URL or host the guard refuses; the fetcher reports it as `unsafe_address`."""


class ResolveError(Exception):
    """A name that does not resolve; the fetcher reports it as `network_error`."""


class Resolver(Protocol):
    """Turns a host name into IP address strings (injectable so tests need no DNS)."""

    async def resolve(self, host: str, port: int) -> list[str]: ...


class SystemResolver:
    """The operating system's resolver (getaddrinfo), run off the event loop."""

    async def resolve(self, host: str, port: int) -> list[str]:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise ResolveError(f"cannot resolve {host}: {e}") from e
        return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass
class StaticResolver:
    """A fixed name -> addresses table; unknown names fail to resolve. For tests and labs."""

    table: Mapping[str, list[str]] = field(default_factory=dict)

    async def resolve(self, host: str, port: int) -> list[str]:
        if host.lower() not in self.table:
            raise ResolveError(f"cannot resolve {host}: not in the static table")
        return list(self.table[host.lower()])


def _embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo, NAT64), if any."""
    if ip.version == 4:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


# Never allowed by allow_private: cloud metadata lives on link-local, and the rest is not a host.
_ALWAYS_REFUSED = (
    ("unspecified", lambda ip: ip.is_unspecified),
    ("multicast", lambda ip: ip.is_multicast),
    ("link-local", lambda ip: ip.is_link_local),
    ("site-local", lambda ip: getattr(ip, "is_site_local", False)),  # fec0::/10: Python calls it global
    ("'this network'", lambda ip: ip in _THIS_NETWORK),  # 0.0.0.0/8: Linux connects 0.0.0.0 to loopback
    ("reserved", lambda ip: ip.is_reserved and not ip.is_loopback),  # ::1 sits inside reserved ::/8
)

# Special-purpose ranges (IANA registries) that are not globally reachable although some Python
# versions' `is_global` says they are; an address in one of them is never treated as global.
_NOT_GLOBAL = tuple(
    (ipaddress.ip_network(net), why)
    for net, why in (
        ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
        ("fec0::/10", "site-local"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing SIDs"),
    )
)


@dataclass(frozen=True)
class AddressPolicy:
    """Which IP addresses a fetch may connect to."""

    allow_private: bool = False
    allow_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_config(cls, allow_private: bool, networks: Iterable[str]) -> AddressPolicy:
        return cls(allow_private, tuple(ipaddress.ip_network(n, strict=False) for n in networks))

    def refusal(self, address: str) -> str | None:
        """Why `address` is refused, or None when it may be connected to."""
        ip = ipaddress.ip_address(address.strip("[]").split("%")[0])
        if any(ip in net for net in self.allow_networks):
            return None
        inner = _embedded_v4(ip)
        if inner is not None:
            why = self.refusal(str(inner))
            return f"{why} (embedded in {ip})" if why else None
        for name, test in _ALWAYS_REFUSED:
            if test(ip):
                return f"{ip} is {name}"
        special = next((why for net, why in _NOT_GLOBAL if ip.version == net.version and ip in net), None)
        if ip.is_global and special is None:
            return None
        if self.allow_private and (ip.is_private or ip.is_loopback):
            return None
        kind = "loopback" if ip.is_loopback else "private" if ip.is_private else special or "not global"
        return f"{ip} is {kind}"


def literal_ip(host: str) -> str | None:
    """The host as an IP address string when it is a literal address, else None."""
    try:
        return str(ipaddress.ip_address(host.strip("[]").split("%")[0]))
    except ValueError:
        return None


def check_scheme(url: httpx.URL) -> None:
    if url.scheme not in ALLOWED_SCHEMES:
        raise UnsafeAddressError(f"scheme {url.scheme or '(none)'!r} is not http(s)")
    if not url.host:
        raise UnsafeAddressError("URL has no host")


async def checked_addresses(host: str, port: int, policy: AddressPolicy, resolver: Resolver) -> list[str]:
    """Every address of `host`, all of them allowed, else UnsafeAddressError."""
    lit = literal_ip(host)
    addresses = [lit] if lit else await resolver.resolve(host, port)
    if not addresses:
        raise ResolveError(f"{host} resolved to no address")
    for a in addresses:
        why = policy.refusal(a)
        if why:
            raise UnsafeAddressError(f"{host} -> {why}")
    return addresses


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves and checks at connect time, then connects to the checked address itself.

    The TLS layer above still uses the URL's host name for SNI and certificate checks, so
    pinning the IP here changes nothing about HTTPS verification.
    """

    def __init__(self, policy: AddressPolicy, resolver: Resolver, inner: httpcore.AsyncNetworkBackend | None = None):
        self.policy, self.resolver = policy, resolver
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = await checked_addresses(host, port, self.policy, self.resolver)
        last: Exception | None = None
        for a in addresses:
            try:
                return await self.inner.connect_tcp(a, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                last = e
        raise last  # type: ignore[misc]

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise UnsafeAddressError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


@functools.lru_cache(maxsize=2)
def _ssl_context(http2: bool) -> ssl.SSLContext:
    # Loading the CA bundle costs tens of milliseconds, so clients share a context; one per
    # http2 setting, because httpcore sets the ALPN protocols on it before each handshake.
    return httpx.create_ssl_context(trust_env=False)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport over a connection pool that uses the guarded backend.

    Proxies from the environment are ignored on purpose: a proxy would connect for us to
    an address the guard never saw.
    """

    def __init__(self, backend: GuardedBackend, *, http2: bool = False, max_connections: int = 100):
        ctx = _ssl_context(http2)
        super().__init__(verify=ctx, trust_env=False, http2=http2)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ctx,
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=5.0,
            http1=True,
            http2=http2,
            network_backend=backend,
        )
