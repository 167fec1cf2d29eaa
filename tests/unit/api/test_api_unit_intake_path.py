"""Intake route 1 (``POST …/loops/{loop}/events``) is served by ``RequestGuard`` straight to its endpoint, not
through FastAPI's router (issue 16: route matching over every router, dependency solving and the exception
middleware were a fifth of the node's time under the ingest benchmark) — with the same answers. The full
behaviour of the route (every status, the check order, bounded reads) is tests/integration/api/test_api_intake.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from support.asgi_call import asgi_call

from wakeful.api.app import create_app
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness


def _call(app: Any, method: str, path: str, body: bytes = b"") -> tuple[dict[str, Any], int, dict[bytes, bytes],
                                                                        bytes]:
    return asyncio.run(asgi_call(app, method, path, body, key="wk_x"))


def test_group_events_bypass_the_fastapi_router_with_the_same_answer() -> None:
    app = create_app(Harness(Config()), public_docs=False, ui=False)  # never started: every route answers 503
    path = "/v1/agent-groups/grp_a/loops/lp_b/events"
    scope, status, headers, data = _call(app, "POST", path, b'{"topic":"t"}')
    assert "endpoint" not in scope and "route" not in scope  # FastAPI's router never saw the request
    assert status == 503 and json.loads(data) == {"error": "unavailable", "message": "the node is starting or stopping"}
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"x-request-id"].startswith(b"req_")
    # the other method of the same path is FastAPI's route, and answers alike
    scope, status, _, other = _call(app, "GET", path)
    assert scope.get("endpoint") is not None and status == 503 and json.loads(other) == json.loads(data)


def test_an_app_without_the_intake_router_has_no_direct_path() -> None:
    app = create_app(Harness(Config()), routers=("meta",), public_docs=False, ui=False)
    _, status, _, data = _call(app, "POST", "/v1/agent-groups/grp_a/loops/lp_b/events", b'{"topic":"t"}')
    assert status == 404 and json.loads(data)["error"] == "not_found"


def test_the_direct_posts_enter_at_request_guard_not_at_the_layers_above_it() -> None:
    """Issue 16: Starlette's error middleware and FastAPI's wrappers above ``RequestGuard`` are not on the path of
    intake route 1 or of a Loop's create (``WakefulApp``); every other request still passes them."""
    app = create_app(Harness(Config()), public_docs=False, ui=False)
    _call(app, "POST", "/v1/agent-groups/grp_a/loops", b'{}')  # (the app builds its stack at its first request)
    top = app.middleware_stack
    assert top is not None
    entered: list[str] = []

    async def observed(scope: Any, receive: Any, send: Any) -> None:
        entered.append(scope["path"])
        await top(scope, receive, send)

    app.middleware_stack = observed  # the stack FastAPI runs, with a note of each request that enters it
    events = "/v1/agent-groups/grp_a/loops/lp_b/events"
    _, status, headers, data = _call(app, "POST", events, b'{"topic":"t"}')
    assert status == 503 and headers[b"x-request-id"].startswith(b"req_")  # RequestGuard's answer, as before
    _, status, _, _ = _call(app, "POST", "/v1/agent-groups/grp_a/loops", b'{}')
    assert status == 503
    assert entered == []
    _, status, _, _ = _call(app, "GET", events)
    assert status == 503 and entered == [events]


class _CountedKey(bytes):
    """A header name that counts the comparisons made with it (``Headers`` compares names while walking)."""

    compared: list[int] = []

    def __eq__(self, other: object) -> bool:
        self.compared.append(1)
        return bytes.__eq__(self, other)  # type: ignore[arg-type]

    __hash__ = bytes.__hash__


def test_the_intake_request_walks_its_headers_once_and_answers_as_starlette() -> None:
    """Issue 16: the five lookups of intake route 1 are answered from an index made in one pass; Starlette's
    ``Headers`` walks the list for each lookup (every header of it for an absent one)."""
    from starlette.datastructures import Headers

    from wakeful.api.routes_intake import IndexedHeaders

    raw = [(b"host", b"n"), (b"authorization", b"Bearer wk_x"), (b"content-type", b"application/json"),
           (b"content-length", b"13"), (b"idempotency-key", b"k1"), (b"user-agent", b"u"),
           (b"idempotency-key", b"k2"), (b"accept", b"*/*")]

    def lookups(headers: Headers) -> list[Any]:
        return [headers.get("Authorization"), headers.get("x-wakeful-agent"), headers.get("content-length"),
                headers.get("CONTENT-TYPE"), headers.getlist("idempotency-key"), headers.getlist("absent"),
                "accept" in headers, "cookie" in headers, headers["host"]]

    def counted(cls: Any) -> tuple[list[Any], int]:
        _CountedKey.compared = []
        headers = cls(scope={"headers": [(_CountedKey(k), v) for k, v in raw]}) if cls is Headers else \
            cls({"headers": [(_CountedKey(k), v) for k, v in raw]})
        return lookups(headers), len(_CountedKey.compared)

    theirs, walked = counted(Headers)
    ours, compared = counted(IndexedHeaders)
    assert ours == theirs == ["Bearer wk_x", None, "13", "application/json", ["k1", "k2"], [], True, False, "n"]
    assert compared == 0 and walked >= 40  # (Starlette: a name comparison per header walked, per lookup)
