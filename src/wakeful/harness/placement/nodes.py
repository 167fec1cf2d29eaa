"""Node rows in the store: registration, heartbeat, state, liveness and the listing for faces (harness.md §2.8,
§19.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from wakeful.harness.store import schema
from wakeful.harness.store.core import Tx

__all__ = ["GONE_AFTER_MS", "NodeInfo", "gone_due", "heartbeat", "list_nodes", "live_nodes", "register", "set_state",
           "sweep_gone"]

N = schema.node
A = schema.agent_lease
GONE_AFTER_MS = 600_000  # §19.1: a dead node's row is swept to `gone` after 10 minutes


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node row plus what faces show: heartbeat age, whether it counts as alive, leases held."""

    id: str
    name: str
    host: str
    pid: int
    version: str
    started_ms: int
    heartbeat_ms: int
    state: str
    objects: int
    capacity: int
    heartbeat_age_ms: int
    dead: bool
    leases: int


# §19.1 start: insert a node row (alive); a node restarted under its own id (placement/identity.py) takes its
# row over: a new start, pid and heartbeat, alive again
async def register(tx: Tx, *, node_id: str, name: str, host: str, pid: int, version: str, capacity: int) -> None:
    now = await tx.now_ms()
    values: dict[str, Any] = {
        "name": name[:200], "host": host[:200], "pid": pid, "version": version[:40], "started_ms": now,
        "heartbeat_ms": now, "state": "alive", "objects": 0, "capacity": capacity,
    }
    dialect: Any = pg_dialect if tx.dialect == "postgresql" else sqlite_dialect
    stmt = dialect.insert(N).values(id=node_id, **values)
    await tx.execute(stmt.on_conflict_do_update(index_elements=[N.c.id], set_=values))


# §19.1: refreshed every heartbeat_s with the objects gauge; False when the row is gone
async def heartbeat(tx: Tx, node_id: str, *, objects: int) -> bool:
    now = await tx.now_ms()
    stmt = N.update().where(N.c.id == node_id, N.c.state != "gone").values(heartbeat_ms=now, objects=objects)
    return bool((await tx.execute(stmt)).rowcount == 1)


async def set_state(tx: Tx, node_id: str, state: str) -> None:
    if state not in ("alive", "draining", "gone"):
        raise ValueError(f"unknown node state {state!r}")
    now = await tx.now_ms()
    values: dict[str, Any] = {"state": state}
    if state != "gone":
        values["heartbeat_ms"] = now
    await tx.execute(N.update().where(N.c.id == node_id).values(**values))


# §19.1: alive = not gone and a heartbeat younger than dead_after (store clock)
async def live_nodes(tx: Tx, dead_after_ms: int) -> int:
    now = await tx.now_ms()
    stmt = sa.select(sa.func.count()).select_from(N).where(
        N.c.state == "alive", N.c.heartbeat_ms > now - dead_after_ms,
    )
    return int((await tx.execute(stmt)).scalar_one())


# §19.1: others sweep a dead node's row to `gone` after 10 minutes; issue 16: the tick reads first, writes if due
async def gone_due(tx: Tx) -> bool:
    """Whether ``sweep_gone`` would change a row (a read)."""
    now = await tx.now_ms()
    stmt = sa.select(N.c.id).where(N.c.state != "gone", N.c.heartbeat_ms <= now - GONE_AFTER_MS).limit(1)
    return (await tx.execute(stmt)).first() is not None


async def sweep_gone(tx: Tx) -> int:
    now = await tx.now_ms()
    stmt = N.update().where(N.c.state != "gone", N.c.heartbeat_ms <= now - GONE_AFTER_MS).values(state="gone")
    return int((await tx.execute(stmt)).rowcount)


async def list_nodes(tx: Tx, dead_after_ms: int, *, include_gone: bool = True) -> list[NodeInfo]:
    """Nodes (newest start first) with heartbeat age, dead flag and the number of unexpired leases held."""
    now = await tx.now_ms()
    held = (sa.select(A.c.node_id, sa.func.count().label("n")).where(A.c.expires_ms > now)
            .group_by(A.c.node_id).subquery())
    stmt = sa.select(N, sa.func.coalesce(held.c.n, 0).label("leases")).select_from(
        N.outerjoin(held, held.c.node_id == N.c.id),
    ).order_by(N.c.started_ms.desc(), N.c.id)
    if not include_gone:
        stmt = stmt.where(N.c.state != "gone")
    out = []
    for r in await tx.execute(stmt):
        age = max(0, now - int(r.heartbeat_ms))
        out.append(NodeInfo(
            r.id, r.name, r.host, int(r.pid), r.version, int(r.started_ms), int(r.heartbeat_ms), r.state,
            int(r.objects), int(r.capacity), age, r.state == "gone" or age >= dead_after_ms, int(r.leases),
        ))
    return out
