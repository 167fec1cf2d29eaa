"""Administration: groups (admin) and API keys (admin, group) — interfaces.md §2.2, harness.md §2.1."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import ConfigDict, Field

from wakeful.api.auth import AdminPrincipal, GroupPrincipal, key_cache
from wakeful.api.context import harness_of
from wakeful.api.models import Body
from wakeful.api.pages import Cursor, Limit, page
from wakeful.harness.errors import NotFound
from wakeful.harness.store import groups

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


def group_view(group: groups.Group) -> dict[str, Any]:
    return {"id": group.id, "name": group.name, "limits": group.limits, "created_ms": group.created_ms}


def key_view(key: groups.ApiKey) -> dict[str, Any]:
    return {"id": key.id, "role": key.role, "group_id": key.group_id, "agent_id": key.agent_id,
            "label": key.label, "created_ms": key.created_ms, "last_used_ms": key.last_used_ms,
            "revoked_ms": key.revoked_ms}


@router.post("/v1/groups", status_code=201, summary="Create a group (admin)")
async def create_group(body: GroupIn, request: Request, principal: AdminPrincipal) -> dict[str, Any]:
    async with harness_of(request).store.tx() as tx:
        group = await groups.create_group(tx, name=body.name, limits=body.limits)
    return group_view(group)


@router.get("/v1/groups", summary="List groups (admin)")
async def list_groups(request: Request, principal: AdminPrincipal, limit: Limit = 50,
                      cursor: Cursor = None) -> dict[str, Any]:
    async with harness_of(request).store.tx(readonly=True) as tx:
        found = sorted(await groups.list_groups(tx), key=lambda g: g.id)
    return page(found, limit=limit, cursor=cursor, key=lambda g: g.id, render=group_view)


@router.post("/v1/groups/{group_id}/keys", status_code=201, summary="Create a key; its text appears only here")
async def create_key(group_id: str, body: KeyIn, request: Request, principal: GroupPrincipal) -> dict[str, Any]:
    async with harness_of(request).store.tx() as tx:
        await groups.get_group(tx, group_id)
        key, text = await groups.create_key(tx, role=body.role, group_id=group_id, agent_id=body.agent_id,
                                            label=body.label)
    return {**key_view(key), "key": text}


@router.get("/v1/groups/{group_id}/keys", summary="List a group's keys without secrets")
async def list_keys(group_id: str, request: Request, principal: GroupPrincipal, limit: Limit = 50,
                    cursor: Cursor = None) -> dict[str, Any]:
    async with harness_of(request).store.tx(readonly=True) as tx:
        await groups.get_group(tx, group_id)
        found = sorted(await groups.list_keys(tx, group_id=group_id), key=lambda k: k.id)
    return page(found, limit=limit, cursor=cursor, key=lambda k: k.id, render=key_view)


@router.delete("/v1/groups/{group_id}/keys/{key_id}", status_code=204, summary="Revoke a key")
async def revoke_key(group_id: str, key_id: str, request: Request, principal: GroupPrincipal) -> Response:
    async with harness_of(request).store.tx() as tx:
        keys = {k.id: k for k in await groups.list_keys(tx, group_id=group_id)}
        if key_id not in keys:
            raise NotFound(f"key {key_id[:40]} not found")
        await groups.revoke_key(tx, key_id)
    key_cache(request).forget(key_id)
    return Response(status_code=204)
