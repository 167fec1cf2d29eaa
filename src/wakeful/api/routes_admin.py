"""Administration: groups (admin) and API keys (admin, group) — interfaces.md §2.2, harness.md §2.1 — adapters
over ``wakeful.harness.ops`` (``groups``, ``keys``)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import ConfigDict, Field

from wakeful.api.auth import AdminPrincipal, GroupPrincipal
from wakeful.api.context import harness_of
from wakeful.api.models import Body
from wakeful.api.pages import Cursor, Limit
from wakeful.harness import ops

__all__ = ["router"]

router = APIRouter(tags=["administration"])


class GroupIn(Body):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=80)
    limits: dict[str, Any] | None = None


class KeyIn(Body):
    model_config = ConfigDict(extra="forbid")
    role: Literal["group", "agent"]
    agent_id: str | None = Field(default=None, min_length=1, max_length=40)
    label: str | None = Field(default=None, min_length=1, max_length=200)


@router.post("/v1/groups", status_code=201, summary="Create a group (admin)")
async def create_group(body: GroupIn, request: Request, principal: AdminPrincipal) -> dict[str, Any]:
    return await ops.groups.create(harness_of(request), principal, name=body.name, limits=body.limits)


@router.get("/v1/groups", summary="List groups (admin)")
async def list_groups(request: Request, principal: AdminPrincipal, limit: Limit = 50,
                      cursor: Cursor = None) -> dict[str, Any]:
    return await ops.groups.list_groups(harness_of(request), principal, limit=limit, cursor=cursor)


@router.post("/v1/groups/{group_id}/keys", status_code=201, summary="Create a key; its text appears only here")
async def create_key(group_id: str, body: KeyIn, request: Request, principal: GroupPrincipal) -> dict[str, Any]:
    return await ops.keys.create(harness_of(request), principal, group_id=group_id, role=body.role,
                                 agent_id=body.agent_id, label=body.label)


@router.get("/v1/groups/{group_id}/keys", summary="List a group's keys without secrets")
async def list_keys(group_id: str, request: Request, principal: GroupPrincipal, limit: Limit = 50,
                    cursor: Cursor = None) -> dict[str, Any]:
    return await ops.keys.list_keys(harness_of(request), principal, group_id=group_id, limit=limit, cursor=cursor)


@router.delete("/v1/groups/{group_id}/keys/{key_id}", status_code=204, summary="Revoke a key")
async def revoke_key(group_id: str, key_id: str, request: Request, principal: GroupPrincipal) -> Response:
    await ops.keys.revoke(harness_of(request), principal, group_id=group_id, key_id=key_id)
    return Response(status_code=204)
