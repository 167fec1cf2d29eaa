"""Script operations (harness.md, scripts): compile and run a script once as an agent of the group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import NotFound
from wakeful.harness.ops.builds import acting_agent
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import Principal, check_group
from wakeful.harness.store import agents

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness

__all__ = ["run"]


@operation("scripts.run")
async def run(harness: Harness, principal: Principal, *, group_id: str, source: str | None = None,
              files: dict[str, str] | None = None, entry: str | None = None, env: dict[str, str] | None = None,
              agent_id: str | None = None) -> dict[str, Any]:
    """The outcome of one run (a failed compile or run is an outcome, not a refusal)."""
    check_group(principal, group_id)
    agent_id = acting_agent(principal, agent_id)
    async with harness.store.tx(readonly=True) as tx:
        agent = await agents.find_agent(tx, agent_id)
    if agent is None or agent.group_id != group_id:
        raise NotFound(f"agent {agent_id} not found")
    request_body: dict[str, Any] = {k: v for k, v in (("source", source), ("files", files), ("entry", entry))
                                    if v is not None}
    return await harness.run_script(agent_id, request_body, env=env)
