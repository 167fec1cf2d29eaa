"""``web.http_request`` (harness.md §17): one outbound HTTP exchange for a Loop or script, under the egress
policy of §17.3 (``web_policy``), with size and time limits and the per-Loop ``web:<loop>`` bucket (§14).

The host is resolved once; every address must be allowed; the connection goes to a checked address
(pinned) while ``Host`` and TLS (SNI and certificate) use the original name — no rebinding between check and
connect. Redirects are off by default; when on, each hop is parsed, resolved and checked again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urljoin

import httpcore

from wakeful.errors import WakefulError
from wakeful.harness.decide.limiter import BucketSet, Rate
from wakeful.harness.web_policy import (
    EgressPolicy,
    IPAddress,
    Target,
    TargetError,
    WebSettings,
    parse_addresses,
    parse_target,
)
from wakeful.runtime import jsonval

__all__ = ["Resolver", "WebClient", "WebFailure", "system_resolver"]

log = logging.getLogger("wakeful.harness")

Resolver = Callable[[str, int], Awaitable[list[str]]]

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
ARGUMENTS = frozenset({"method", "url", "headers", "body", "timeout_ms", "max_bytes", "follow_redirects"})
REFUSED_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive", "expect",
})
MAX_HEADERS, MAX_HEADER_BYTES, MAX_BODY_SENT = 32, 8192, 8192
TIMEOUT_MS = (1, 20_000, 10_000)  # min, max, default (§17.1)
MAX_BYTES = (1, 12_288, 8_192)
MAX_HOPS = 3
MAX_RESULT_BYTES = 16_384 - 256  # §9.4: the result must fit a host-call result
MAX_RESULT_HEADER_BYTES = 4096  # room for the body (a decision; see docs/decisions-harness-decide.md)
HEADER_VALUE_BYTES = 512
REDIRECTS = frozenset({301, 302, 303, 307, 308})
TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/ecmascript",
              "application/x-www-form-urlencoded")


class WebFailure(WakefulError):
    """A §17.2 failure code answered as data ``{error: {code, message}}``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    def as_result(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message[:512]}}


