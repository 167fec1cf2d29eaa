"""Loop event rows (harness.md §2.6): insert-if-absent by ``(loop_id, event_id)``, the pending set in delivery
order, and counts. Admission rules (§10.2) belong to intake; ack and delivery stamps to the lifecycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from wakeful.harness.store import jsontext, schema
from wakeful.harness.store.core import Tx

__all__ = ["Event", "count_pending", "get_event", "insert_event", "pending_events"]

E = schema.loop_event


@dataclass(frozen=True)
class Event:
    loop_id: str
    event_id: str
    group_id: str
    topic: str
    payload: Any
    payload_sha256: str
    envelope_bytes: int
    status: str
    source: str
    received_ms: int
    first_delivered_ms: int | None
    deadline_ms: int | None
    acked_ms: int | None
    acked_incarnation: int | None
    discarded_ms: int | None


def _event(row: Any) -> Event:
    values = {name: getattr(row, name) for name in Event.__dataclass_fields__}
    values["payload"] = jsontext.decode(values["payload"])
    return Event(**values)


async def insert_event(
    tx: Tx,
    *,
    loop_id: str,
    group_id: str,
    event_id: str,
    topic: str,
    payload: Any,
    payload_sha256: str,
    envelope_bytes: int,
    source: str,
) -> bool:
    """Insert a ``pending`` event; False when ``(loop_id, event_id)`` already exists in any status."""
    values = {
        "loop_id": loop_id,
        "event_id": event_id,
        "group_id": group_id,
        "topic": topic,
        "payload": jsontext.encode(payload),
        "payload_sha256": payload_sha256,
        "envelope_bytes": envelope_bytes,
        "status": "pending",
        "source": source,
        "received_ms": await tx.now_ms(),
    }
    return await tx.insert_if_absent(E, values)


async def get_event(tx: Tx, loop_id: str, event_id: str) -> Event | None:
    row = (await tx.execute(sa.select(E).where(E.c.loop_id == loop_id, E.c.event_id == event_id))).first()
    return None if row is None else _event(row)


# §11: delivery order is (received_ms, event_id)
async def pending_events(tx: Tx, loop_id: str, *, limit: int | None = None) -> list[Event]:
    stmt = (
        sa.select(E)
        .where(E.c.loop_id == loop_id, E.c.status == "pending")
        .order_by(E.c.received_ms, E.c.event_id)
    )
    if limit is not None:
        stmt = stmt.limit(limit)
    return [_event(r) for r in await tx.execute(stmt)]


async def count_pending(tx: Tx, loop_id: str) -> int:
    stmt = sa.select(sa.func.count()).where(E.c.loop_id == loop_id, E.c.status == "pending")
    return int((await tx.execute(stmt)).scalar_one())
