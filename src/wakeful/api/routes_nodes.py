"""``GET /v1/nodes`` (admin; interfaces.md §2.2): the cluster's nodes with state, heartbeat age, objects and the
number of agent leases each holds (harness.md §2.8, §19)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from wakeful.api.auth import AdminPrincipal
from wakeful.api.context import harness_of
from wakeful.api.pages import Cursor, Limit
from wakeful.harness import ops

__all__ = ["router"]

router = APIRouter(tags=["nodes"])


@router.get("/v1/nodes", summary="Nodes with state, heartbeat age, objects and leases held (admin)")
async def list_nodes(request: Request, principal: AdminPrincipal, limit: Limit = 50, cursor: Cursor = None,
                     include_gone: bool = False) -> dict[str, Any]:
    return await ops.nodes.list_nodes(harness_of(request), principal, limit=limit, cursor=cursor,
                                      include_gone=include_gone)
