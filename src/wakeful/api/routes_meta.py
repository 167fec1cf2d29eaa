"""Meta routes: ``GET /healthz`` (no auth) and ``GET /v1/info`` (any key) — interfaces.md §2.2."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from wakeful.api.auth import AnyPrincipal
from wakeful.api.context import settings_of
from wakeful.harness import ops

__all__ = ["router"]

router = APIRouter(tags=["meta"])


@router.get("/healthz", summary="Liveness and store reachability (no auth)")
async def healthz(request: Request) -> JSONResponse:
    harness = request.app.state.harness
    settings = settings_of(request)
    node = settings.node_name
    health = await ops.nodes.health(harness)
    if health == "unavailable":
        return JSONResponse({"status": "unavailable", "error": "unavailable", "message": "the store is unreachable",
                             "node": node, "store": "unavailable"}, status_code=503)
    if health == "draining":  # interfaces.md §2.2 / harness.md §19.4: a draining node answers 503
        return JSONResponse({"status": "draining", "error": "unavailable", "message": "this node is draining",
                             "node": node, "store": "ok"}, status_code=503)
    return JSONResponse({"status": "ok", "node": node, "store": "ok"})


@router.get("/v1/info", summary="Versions, node, store kind, compiler availability and limits")
async def info(request: Request, principal: AnyPrincipal) -> dict[str, Any]:
    from wakeful import __version__, sdk
    from wakeful.api.context import harness_of

    harness = harness_of(request)
    settings = settings_of(request)
    return {
        "version": __version__,
        "sdk_version": sdk.SDK_ABI,
        "protocol_version": 1,
        "node": settings.node_name,
        "node_id": harness.node.node_id,
        "store": harness.store.dialect,
        "store_commits": harness.store.commits,  # write transactions this node committed since it started
        "compiler_available": _compiler_available(),
        "limits": dataclasses.asdict(harness.config.limits),
        "recent_refusals": {**request.app.state.refusals.counts(), "window_s": 3600},
        # the group the principal works in: an admin key acting as an agent (X-Wakeful-Agent) is the agent's
        "principal": {"role": principal.role, "kind": principal.kind,
                      "group_id": principal.group_id or principal.agent_group_id,
                      "agent_id": principal.agent_id, "key_id": principal.key_id},
    }


def _compiler_available() -> bool:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return False
    return True