async def system_resolver(host: str, port: int) -> list[str]:
    """The system resolver (``getaddrinfo``), every address of every family, in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class WebClient:
    """The node's ``web.http_request`` service. ``resolver`` may be replaced (tests inject one)."""

    def __init__(self, settings: WebSettings, *, monotonic_ns: Callable[[], int],
                 resolver: Resolver | None = None) -> None:
        self.settings = settings
        self.policy = EgressPolicy(settings)
        self.resolver: Resolver = resolver or system_resolver
        self.buckets = BucketSet((Rate(60, 1.0),), monotonic_ns)  # §14 web:<loop>
        self.in_flight = 0
        self.connects = 0  # TCP connections opened (tests: a refusal happens before any packet)
        self.tls_verify: ssl.SSLContext = ssl.create_default_context()
        # harness.md §14 cluster: ``await take(bucket, capacity, refill_per_s)`` on the rate_bucket rows
        self.shared: Callable[[str, float, float], Awaitable[float | None]] | None = None

    async def request(self, arguments: Any, *, loop_id: str | None = None) -> dict[str, Any]:
        """The §17.2 result or ``{error: {code, message}}``; ``loop_id`` charges that Loop's bucket."""
        try:
            spec = _Request.parse(arguments)
            if loop_id is not None:
                await self._charge(loop_id)
            if self.in_flight >= self.settings.max_in_flight:
                raise WebFailure("rate_limited", f"{self.settings.max_in_flight} requests already in flight")
            self.in_flight += 1
            try:
                async with asyncio.timeout(spec.timeout_ms / 1000):
                    return await self._exchange(spec)
            except TimeoutError:
                raise WebFailure("timeout", f"no complete answer within {spec.timeout_ms} ms") from None
            finally:
                self.in_flight -= 1
        except WebFailure as failure:
            return failure.as_result()

    # §14 web:<loop>: 60 tokens refilled at 1/s (in process, or the shared rows on a cluster: fail closed)
    async def _charge(self, loop_id: str) -> None:
        key = f"web:{loop_id}"
        if self.shared is None:
            wait: float | None = self.buckets.take(key) or None
        else:
            try:
                wait = await self.shared(key, 60.0, 1.0)
            except Exception as exc:
                raise WebFailure("rate_limited", f"the shared rate limiter failed: {type(exc).__name__}") from None
        if wait:
            raise WebFailure("rate_limited", f"{key} is empty for {wait:.1f} s")

    # §17.1 follow_redirects: at most 3 hops, each re-validated (URL, resolution, policy)
    async def _exchange(self, spec: _Request) -> dict[str, Any]:
        start = time.monotonic()
        target, method, body, headers = spec.target, spec.method, spec.body, dict(spec.headers)
        hops = 0
        while True:
            address = await self._checked_address(target)
            status, reply_headers, raw, truncated = await self._send(
                target, address, method, headers, body, spec.max_bytes,
            )
            location = _header(reply_headers, b"location")
            if spec.follow_redirects and status in REDIRECTS and location is not None:
                if hops >= MAX_HOPS:
                    raise WebFailure("too_many_redirects", f"more than {MAX_HOPS} redirects")
                hops += 1
                nxt = self._next_target(target, location)
                if status == 303 or (status in (301, 302) and method == "POST"):
                    method, body = ("HEAD" if method == "HEAD" else "GET"), None
                    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
                if (nxt.scheme, nxt.host, nxt.port) != (target.scheme, target.host, target.port):
                    headers = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "cookie")}
                target = nxt
                continue
            elapsed_ms = int((time.monotonic() - start) * 1000)
            return _result(status, reply_headers, raw, truncated, target.url, elapsed_ms)

    @staticmethod
    def _next_target(current: Target, location: bytes) -> Target:
        try:
            return parse_target(urljoin(current.url, location.decode("utf-8", "strict")))
        except (TargetError, UnicodeDecodeError) as exc:
            raise WebFailure("invalid_request", f"redirect to an unusable URL: {exc}") from None

    # §17.3: resolve once with the deadline; every address must be allowed; connect to a checked one
    async def _checked_address(self, target: Target) -> IPAddress:
        if target.literal is not None:
            addresses = [target.literal]
        else:
            try:
                addresses = parse_addresses(await self.resolver(target.host, target.port))
            except (OSError, UnicodeError, ValueError) as exc:
                raise WebFailure("dns_failure", f"{target.host}: {exc}") from None
            if not addresses:
                raise WebFailure("dns_failure", f"{target.host} has no addresses")
        why = self.policy.check(addresses)
        if why is not None:
            raise WebFailure("blocked_destination", f"{target.host}: {why}")
        return addresses[0]

    async def _send(
        self, target: Target, address: IPAddress, method: str, headers: dict[str, str], body: bytes | None,
        max_bytes: int,
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        wire = [(b"Host", _host_header(target).encode()), (b"Accept-Encoding", b"identity"),
                (b"User-Agent", b"wakeful web.http_request")]
        wire = [(k, v) for k, v in wire if k.decode().lower() not in {h.lower() for h in headers}]
        wire += [(k.encode(), v.encode()) for k, v in headers.items()]
        if body is not None:
            wire.append((b"Content-Length", str(len(body)).encode()))
        url = httpcore.URL(scheme=target.scheme.encode(), host=target.host.encode(), port=target.port,
                           target=target.target.encode())
        backend = _PinnedBackend(str(address), self)
        pool = httpcore.AsyncConnectionPool(ssl_context=self.tls_verify, network_backend=backend, retries=0,
                                            max_connections=1)
        try:
            async with pool, pool.stream(method.encode(), url, headers=wire, content=body) as response:
                raw, truncated = await _read_body(response, max_bytes)
                return response.status, list(response.headers), raw, truncated
        except httpcore.TimeoutException:
            raise WebFailure("timeout", f"{target.host} did not answer in time") from None
        except (httpcore.ConnectError, OSError) as exc:
            if _is_tls(exc):
                raise WebFailure("tls_error", f"{target.host}: TLS failed: {_cause(exc)}") from None
            raise WebFailure("connect_failed", f"{target.host}: {_cause(exc)}") from None
        except httpcore.ProtocolError as exc:
            raise WebFailure("connect_failed", f"{target.host}: broken response: {_cause(exc)}") from None
        except httpcore.NetworkError as exc:
            raise WebFailure("connect_failed", f"{target.host}: {_cause(exc)}") from None


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to the checked address whatever host httpcore asks for (§17.3 pinning)."""

    def __init__(self, address: str, owner: WebClient) -> None:
        self.address, self.owner = address, owner
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        self.owner.connects += 1
        return await self._inner.connect_tcp(self.address, port, timeout=timeout)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# ---------------------------------------------------------------- §17.1 arguments


class _Request:
    __slots__ = ("method", "target", "headers", "body", "timeout_ms", "max_bytes", "follow_redirects")

    def __init__(self, method: str, target: Target, headers: dict[str, str], body: bytes | None,
                 timeout_ms: int, max_bytes: int, follow_redirects: bool) -> None:
        self.method, self.target, self.headers, self.body = method, target, headers, body
        self.timeout_ms, self.max_bytes, self.follow_redirects = timeout_ms, max_bytes, follow_redirects

    @classmethod
    def parse(cls, args: Any) -> _Request:
        if not isinstance(args, dict):
            raise _invalid("arguments must be an object")
        unknown = set(args) - ARGUMENTS
        if unknown:
            raise _invalid(f"unknown argument {sorted(unknown)[0]!r}"[:200])
        method = args.get("method", "GET")
        if not isinstance(method, str) or method.upper() not in METHODS:
            raise _invalid(f"method must be one of {', '.join(sorted(METHODS))}")
        method = method.upper()
        try:
            target = parse_target(args.get("url"))
        except TargetError as exc:
            raise _invalid(str(exc)) from None
        headers = _headers(args.get("headers", {}))
        body = _body(args.get("body"), method, headers)
        follow = args.get("follow_redirects", False)
        if not isinstance(follow, bool):
            raise _invalid("follow_redirects must be true or false")
        return cls(method, target, headers, body, _int(args, "timeout_ms", TIMEOUT_MS),
                   _int(args, "max_bytes", MAX_BYTES), follow)


def _invalid(message: str) -> WebFailure:
    return WebFailure("invalid_request", message)


def _int(args: dict[str, Any], name: str, bounds: tuple[int, int, int]) -> int:
    low, high, default = bounds
    value = args.get(name, default)
    if type(value) is not int or not low <= value <= high:
        raise _invalid(f"{name} must be an integer in {low}–{high}")
    return value


# §17.1 headers: string → string, ≤ 32 entries, ≤ 8 KiB together, hop-by-hop and framing headers refused
def _headers(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict) or len(raw) > MAX_HEADERS:
        raise _invalid(f"headers must be an object of at most {MAX_HEADERS} entries")
    total = 0
    seen: set[str] = set()
    for name, value in raw.items():
        if not isinstance(value, str):
            raise _invalid(f"header {name[:64]!r} must have a string value")
        lower = name.lower()
        if not name or not set(name) <= TOKEN:
            raise _invalid(f"header name {name[:64]!r} is not an HTTP token")
        if lower in REFUSED_HEADERS or lower.startswith("proxy-"):
            raise _invalid(f"header {name!r} may not be set")
        if lower in seen:
            raise _invalid(f"header {name!r} is given twice")
        seen.add(lower)
        if any(c in value for c in "\r\n\0") or any(ord(c) > 0xFF for c in value):
            raise _invalid(f"header {name!r} has a control or non-Latin-1 character")
        total += len(name) + len(value.encode("latin-1"))
    if total > MAX_HEADER_BYTES:
        raise _invalid(f"headers are {total} bytes together; at most {MAX_HEADER_BYTES}")
    return dict(raw)


# §17.1 body: string as UTF-8 text/plain, any other JSON value as application/json; ≤ 8,192 bytes
def _body(raw: Any, method: str, headers: dict[str, str]) -> bytes | None:
    if raw is None:
        return None
    if method in ("GET", "HEAD"):
        raise _invalid(f"{method} takes no body")
    if isinstance(raw, str):
        data, kind = raw.encode("utf-8", "surrogatepass"), "text/plain; charset=utf-8"
    else:
        try:
            data, kind = jsonval.encode(jsonval.from_python(raw)), "application/json"
        except jsonval.JsonError as exc:
            raise _invalid(f"body is not a JSON value: {exc.message}") from None
    if len(data) > MAX_BODY_SENT:
        raise _invalid(f"body is {len(data)} bytes encoded; at most {MAX_BODY_SENT}")
    if not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = kind
    return data


# ---------------------------------------------------------------- §17.2 result


async def _read_body(response: httpcore.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most ``max_bytes + 1`` bytes; more than ``max_bytes`` means truncated."""
    body = bytearray()
    async for chunk in response.aiter_stream():
        body += chunk
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _result(status: int, raw_headers: list[tuple[bytes, bytes]], body: bytes, truncated: bool,
            final_url: str, elapsed_ms: int) -> dict[str, Any]:
    headers = _reply_headers(raw_headers)
    text = _is_text(headers.get("content-type", ""))
    while True:
        encoded = body.decode("utf-8", "replace") if text else base64.b64encode(body).decode("ascii")
        result = {"status": status, "headers": headers, "body": encoded, "encoding": "utf-8" if text else "base64",
                  "body_bytes": len(body), "truncated": truncated, "final_url": final_url, "elapsed_ms": elapsed_ms}
        over = len(json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode()) - MAX_RESULT_BYTES
        if over <= 0 or not body:
            return result
        # §9.4: never replaced by result_too_large — return fewer body bytes instead (marked truncated)
        cut = over if text else (over * 3 + 3) // 4
        body, truncated = body[: max(0, len(body) - cut - 8)], True


def _reply_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Lowercased, at most 32, values cut to 512 bytes, ``set-cookie`` removed, repeats joined."""
    out: dict[str, str] = {}
    used = 0
    for name_b, value_b in raw:
        name = name_b.decode("latin-1").lower()
        if name == "set-cookie" or len(name) > 128:
            continue
        value = value_b.decode("utf-8", "replace")
        value = out[name] + ", " + value if name in out else value
        value = value.encode()[:HEADER_VALUE_BYTES].decode("utf-8", "ignore")
        if name not in out and (len(out) >= MAX_HEADERS or used + len(name) + len(value) > MAX_RESULT_HEADER_BYTES):
            continue
        used += len(value) - len(out.get(name, "")) + (0 if name in out else len(name))
        out[name] = value
    return out


def _is_text(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml"))


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def _host_header(target: Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    default = (target.scheme, target.port) in (("http", 80), ("https", 443))
    return host if default else f"{host}:{target.port}"


def _is_tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError | ssl.CertificateError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "SSL" in str(exc) or "certificate" in str(exc).lower()


def _cause(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:300]
