"""One pure-ASGI middleware in front of every route: ``X-Request-Id`` on every response, the body bound of
interfaces.md §2.1 (``Content-Length`` checked first, then a counting ``receive`` that never lets more through),
``415`` for non-JSON bodies on JSON routes, ``Cache-Control: no-store`` on webhooks and a 500 without a stack.

The intake routes (``body_self_checked``) read their bodies themselves after authentication (harness.md §10.3).
"""

from __future__ import annotations

import collections
import itertools
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from wakeful.api.errors import error_response, internal_response

__all__ = ["GroupEventEndpoint", "LoopCreateEndpoint", "RecentRefusals", "RequestGuard", "body_limit_for", "body_self_checked",
           "direct_post", "is_json_type"]

log = logging.getLogger("wakeful.api")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# intake route 1 served without FastAPI's router: (scope, receive, send, group_id, loop_id)
GroupEventEndpoint = Callable[[Scope, Receive, Send, str, str], Awaitable[None]]
# ``POST …/loops`` served without FastAPI's router: (scope, receive, send, group_id, the app behind the guard —
# the endpoint hands it any request it does not answer itself)
LoopCreateEndpoint = Callable[[Scope, Receive, Send, str, ASGIApp], Awaitable[None]]

DEFAULT_LIMIT = 65_536  # interfaces.md §2.1
BUILD_LIMIT = 262_144  # builds and scripts
WEBHOOK_LIMIT = 1_048_576  # the most a webhook route reads: 16 KiB (§10.4 step 5) unless a verifier maps fields

_WEBHOOK = re.compile(r"^/v1/loop-webhooks/[^/]*$")
_GROUP_EVENTS = re.compile(r"^/v1/agent-groups/([^/]+)/loops/([^/]+)/events$")
_GROUP_LOOPS = re.compile(r"^/v1/agent-groups/([^/]+)/loops$")
_BIG = re.compile(r"^/v1/agent-groups/[^/]+/(builds|scripts/run)$")
_RAW = re.compile(r"^/v1/agent-groups/[^/]+/artifacts$")  # raw ELF, application/octet-stream


_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# issue 16: a request id is the process's random prefix and a counter (``req_`` + 16 hex digits, as before)
# instead of 8 bytes from the OS per request; it names a request in logs and error answers, it is not a secret.
_ID_PREFIX = secrets.randbits(32)
_id_counter = itertools.count(secrets.randbits(31))


def _new_request_id() -> str:
    return f"req_{_ID_PREFIX:08x}{next(_id_counter) & 0xFFFFFFFF:08x}"


def body_limit_for(path: str) -> int:
    if _WEBHOOK.match(path):
        return WEBHOOK_LIMIT
    if _BIG.match(path) or path in ("/mcp", "/mcp/"):  # /mcp carries loop.build and script.run
        return BUILD_LIMIT
    return DEFAULT_LIMIT


def body_self_checked(path: str, method: str) -> bool:
    """Intake routes order their checks themselves (auth, scope, bucket, then the bounded read)."""
    return method == "POST" and (_WEBHOOK.match(path) is not None or _GROUP_EVENTS.match(path) is not None)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def is_json_type(content_type: str | None) -> bool:
    """``application/json``, parameters ignored, case-insensitive (harness.md §10.3 step 5)."""
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


class RecentRefusals:
    """Counts of 429 and 503 answers over the last hour (interfaces.md §6 and ``wakeful status``: "recent 429/503
    counts"), on the monotonic clock; at most one entry per second and status, so memory stays bounded."""

    WINDOW_S = 3600

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._now = monotonic
        self._buckets: dict[int, collections.deque[list[int]]] = {429: collections.deque(), 503: collections.deque()}

    def record(self, status: int) -> None:
        buckets = self._buckets.get(status)
        if buckets is None:
            return
        second = int(self._now())
        if buckets and buckets[-1][0] == second:
            buckets[-1][1] += 1
        else:
            buckets.append([second, 1])
        self._trim(buckets, second)

    def counts(self) -> dict[str, int]:
        second = int(self._now())
        out = {}
        for status, buckets in self._buckets.items():
            self._trim(buckets, second)
            out[str(status)] = sum(n for _, n in buckets)
        return out

    def _trim(self, buckets: collections.deque[list[int]], second: int) -> None:
        while buckets and buckets[0][0] <= second - self.WINDOW_S:
            buckets.popleft()


