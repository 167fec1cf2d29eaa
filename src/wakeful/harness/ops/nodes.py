"""Node operations: the cluster's nodes (``GET /v1/nodes``, admin; interfaces.md §2.2) and the ``wakeful
status`` document (interfaces.md §4.2), read in one transaction on SQLite as on PostgreSQL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from wakeful.harness.ops.pages import page
from wakeful.harness.ops.table import operation
from wakeful.harness.placement.overview import node_views
from wakeful.harness.placement.overview import status as overview
from wakeful.harness.principal import Principal, require_admin

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.store import Store

__all__ = ["health", "list_nodes", "status"]


@operation("nodes.list")
async def list_nodes(harness: Harness, principal: Principal, *, limit: int = 50, cursor: str | None = None,
                     include_gone: bool = False) -> dict[str, Any]:
    """Nodes with state, heartbeat age, objects and the agent leases each holds (harness.md §2.8, §19)."""
    require_admin(principal)
    dead_after_ms = harness.config.placement.dead_after_s * 1000
    found = sorted(await node_views(harness.store, dead_after_ms, include_gone=include_gone),
                   key=lambda n: str(n["id"]))
    return page(found, limit=limit, cursor=cursor, key=lambda n: str(n["id"]), render=lambda n: n)


async def status(store_url: str, dead_after_ms: int,
                 extend: Callable[[Store], Awaitable[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """The ``wakeful status`` document of the store at ``store_url`` (the operator's, on the node's machine),
    with the members ``extend`` reads in the same session (the control plane's goals waiting on a person)."""
    from wakeful.harness.store import Store

    store = await Store.open(store_url)  # the version rules of every local-mode command (harness.md §3)
    try:
        doc = await overview(store, dead_after_ms)
        if extend is not None:
            doc.update(await extend(store))
        return doc
    finally:
        await store.close()


async def health(harness: Harness) -> str:
    """``/healthz`` (no principal): ``ok``, ``unavailable`` (not started, or the store does not answer) or
    ``draining`` (a cluster node whose placement left ``alive``, harness.md §19.4)."""
    try:
        async with harness.store.tx(readonly=True) as tx:
            await tx.now_ms()
    except Exception:  # noqa: BLE001 - any failure to reach the store is "unavailable" here
        return "unavailable"
    placement = harness.node.placement
    return "ok" if placement is None or bool(placement.accepting) else "draining"
