"""``POST G/loops`` is served by ``RequestGuard`` straight to its endpoint, not through FastAPI's router (issue 16,
benchmarks.md §2.2 creates/s: route matching, dependency solving and the exception middleware were a seventh of
the node's time in a burst of creates), with the route's answers; a request the endpoint does not answer itself
(a body ``LoopIn`` refuses, no key) goes on to the FastAPI route with its body and is answered as before. The full
behaviour of the route is tests/integration/api/test_api_routes.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.asgi_call import asgi_call
from support.loops_harness import driver, started, tenant

from wakeful.api.app import create_app
from wakeful.harness.store import loops


async def _call(app: Any, path: str, body: bytes, key: str | None) -> tuple[dict[str, Any], int, Any]:
    """One POST through the ASGI app; returns the scope as the app left it, the status and the JSON body."""
    scope, status, _, data = await asgi_call(app, "POST", path, body, key=key)
    return scope, status, json.loads(data)


async def test_a_create_bypasses_the_fastapi_router_and_other_requests_reach_the_route(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        _, key = await h.create_key("group", group_id=group)
        app = create_app(h, routers=("loops",), public_docs=False, ui=False)
        path = f"/v1/agent-groups/{group}/loops"
        good = {"agent_id": agent, "session_id": session, "artifact": art, "name": "direct", "config": {"n": 1}}
        scope, status, made = await _call(app, path, json.dumps(good).encode(), key)
        assert "endpoint" not in scope and "route" not in scope  # FastAPI's router never saw the request
        assert status == 201 and made["name"] == "direct" and made["state"] == "active"
        async with h.store.tx(readonly=True) as tx:
            assert (await loops.get_loop(tx, made["id"])).config == {"n": 1}
        # refused by the operation: answered by the endpoint with the route's error body
        scope, status, answer = await _call(app, path, json.dumps({**good, "session_id": "ses_nope"}).encode(), key)
        assert "endpoint" not in scope and status == 404 and answer["error"] == "session_not_found"
        # the requests the endpoint does not answer reach the FastAPI route with their body, answered as before
        scope, status, answer = await _call(app, path, json.dumps({**good, "extra": 1}).encode(), key)
        assert scope.get("endpoint") is not None
        assert status == 400 and answer["error"] == "invalid_request" and answer["field"] == "extra"
        scope, status, answer = await _call(app, path, b"{not json", key)
        assert scope.get("endpoint") is not None and status == 400 and answer["error"] == "invalid_json"
        scope, status, answer = await _call(app, path, json.dumps(good).encode(), None)
        assert scope.get("endpoint") is not None and status == 401 and answer["error"] == "unauthorized"
        scope, status, answer = await _call(app, "/v1/agent-groups/grp_other/loops", json.dumps(good).encode(), key)
        assert scope.get("endpoint") is not None and status == 404 and answer["error"] == "not_found"
    finally:
        await h.stop()
