"""Session operations (interfaces.md §2.2 "Agents, sessions and wakes"): create and list an agent's sessions,
delete one (``session_in_use`` while a Loop targets it).

A session of an agent the principal does not see is ``session_not_found``. Each operation answers exactly what
its HTTP route answers; see ``wakeful.harness.ops.table``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import SessionNotFound
from wakeful.harness.ops.agents import agent_in_scope
from wakeful.harness.ops.pages import page
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import check_group
from wakeful.harness.store import sessions

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal
    from wakeful.harness.store.core import Tx

__all__ = ["create", "delete", "find", "list_sessions", "session_in_scope", "session_view"]


def session_view(session: sessions.Session) -> dict[str, Any]:
    return {"id": session.id, "agent_id": session.agent_id, "group_id": session.group_id, "title": session.title,
            "created_ms": session.created_ms}


async def session_in_scope(tx: Tx, principal: Principal, group_id: str, session_id: str) -> sessions.Session:
    """The session, if it is in ``group_id`` and the principal sees its agent; else ``session_not_found``."""
    check_group(principal, group_id)
    try:
        found = await sessions.get_session(tx, session_id[:200])
    except SessionNotFound:
        found = None
    if found is None or found.group_id != group_id or not principal.sees_agent(found.agent_id):
        raise SessionNotFound(f"session {session_id[:40]} not found")
    return found


async def find(harness: Harness, principal: Principal, session_id: str) -> dict[str, Any]:
    """A session by its id alone, in the principal's scope — in process only (see ``agents.find``)."""
    async with harness.store.tx(readonly=True) as tx:
        try:
            found = await sessions.get_session(tx, session_id[:200])
        except SessionNotFound:
            found = None
    if found is None or not principal.covers_group(found.group_id) or not principal.sees_agent(found.agent_id):
        raise SessionNotFound(f"session {session_id[:40]} not found")
    return session_view(found)


@operation("sessions.create")
async def create(harness: Harness, principal: Principal, *, group_id: str, agent_id: str,
                 title: str = "") -> dict[str, Any]:
    """A new session (an inbox) of the agent."""
    async with harness.store.tx() as tx:
        await agent_in_scope(tx, principal, group_id, agent_id)
        session = await sessions.create_session(tx, agent_id=agent_id, title=title)
    return session_view(session)


@operation("sessions.list")
async def list_sessions(harness: Harness, principal: Principal, *, group_id: str, agent_id: str, limit: int = 50,
                        cursor: str | None = None) -> dict[str, Any]:
    """One page of the agent's sessions, by id."""
    async with harness.store.tx(readonly=True) as tx:
        await agent_in_scope(tx, principal, group_id, agent_id)
        found = sorted(await sessions.list_sessions(tx, agent_id=agent_id), key=lambda s: s.id)
    return page(found, limit=limit, cursor=cursor, key=lambda s: s.id, render=session_view)


@operation("sessions.delete")
async def delete(harness: Harness, principal: Principal, *, group_id: str, session_id: str) -> None:
    """Delete the session; ``session_in_use`` while a Loop targets it."""
    async with harness.store.tx() as tx:
        await session_in_scope(tx, principal, group_id, session_id)
        await sessions.delete_session(tx, session_id)
