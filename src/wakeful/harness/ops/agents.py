"""Agent operations (interfaces.md §2.2 "Agents, sessions and wakes"): create, list, get, archive, unarchive.

An agent principal sees only its own agent; an agent outside the principal's scope is ``agent_not_found``.
Each operation answers exactly what its HTTP route answers; see ``wakeful.harness.ops.table``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import AgentNotFound
from wakeful.harness.ops.pages import page
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import check_group, require_person
from wakeful.harness.store import agents

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal
    from wakeful.harness.store.core import Tx

__all__ = ["agent_in_scope", "agent_view", "archive", "create", "find", "get", "list_agents", "unarchive"]


def agent_view(agent: agents.Agent) -> dict[str, Any]:
    return {"id": agent.id, "group_id": agent.group_id, "name": agent.name, "status": agent.status,
            "created_ms": agent.created_ms, "archived_ms": agent.archived_ms, "metadata": agent.metadata}


async def agent_in_scope(tx: Tx, principal: Principal, group_id: str, agent_id: str) -> agents.Agent:
    """The agent, if it is in ``group_id`` and the principal sees it; else ``agent_not_found``."""
    check_group(principal, group_id)
    found = await agents.find_agent(tx, agent_id) if 1 <= len(agent_id) <= 40 else None
    if found is None or found.group_id != group_id or not principal.sees_agent(found.id):
        raise AgentNotFound(f"agent {agent_id[:40]} not found")
    return found


async def find(harness: Harness, principal: Principal, agent_id: str) -> dict[str, Any]:
    """An agent by its id alone, in the principal's scope (the operator's: every group) — in process only, for
    the local command line and ``wakeful mcp --embedded``, which name an agent without its group."""
    async with harness.store.tx(readonly=True) as tx:
        found = await agents.find_agent(tx, agent_id) if 1 <= len(agent_id) <= 40 else None
        if found is None or not principal.covers_group(found.group_id) or not principal.sees_agent(found.id):
            raise AgentNotFound(f"agent {agent_id[:40]} not found")
    return agent_view(found)


@operation("agents.create")
async def create(harness: Harness, principal: Principal, *, group_id: str, name: str,
                 metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """A new agent in the group (a group or admin key)."""
    require_person(principal, group_id)
    async with harness.store.tx() as tx:
        agent = await agents.create_agent(tx, group_id=group_id, name=name, metadata=metadata)
    return agent_view(agent)


@operation("agents.list")
async def list_agents(harness: Harness, principal: Principal, *, group_id: str, limit: int = 50,
                      cursor: str | None = None) -> dict[str, Any]:
    """One page of the group's agents by id (an agent principal sees itself)."""
    check_group(principal, group_id)
    async with harness.store.tx(readonly=True) as tx:
        found = [a for a in await agents.list_agents(tx, group_id=group_id) if principal.sees_agent(a.id)]
    found.sort(key=lambda a: a.id)
    return page(found, limit=limit, cursor=cursor, key=lambda a: a.id, render=agent_view)


@operation("agents.get")
async def get(harness: Harness, principal: Principal, *, group_id: str, agent_id: str) -> dict[str, Any]:
    """One agent."""
    async with harness.store.tx(readonly=True) as tx:
        return agent_view(await agent_in_scope(tx, principal, group_id, agent_id))


@operation("agents.archive")
async def archive(harness: Harness, principal: Principal, *, group_id: str, agent_id: str) -> dict[str, Any]:
    """Archive the agent: its active Loops pause with reason ``archive``."""
    require_person(principal, group_id)
    async with harness.store.tx(readonly=True) as tx:
        await agent_in_scope(tx, principal, group_id, agent_id)
    result = await harness.loops.archive_agent(agent_id, actor=principal.actor)
    return {"agent": await _agent(harness, agent_id), "paused_loops": result.get("paused", [])}


@operation("agents.unarchive")
async def unarchive(harness: Harness, principal: Principal, *, group_id: str, agent_id: str) -> dict[str, Any]:
    """Unarchive the agent: the Loops its archive paused resume, within quota."""
    require_person(principal, group_id)
    async with harness.store.tx(readonly=True) as tx:
        await agent_in_scope(tx, principal, group_id, agent_id)
    result = await harness.loops.unarchive_agent(agent_id, actor=principal.actor)
    return {"agent": await _agent(harness, agent_id), "resumed": result.get("resumed", []),
            "quota_paused": result.get("quota", [])}


async def _agent(harness: Harness, agent_id: str) -> dict[str, Any]:
    async with harness.store.tx(readonly=True) as tx:
        return agent_view(await agents.get_agent(tx, agent_id))
