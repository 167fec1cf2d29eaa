"""Intake route 1 (``POST …/loops/{loop}/events``) is served by ``RequestGuard`` straight to its endpoint, not
through FastAPI's router (issue 16: route matching over every router, dependency solving and the exception
middleware were a fifth of the node's time under the ingest benchmark) — with the same answers. The full
behaviour of the route (every status, the check order, bounded reads) is tests/integration/api/test_api_intake.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from wakeful.api.app import create_app
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness


def _call(app: Any, method: str, path: str, body: bytes = b"") -> tuple[dict[str, Any], int, dict[bytes, bytes],
                                                                        bytes]:
    """One request through the ASGI app; returns the scope as the app left it, the status, headers and body."""
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
        "headers": [(b"host", b"test"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), (b"authorization", b"Bearer wk_x")],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent: list[dict[str, Any]] = []
    fed = False

    async def receive() -> dict[str, Any]:
        nonlocal fed
        if fed:
            await asyncio.sleep(3600)
        fed = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return scope, start["status"], dict(start["headers"]), data


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
