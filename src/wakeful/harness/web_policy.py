"""The egress policy of ``web.http_request`` (harness.md §17.3): which URLs and addresses may be reached.

Blocked unless the operator allows them: loopback, unspecified, private, link-local (metadata services),
CGNAT, multicast, broadcast and reserved ranges, benchmarking, documentation, and IPv6 forms embedding a
blocked IPv4 address. Numeric host spellings (``2130706433``, ``0177.0.0.1``, ``127.1``) are read as the
IPv4 address a resolver would make of them, so they meet the same rules.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, quote, urlsplit

from wakeful.errors import WakefulError
from wakeful.harness.errors import InvalidRequest

__all__ = ["EgressPolicy", "Target", "WebSettings", "blocked_reason", "parse_target"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_BYTES = 2048

# §17.3: blocked by default (class name → ranges); "never" classes stay blocked even with allow_private
_V4 = {
    "broadcast": ["255.255.255.255/32"],
    "unspecified": ["0.0.0.0/8"],
    "loopback": ["127.0.0.0/8"],
    "private": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
    "link-local": ["169.254.0.0/16"],
    "cgnat": ["100.64.0.0/10"],
    "reserved": ["192.0.0.0/24", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4"],
    "benchmarking": ["198.18.0.0/15"],
    "multicast": ["224.0.0.0/4"],
}
_V6 = {
    "unspecified": ["::/128"],
    "loopback": ["::1/128"],
    "private": ["fc00::/7", "fec0::/10"],
    "link-local": ["fe80::/10"],
    "multicast": ["ff00::/8"],
    "reserved": ["100::/64", "2001:db8::/32", "2001::/32", "2001:10::/28", "3fff::/20"],
}
NEVER = frozenset({"unspecified", "multicast", "broadcast"})
_RANGES: list[tuple[str, Network]] = [
    (name, ipaddress.ip_network(cidr)) for table in (_V4, _V6) for name, cidrs in table.items() for cidr in cidrs
]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_COMPAT = ipaddress.ip_network("::/96")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")


@dataclass(frozen=True, kw_only=True, slots=True)
class WebSettings:
    """interfaces.md §7 ``web.allow_private``, ``web.allow_networks``, ``web.max_in_flight``."""

    allow_private: bool = False
    allow_networks: tuple[str, ...] = ()
    max_in_flight: int = 64
    networks: tuple[Network, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "networks", tuple(_network(n) for n in self.allow_networks))
        if isinstance(self.max_in_flight, bool) or not isinstance(self.max_in_flight, int) or self.max_in_flight < 1:
            raise ValueError("web.max_in_flight must be a positive integer")


    @classmethod
    def parse(cls, table: Mapping[str, Any], env: Mapping[str, str], where: str = "config") -> WebSettings:
        """From the ``[web]`` table, overridden by ``WAKEFUL_WEB__<KEY>`` (networks comma-separated)."""
        values = dict(table)
        for key in ("allow_private", "allow_networks", "max_in_flight"):
            raw = env.get(f"WAKEFUL_WEB__{key.upper()}")
            if raw is not None:
                values[key] = [n.strip() for n in raw.split(",") if n.strip()] if key == "allow_networks" else raw
        unknown = set(values) - {"allow_private", "allow_networks", "max_in_flight"}
        if unknown:
            key = sorted(unknown)[0]
            raise InvalidRequest(f"unknown config key web.{key} in {where}", field=f"web.{key}")
        private = values.get("allow_private", False)
        if isinstance(private, str) and private.lower() in ("true", "1", "yes", "false", "0", "no"):
            private = private.lower() in ("true", "1", "yes")
        if not isinstance(private, bool):
            raise InvalidRequest("web.allow_private must be true or false", field="web.allow_private")
        networks = values.get("allow_networks", [])
        if not isinstance(networks, list) or not all(isinstance(n, str) for n in networks):
            raise InvalidRequest("web.allow_networks must be a list of CIDR strings", field="web.allow_networks")
        limit = values.get("max_in_flight", 64)
        try:
            limit = int(limit) if not isinstance(limit, bool) else limit
            return cls(allow_private=private, allow_networks=tuple(networks), max_in_flight=limit)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(str(exc), field="web") from None


def _network(cidr: str) -> Network:
    try:
        return ipaddress.ip_network(cidr, strict=False)
    except (TypeError, ValueError):
        raise ValueError(f"web.allow_networks: {cidr!r} is not a CIDR network") from None


def embedded_v4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries (mapped, compatible, NAT64, 6to4), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _COMPAT:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def blocked_reason(address: IPAddress, settings: WebSettings) -> str | None:
    """Why ``address`` may not be reached under ``settings`` (None: allowed)."""
    if any(address in net for net in settings.networks if net.version == address.version):
        return None
    if isinstance(address, ipaddress.IPv4Address):
        return _range_reason(address, settings)
    if address.ipv4_mapped is not None:  # the socket reaches exactly that IPv4 address
        return blocked_reason(address.ipv4_mapped, settings)
    direct = _range_reason(address, settings)
    if direct is not None or int(address) <= 1:  # :: and ::1 are not IPv4-compatible forms
        return direct
    inner = embedded_v4(address)
    if inner is not None:
        why = blocked_reason(inner, settings)
        if why is not None:
            return f"{why} (embedded in {address})"
    if address in _NAT64_LOCAL and not settings.allow_private:
        return "reserved"
    return None


def _range_reason(address: IPAddress, settings: WebSettings) -> str | None:
    for name, net in _RANGES:
        if net.version == address.version and address in net:
            if settings.allow_private and name not in NEVER:
                return None
            return name
    return None


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL: ``host`` as sent in ``Host``/SNI, ``literal`` when the host is an IP address."""

    url: str
    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent on the request line
    literal: IPAddress | None


