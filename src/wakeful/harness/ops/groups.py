"""Group operations (interfaces.md §2.2 "Meta and administration"): create and list groups — admin keys only.

Each answers exactly what its HTTP route answers; see ``wakeful.harness.ops.table``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.harness.ops.pages import page
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import require_admin
from wakeful.harness.store import groups

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = ["create", "group_view", "list_groups"]


def group_view(group: groups.Group) -> dict[str, Any]:
    return {"id": group.id, "name": group.name, "limits": group.limits, "created_ms": group.created_ms}


@operation("groups.create")
async def create(harness: Harness, principal: Principal, *, name: str,
                 limits: dict[str, Any] | None = None) -> dict[str, Any]:
    """A new group (tenant) with optional limit overrides."""
    require_admin(principal)
    async with harness.store.tx() as tx:
        group = await groups.create_group(tx, name=name, limits=limits)
    return group_view(group)


@operation("groups.list")
async def list_groups(harness: Harness, principal: Principal, *, limit: int = 50,
                      cursor: str | None = None) -> dict[str, Any]:
    """One page of every group, by id."""
    require_admin(principal)
    async with harness.store.tx(readonly=True) as tx:
        found = sorted(await groups.list_groups(tx), key=lambda g: g.id)
    return page(found, limit=limit, cursor=cursor, key=lambda g: g.id, render=group_view)
