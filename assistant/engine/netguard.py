"""The web tools' address guard: which addresses ``web_fetch`` may connect to, and the connections it makes.

A host is resolved and **every** address it resolves to must be public (not private, loopback,
link-local, shared, reserved or multicast); the connection is then made to an address that was
checked, so a second DNS answer cannot swap in a private one. An IPv6 address that carries an IPv4
address (IPv4-mapped ``::ffff:0:0/96``, IPv4-compatible ``::/96``, 6to4 ``2002::/16``, NAT64
``64:ff9b::/96`` and ``64:ff9b:1::/48``, Teredo) is judged by the IPv4 address it carries, since a
translator or relay would deliver it there.

An admin's allow-list skips the address check for the hosts it names, on ports 80 and 443 only,
unless an entry names its port: ``wiki.internal`` allows ports 80 and 443, ``wiki.internal:8080``
port 8080 (``[fd00::1]:8080`` for an IPv6 address). On any other port an allowed host is checked
like any other.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore2
import httpx2

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolves a host name and port to IP addresses (injectable for tests)."""

DEFAULT_PORTS = frozenset({80, 443})
"""The ports an allowed host may be reached on when its allow-list entry names none."""

NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")

# Where RFC 6052 puts the IPv4 address for each prefix length a local-use NAT64 prefix may have
# (inside 64:ff9b:1::/48: /48, /56, /64 or /96), as byte slices of the 16-byte address; byte 8 is
# the reserved "u" octet.
_NAT64_LOCAL_POSITIONS = (((6, 8), (9, 11)), ((7, 8), (9, 12)), ((9, 13),), ((12, 16),))


class BlockedAddress(Exception):
    """A host resolved to an address web_fetch may not reach."""

    def __init__(self, host: str, address: str, note: str = "") -> None:
        super().__init__(f"{host} resolves to {address}, a private, loopback or link-local address{note}")
        self.host = host
        self.address = address


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address may carry (several where a NAT64 prefix's length is not known)."""
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return (ip.teredo[1],)
    if ip in NAT64_WELL_KNOWN:
        return (ipaddress.IPv4Address(ip.packed[12:]),)
    if ip in NAT64_LOCAL_USE:
        packed = ip.packed
        return tuple(
            ipaddress.IPv4Address(b"".join(packed[a:b] for a, b in slices)) for slices in _NAT64_LOCAL_POSITIONS
        )
    if ip in IPV4_COMPATIBLE and int(ip) > 1:  # not "::" nor "::1"
        return (ipaddress.IPv4Address(ip.packed[12:]),)
    return ()


def is_public_address(address: str) -> bool:
    """Whether ``address`` is a globally routable unicast address; one carrying IPv4 is judged by what it carries."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        carried = embedded_ipv4(ip)
        if carried:
            if not all(is_public_address(str(v4)) for v4 in carried):
                return False
            if ip.teredo is None:  # Teredo's own prefix must be public too
                return True
    return ip.is_global and not ip.is_multicast


def parse_allowed_host(entry: str) -> tuple[str, int | None]:
    """An allow-list entry as ``(host, port)``: ``name``, ``name:8080``, ``10.0.0.5``, ``fd00::1``, ``[fd00::1]:8080``.

    Raises ``ValueError`` for an entry with an empty host or a port that is not 1 to 65535.
    """
    text = entry.strip().lower()
    port_text: str | None = None
    if text.startswith("["):
        host, closed, rest = text[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ValueError(f"The allowed host '{entry}' is not written [address] or [address]:port.")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host = text  # a name, an IPv4 address, or an IPv6 address without a port
    if not host:
        raise ValueError(f"The allowed host '{entry}' has no host.")
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"The allowed host '{entry}' has a port that is not a number from 1 to 65535.")
    return host, int(port_text)


def allowed_ports(entries: Iterable[str]) -> dict[str, frozenset[int]]:
    """Each allowed host and the ports it may be reached on (80 and 443 for an entry that names none)."""
    ports: dict[str, set[int]] = {}
    for entry in entries:
        host, port = parse_allowed_host(entry)
        ports.setdefault(host, set()).update(DEFAULT_PORTS if port is None else {port})
    return {host: frozenset(p) for host, p in ports.items()}


async def _system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class AddressGuard:
    """Resolves hosts and refuses any that resolve to a non-public address, unless allowed on that port."""

    def __init__(self, allowed_hosts: Iterable[str] = (), resolve: Resolver | None = None) -> None:
        self.allowed_hosts = allowed_ports(allowed_hosts)
        self.resolve = resolve or _system_resolve

    def allowed(self, host: str, port: int) -> bool:
        return port in self.allowed_hosts.get(host.lower().strip("[]"), ())

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses to connect to; raises ``BlockedAddress`` if any of them is not public."""
        bare = host.strip("[]")
        try:
            found = await self.resolve(bare, port)
        except OSError as e:
            raise httpcore2.ConnectError(f"cannot resolve {bare}: {e}") from e
        if not found:
            raise httpcore2.ConnectError(f"{bare} has no address")
        if not self.allowed(bare, port):
            ports = self.allowed_hosts.get(bare.lower())
            note = (
                f" (allowed on port{'s' if len(ports) > 1 else ''} {', '.join(map(str, sorted(ports)))} only)"
                if ports
                else ""
            )
            for address in found:
                if not is_public_address(address):
                    raise BlockedAddress(bare, address, note)
        return found


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """The network backend of web_fetch: connects only to addresses the guard checked."""

    def __init__(self, guard: AddressGuard) -> None:
        self.guard = guard
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        error: Exception | None = None
        for address in await self.guard.addresses(host, port):
            try:
                return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as e:
                error = e
        assert error is not None
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise BlockedAddress(path, "a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """An httpx transport whose every connection goes through ``GuardedBackend``, with no proxy."""

    def __init__(self, guard: AddressGuard) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            network_backend=GuardedBackend(guard),
            max_connections=10,
        )


__all__ = [
    "DEFAULT_PORTS",
    "AddressGuard",
    "BlockedAddress",
    "GuardedBackend",
    "GuardedTransport",
    "Resolver",
    "allowed_ports",
    "embedded_ipv4",
    "is_public_address",
    "parse_allowed_host",
]