def direct_post(scope: Scope) -> bool:
    """Whether the request is one of the POSTs ``RequestGuard`` may serve straight to its endpoint (when the app
    has that endpoint): intake route 1 or the create of a Loop, without a root path."""
    if scope.get("method") != "POST" or scope.get("root_path"):
        return False
    path = scope.get("path", "")
    return _GROUP_EVENTS.match(path) is not None or _GROUP_LOOPS.match(path) is not None


class RequestGuard:
    """The outermost wakeful middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, refusals: RecentRefusals | None = None,
                 group_events: GroupEventEndpoint | None = None,
                 loop_creates: LoopCreateEndpoint | None = None) -> None:
        self.app = app
        self.refusals = refusals or RecentRefusals()
        self.group_events = group_events  # issue 16: intake route 1 straight to its endpoint
        self.loop_creates = loop_creates  # issue 16: ``POST …/loops`` (creates/s) straight to its endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _header(scope, b"x-request-id")
        if rid is None or not _REQUEST_ID.fullmatch(rid):
            rid = _new_request_id()
        scope.setdefault("state", {})["request_id"] = rid
        path, method = scope.get("path", ""), scope.get("method", "GET")
        limit = body_limit_for(path)
        scope["state"]["body_limit"] = limit
        webhook = _WEBHOOK.match(path) is not None
        started = refused = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the bound was hit: our 413 went out, the route's late answer is dropped
            if message["type"] == "http.response.start":
                started = True
                self.refusals.record(int(message.get("status", 0)))
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", rid.encode()))
                if webhook:
                    headers = [h for h in headers if h[0].lower() != b"cache-control"]
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        received = 0

        async def counting_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:  # never buffer more: answer 413 now, the route sees a disconnect
                    if not started:
                        await _too_large(limit)(scope, receive, send_wrapper)
                    refused = True
                    return {"type": "http.disconnect"}
            return message

        refusal = self._precheck(scope, path, method, limit) if not body_self_checked(path, method) else (
            error_response("not_found", "no such route or resource") if "\x00" in path else None)
        if refusal is not None:
            await refusal(scope, receive, send_wrapper)
            return
        plain_post = method == "POST" and not scope.get("root_path")
        direct = _GROUP_EVENTS.match(path) if self.group_events is not None and plain_post else None
        create = _GROUP_LOOPS.match(path) if self.loop_creates is not None and plain_post else None
        try:
            if direct is not None:
                assert self.group_events is not None
                await self.group_events(scope, counting_receive, send_wrapper, direct[1], direct[2])
            elif create is not None:
                assert self.loop_creates is not None
                await self.loop_creates(scope, counting_receive, send_wrapper, create[1], self.app)
            else:
                await self.app(scope, counting_receive, send_wrapper)
        except Exception as exc:
            if refused:
                return
            if started:
                log.error("error after the response started (request %s)", rid, exc_info=exc)
                return
            await internal_response(None, exc, request_id=rid)(scope, receive, send_wrapper)

    @staticmethod
    def _precheck(scope: Scope, path: str, method: str, limit: int) -> Any:
        if "\x00" in path:  # no resource has U+0000 in its name (and PostgreSQL text cannot hold it)
            return error_response("not_found", "no such route or resource")
        if b"%00" in bytes(scope.get("query_string", b"")).lower() or b"\x00" in bytes(scope.get("query_string", b"")):
            return error_response("invalid_request", "query parameters must not contain U+0000",
                                  details={"field": "query"})
        length = _header(scope, b"content-length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                return error_response("invalid_request", "Content-Length is not a number",
                                      details={"field": "content-length"})
            if size > limit:
                return _too_large(limit)
        has_body = (length is not None and length.strip() != "0") or _header(scope, b"transfer-encoding") is not None
        # the JSON API only: mounted apps (/mcp, the /ui/ dashboard's forms) check their own content types
        if method in ("POST", "PUT", "PATCH") and has_body and path.startswith("/v1/") and not _RAW.match(path):
            if not is_json_type(_header(scope, b"content-type")):
                return error_response("json_required", "the body must be Content-Type: application/json")
        return None


def _too_large(limit: int) -> Any:
    return error_response("payload_too_large", f"the body is over this route's limit of {limit} bytes",
                          details={"limit": limit})
