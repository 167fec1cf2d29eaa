"""The scope checks operations share: a resource outside the principal's scope is ``not_found``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wakeful.harness.errors import NotFound
from wakeful.harness.principal import Principal, check_group
from wakeful.harness.store import agents, loops
from wakeful.harness.store.ids import lookup_text

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness

__all__ = ["agent_in_scope", "loop_in_scope"]


async def loop_in_scope(harness: Harness, principal: Principal, group_id: str, loop_id: str) -> loops.Loop:
    """The Loop's row, if it is in ``group_id`` and (for an agent principal) the agent's own; else ``not_found``."""
    check_group(principal, group_id)
    if lookup_text(loop_id) is None or len(loop_id) > 40:
        raise NotFound(f"Loop {loop_id[:40]} not found")
    async with harness.store.tx(readonly=True) as tx:
        row = await loops.find_loop(tx, loop_id)
    if row is None or row.group_id != group_id or not principal.sees_agent(row.agent_id):
        raise NotFound(f"Loop {loop_id[:40]} not found")
    return row


async def agent_in_scope(harness: Harness, principal: Principal, group_id: str, agent_id: str) -> agents.Agent:
    """The agent, if it is in ``group_id`` and visible to the principal (an agent sees only itself); else
    ``not_found``."""
    check_group(principal, group_id)
    found = None
    if 1 <= len(agent_id) <= 40 and principal.sees_agent(agent_id):
        async with harness.store.tx(readonly=True) as tx:
            found = await agents.find_agent(tx, agent_id)
    if found is None or found.group_id != group_id:
        raise NotFound(f"agent {agent_id[:40]} not found")
    return found
