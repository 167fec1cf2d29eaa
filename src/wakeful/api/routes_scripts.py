"""Scripts over HTTP (interfaces.md §2.2): ``POST G/scripts/run`` compiles a bundle and runs it once.

The answer is ``200`` with the script outcome of harness.md §18, failed outcomes included; only a malformed
request (``400``), a key outside its scope (``404``) or an unavailable compiler (``503``) is an HTTP error.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from wakeful.api.auth import MemberPrincipal, Principal
from wakeful.api.context import harness_of
from wakeful.harness.errors import InvalidRequest, NotFound
from wakeful.harness.store import agents

__all__ = ["router"]

router = APIRouter(tags=["scripts"])
G = "/v1/agent-groups/{group_id}"


class ScriptIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str | None = Field(default=None, max_length=262_144, description="C text; becomes main.c")
    files: dict[str, str] | None = Field(default=None, description="path → text (with entry), or extra headers")
    entry: str | None = Field(default=None, min_length=1, max_length=512)
    env: dict[str, str] | None = Field(default=None, description="strings the script reads from sf_config().env")
    agent_id: str | None = Field(default=None, min_length=1, max_length=40,
                                 description="the agent the script runs as (person principals only)")


@router.post(G + "/scripts/run", summary="Compile and run a script once; the outcome (also a failed one) is a 200")
async def run_script(group_id: str, body: ScriptIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    harness = harness_of(request)
    agent_id = _acting_agent(principal, body.agent_id)
    async with harness.store.tx(readonly=True) as tx:
        agent = await agents.find_agent(tx, agent_id)
    if agent is None or agent.group_id != group_id:
        raise NotFound(f"agent {agent_id} not found")
    request_body: dict[str, Any] = {k: v for k, v in (("source", body.source), ("files", body.files),
                                                       ("entry", body.entry)) if v is not None}
    return await harness.run_script(agent_id, request_body, env=body.env)


def _acting_agent(principal: Principal, agent_id: str | None) -> str:
    """An agent principal runs as itself; a person principal names ``agent_id``."""
    if principal.agent_id is not None:
        if agent_id is not None and agent_id != principal.agent_id:
            raise NotFound(f"agent {agent_id} not found")
        return principal.agent_id
    if agent_id is None:
        raise InvalidRequest("a person principal must name agent_id (or send X-Wakeful-Agent)", field="agent_id")
    return agent_id
