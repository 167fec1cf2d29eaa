"""Agents: creation, lookup and the archive status column (harness.md §2.2).

Archiving's effect on Loops (``paused(archive)``, re-admission) is the lifecycle's; this module owns the row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from wakeful.harness.errors import AgentNotFound, InvalidRequest
from wakeful.harness.store import jsontext, schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.groups import check_name, get_group
from wakeful.harness.store.ids import lookup_text, new_id, shown
from wakeful.harness.store.reads import by_keys

__all__ = ["Agent", "create_agent", "find_agent", "find_agents", "get_agent", "list_agents", "set_status"]

MAX_METADATA_BYTES = 4096
STATUSES = ("active", "archived")
A = schema.agent


@dataclass(frozen=True)
class Agent:
    id: str
    group_id: str
    name: str
    status: str
    created_ms: int
    archived_ms: int | None
    metadata: dict[str, Any]


def _agent(row: Any) -> Agent:
    return Agent(
        row.id,
        row.group_id,
        row.name,
        row.status,
        row.created_ms,
        row.archived_ms,
        jsontext.decode(row.metadata),
    )


# §2.2: metadata is an object of at most 4 KiB encoded
def _check_metadata(metadata: object) -> dict[str, Any]:
    if not isinstance(metadata, dict):
        raise InvalidRequest("metadata must be an object", field="metadata")
    try:
        size = jsontext.encoded_bytes(metadata)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"metadata is not JSON: {exc}", field="metadata") from None
    if size > MAX_METADATA_BYTES:
        raise InvalidRequest(
            f"metadata is {size} bytes encoded; at most {MAX_METADATA_BYTES}", field="metadata"
        )
    return metadata


async def create_agent(tx: Tx, *, group_id: str, name: str, metadata: dict[str, Any] | None = None) -> Agent:
    meta = _check_metadata({} if metadata is None else metadata)
    check_name(name)
    await get_group(tx, group_id)
    now = await tx.now_ms()
    agent = Agent(new_id("agt", now), group_id, name, "active", now, None, meta)
    await tx.execute(
        A.insert().values(
            id=agent.id,
            group_id=group_id,
            name=name,
            status="active",
            created_ms=now,
            archived_ms=None,
            metadata=jsontext.encode(meta),
        )
    )
    return agent


async def find_agent(tx: Tx, agent_id: str, *, for_update: bool = False) -> Agent | None:
    if lookup_text(agent_id) is None:
        return None
    stmt = sa.select(A).where(A.c.id == agent_id)
    row = await tx.first(stmt, for_update=for_update)
    return None if row is None else _agent(row)


async def find_agents(tx: Tx, agent_ids: Iterable[str]) -> dict[str, Agent]:
    """The agents of ``agent_ids`` that exist, by id (one statement; issue 16: a batch of creates' reads)."""
    ids = sorted({i for i in agent_ids if lookup_text(i) is not None})
    if not ids:
        return {}
    stmt, params = by_keys(tx.dialect, "agents.find", sa.select(A).where, A.c.id, ids)
    return {r.id: _agent(r) for r in await tx.execute(stmt, params)}


async def get_agent(tx: Tx, agent_id: str, *, for_update: bool = False) -> Agent:
    agent = await find_agent(tx, agent_id, for_update=for_update)
    if agent is None:
        raise AgentNotFound(f"agent {shown(agent_id)} not found", id=shown(agent_id))
    return agent


async def list_agents(tx: Tx, *, group_id: str | None = None, status: str | None = None) -> list[Agent]:
    stmt = sa.select(A).order_by(A.c.created_ms, A.c.id)
    if group_id is not None:
        stmt = stmt.where(A.c.group_id == group_id)
    if status is not None:
        stmt = stmt.where(A.c.status == status)
    return [_agent(r) for r in await tx.execute(stmt)]


async def set_status(tx: Tx, agent_id: str, status: str) -> tuple[Agent, bool]:
    """Set ``active``/``archived`` (row locked); returns the agent and whether the status changed."""
    if status not in STATUSES:
        raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}", field="status")
    agent = await get_agent(tx, agent_id, for_update=True)
    if agent.status == status:
        return agent, False
    archived_ms = await tx.now_ms() if status == "archived" else None
    await tx.execute(A.update().where(A.c.id == agent_id).values(status=status, archived_ms=archived_ms))
    return await get_agent(tx, agent_id), True