class TargetError(WakefulError, ValueError):
    """The URL is unusable (``invalid_request``)."""

    code = "invalid_request"


# §17.1 url: absolute http/https, ≤ 2048 bytes, host required, no userinfo; the fragment is dropped
def parse_target(url: object) -> Target:
    if not isinstance(url, str) or not url:
        raise TargetError("url must be a non-empty string")
    if len(url.encode("utf-8", "replace")) > MAX_URL_BYTES:
        raise TargetError(f"url is longer than {MAX_URL_BYTES} bytes")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise TargetError("url contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetError(f"url is malformed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise TargetError("url must be http or https")
    if "@" in parts.netloc:
        raise TargetError("url must not carry userinfo")
    raw_host = parts.hostname
    if not raw_host:
        raise TargetError("url must name a host")
    host, literal = _host(raw_host, bracketed=parts.netloc.startswith("["))
    port = port if port is not None else (443 if scheme == "https" else 80)
    if not 1 <= port <= 65535:
        raise TargetError("url port must be 1–65535")
    target = _ascii((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    shown = f"[{host}]" if isinstance(literal, ipaddress.IPv6Address) else host
    default = (scheme, port) in (("http", 80), ("https", 443))
    netloc = shown if default else f"{shown}:{port}"
    clean = SplitResult(scheme, netloc, _ascii(parts.path or "/"), _ascii(parts.query), "")
    return Target(clean.geturl(), scheme, host, port, target, literal)


def _ascii(text: str) -> str:
    return "".join(c if ord(c) < 0x80 else quote(c) for c in text)


_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)


def _host(raw: str, *, bracketed: bool) -> tuple[str, IPAddress | None]:
    host = raw.lower()
    if bracketed:
        if "%" in host:
            raise TargetError("IPv6 zone identifiers are not allowed")
        try:
            return host, ipaddress.IPv6Address(host)
        except ValueError:
            raise TargetError(f"{raw!r} is not an IPv6 address") from None
    labels = host.rstrip(".").split(".")
    if labels and _NUMERIC_LABEL.fullmatch(labels[-1]):  # WHATWG: a numeric last label means IPv4
        try:
            packed = socket.inet_aton(host.rstrip("."))
        except OSError:
            raise TargetError(f"{raw!r} is not a valid IPv4 address") from None
        address = ipaddress.IPv4Address(packed)
        return str(address), address
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise TargetError(f"{raw!r} is not a valid host name") from None
    if not re.fullmatch(r"[a-z0-9_.-]{1,253}", ascii_host) or ".." in ascii_host:
        raise TargetError(f"{raw!r} is not a valid host name")
    return ascii_host, None


class EgressPolicy:
    """Checks every resolved address of a target before any packet is sent to it."""

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings

    def check(self, addresses: Iterable[IPAddress]) -> str | None:
        for address in addresses:
            why = blocked_reason(address, self.settings)
            if why is not None:
                return f"{address} is {why}"
        return None


def parse_addresses(values: Sequence[str]) -> list[IPAddress]:
    """Addresses as a resolver returns them (an IPv6 scope id is dropped; it is link-local anyway)."""
    out: list[IPAddress] = []
    for value in values:
        out.append(ipaddress.ip_address(value.split("%", 1)[0]))
    return out
