"""What operators see of a cluster: nodes with heartbeat age, objects and leases held; lease totals; Loops by
state and reason; pending events and the oldest deadline; wakes in the last hour (interfaces.md §2.2
``GET /v1/nodes``, §4.2 ``wakeful status``). Read-only, one transaction, on SQLite as on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from wakeful.harness.placement import nodes
from wakeful.harness.store import schema
from wakeful.harness.store.core import Store, Tx

__all__ = ["node_views", "status"]

L, E, M, A = schema.loop, schema.loop_event, schema.message, schema.agent_lease
HOUR_MS = 3_600_000


def _node_view(n: nodes.NodeInfo) -> dict[str, Any]:
    return {
        "id": n.id, "name": n.name, "host": n.host, "pid": n.pid, "version": n.version, "state": n.state,
        "alive": n.state == "alive" and not n.dead, "started_ms": n.started_ms, "heartbeat_ms": n.heartbeat_ms,
        "heartbeat_age_ms": n.heartbeat_age_ms, "objects": n.objects, "capacity": n.capacity,
        "leases_held": n.leases,
    }


async def node_views(store: Store, dead_after_ms: int, *, include_gone: bool = False) -> list[dict[str, Any]]:
    """Nodes, newest start first (``gone`` ones only when asked)."""
    async with store.tx(readonly=True) as tx:
        return [_node_view(n) for n in await nodes.list_nodes(tx, dead_after_ms, include_gone=include_gone)]


async def status(store: Store, dead_after_ms: int) -> dict[str, Any]:
    """The ``wakeful status`` document."""
    async with store.tx(readonly=True) as tx:
        now = await tx.now_ms()
        node_list = [_node_view(n) for n in await nodes.list_nodes(tx, dead_after_ms, include_gone=False)]
        return {
            "now_ms": now,
            "nodes": node_list,
            "leases": await _leases(tx, now),
            "loops": await _loops(tx),
            "pending": await _pending(tx),
            "wakes_last_hour": int((await tx.execute(sa.select(sa.func.count()).select_from(M).where(
                M.c.kind == "loop", M.c.created_ms > now - HOUR_MS))).scalar_one()),
        }


async def _leases(tx: Tx, now: int) -> dict[str, Any]:
    rows = list(await tx.execute(sa.select(A.c.node_id, A.c.expires_ms)))
    held = [r for r in rows if int(r.expires_ms) > now]
    by_node: dict[str, int] = {}
    for r in held:
        by_node[r.node_id] = by_node.get(r.node_id, 0) + 1
    stranded = int((await tx.execute(
        sa.select(sa.func.count(sa.distinct(L.c.agent_id))).select_from(L.outerjoin(A, A.c.agent_id == L.c.agent_id))
        .where(L.c.state == "active", sa.or_(A.c.agent_id.is_(None), A.c.expires_ms <= now)),
    )).scalar_one())
    return {"held": len(held), "expired": len(rows) - len(held), "by_node": by_node,
            "agents_without_lease": stranded}


async def _loops(tx: Tx) -> dict[str, int]:
    stmt = sa.select(L.c.state, L.c.pause_reason, sa.func.count().label("n")).group_by(L.c.state, L.c.pause_reason)
    out: dict[str, int] = {}
    for row in await tx.execute(stmt):
        found: Any = row
        out[f"{found.state}({found.pause_reason})" if found.pause_reason else found.state] = int(found.n)
    return dict(sorted(out.items()))


async def _pending(tx: Tx) -> dict[str, Any]:
    stmt = sa.select(sa.func.count().label("n"), sa.func.min(E.c.deadline_ms).label("deadline"),
                     sa.func.min(E.c.received_ms).label("received")).where(E.c.status == "pending")
    row: Any = (await tx.execute(stmt)).one()
    return {"total": int(row.n), "oldest_deadline_ms": None if row.deadline is None else int(row.deadline),
            "oldest_received_ms": None if row.received is None else int(row.received)}
