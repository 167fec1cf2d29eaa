"""Scripts over HTTP (interfaces.md §2.2): ``POST G/scripts/run`` compiles a bundle and runs it once.

The answer is ``200`` with the script outcome of harness.md §18, failed outcomes included; only a malformed
request (``400``), a key outside its scope (``404``) or an unavailable compiler (``503``) is an HTTP error.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from wakeful.api.auth import MemberPrincipal
from wakeful.api.context import harness_of
from wakeful.harness import ops

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
    return await ops.scripts.run(harness_of(request), principal, group_id=group_id, source=body.source,
                                 files=body.files, entry=body.entry, env=body.env, agent_id=body.agent_id)
