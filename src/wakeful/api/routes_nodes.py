"""``GET /v1/nodes`` (admin; interfaces.md §2.2): the cluster's nodes with state, heartbeat age, objects and the
number of agent leases each holds (harness.md §2.8, §19)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from wakeful.api.auth import AdminPrincipal
from wakeful.api.context import harness_of
from wakeful.api.pages import Cursor, Limit, page
from wakeful.harness.placement.overview import node_views

__all__ = ["router"]

router = APIRouter(tags=["nodes"])


@router.get("/v1/nodes", summary="Nodes with state, heartbeat age, objects and leases held (admin)")
async def list_nodes(request: Request, principal: AdminPrincipal, limit: Limit = 50, cursor: Cursor = None,
                     include_gone: bool = False) -> dict[str, Any]:
    harness = harness_of(request)
    dead_after_ms = harness.config.placement.dead_after_s * 1000
    found = sorted(await node_views(harness.store, dead_after_ms, include_gone=include_gone),
                   key=lambda n: str(n["id"]))
    return page(found, limit=limit, cursor=cursor, key=lambda n: str(n["id"]), render=lambda n: n)
