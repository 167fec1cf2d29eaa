"""Builds and artifacts (interfaces.md §2.2): ``POST G/builds`` (the build report; a failed build is a normal
200), ``POST G/artifacts`` (a raw ELF upload) and ``GET G/artifacts/{sha256}`` (metadata or the bytes); and for
an agent writing a Loop, ``GET G/sdk`` (the guide with this node's tools, the header, the limits) and
``POST G/loops/test`` (a built artifact against scripted events and host answers: MCP ``loop.test``).

A person principal names the agent whose artifact path is set with ``agent_id`` (body or query); an agent
principal always uses itself. Each route calls its operation (``wakeful.harness.ops.builds`` / ``.artifacts``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import ConfigDict, Field

from wakeful.api.auth import GroupPrincipal, MemberPrincipal
from wakeful.api.body import read_bounded
from wakeful.api.context import harness_of
from wakeful.api.errors import ApiError, register_status
from wakeful.api.models import Body
from wakeful.harness import ops

__all__ = ["router"]

router = APIRouter(tags=["builds and artifacts"])
G = "/v1/agent-groups/{group_id}"
MAX_ELF = ops.artifacts.MAX_ELF
register_status("test_refused", 400)  # loop.test: the runtime refused the artifact or an event


class BuildIn(Body):
    model_config = ConfigDict(extra="forbid")
    source: str | None = Field(default=None, max_length=262_144)
    files: dict[str, str] | None = None
    entry: str | None = Field(default=None, min_length=1, max_length=512)
    path: str = Field(default="/loops/main.elf", min_length=1, max_length=512)
    agent_id: str | None = Field(default=None, min_length=1, max_length=40,
                                 description="the agent whose path is set (person principals only)")


class TestIn(Body):
    """A scripted run (MCP ``loop.test``); the operation checks the values."""

    __test__ = False  # not a pytest class
    model_config = ConfigDict(extra="forbid")
    artifact: str = Field(default="/loops/main.elf", min_length=1, max_length=512,
                          description="a path the agent built to, or sha256:…")
    config: dict[str, Any] | None = Field(default=None, description="what the program reads from sf_config()")
    events: list[Any] | None = Field(default=None, max_length=ops.builds.MAX_TEST_EVENTS,
                                     description="[{topic, payload?}] delivered in order, ids e1, e2, …")
    host_replies: dict[str, Any] | None = Field(default=None, description="capability → replies, in order")
    engine: str = Field(default="translate", description="translate or interp")
    timeout_s: float = Field(default=ops.builds.TEST_TIMEOUT_S, description="stop the run after this many seconds")
    agent_id: str | None = Field(default=None, min_length=1, max_length=40,
                                 description="the agent whose artifact path is read (person principals only)")


@router.get(G + "/sdk", summary="The Loop SDK as this node offers it: guide (with its tools), header, limits")
async def sdk(group_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.builds.sdk(harness_of(request), principal, group_id=group_id)


@router.post(G + "/builds", summary="Compile C to a verified eBPF artifact (a failed build is a normal answer)")
async def build(group_id: str, body: BuildIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.builds.create(harness_of(request), principal, group_id=group_id, source=body.source,
                                   files=body.files, entry=body.entry, path=body.path, agent_id=body.agent_id)


@router.post(G + "/loops/test", summary="Try a built artifact against scripted events and host answers")
async def test_artifact(group_id: str, body: TestIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.builds.test(harness_of(request), principal, group_id=group_id,
                                 **body.model_dump(exclude_none=True))


@router.post(G + "/artifacts", status_code=201, summary="Upload a prebuilt ELF (application/octet-stream)",
             openapi_extra={"requestBody": {"required": True, "content": {"application/octet-stream": {
                 "schema": {"type": "string", "format": "binary", "maxLength": MAX_ELF}}}}})
async def upload(
    group_id: str, request: Request, principal: MemberPrincipal,
    path: Annotated[str, Query(min_length=1, max_length=512)] = "/loops/main.elf",
    agent_id: Annotated[str | None, Query(min_length=1, max_length=40)] = None,
) -> dict[str, Any]:
    kind = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if kind != "application/octet-stream":
        raise ApiError("json_required", "upload the ELF as Content-Type: application/octet-stream")
    agent = ops.builds.acting_agent(principal, agent_id)
    elf = await read_bounded(request, MAX_ELF, too_large=f"an artifact is at most {MAX_ELF} bytes")
    return await ops.artifacts.upload(harness_of(request), principal, group_id=group_id, elf=elf, path=path,
                                      agent_id=agent)


@router.get(G + "/artifacts/{sha256}", summary="Artifact metadata, or its bytes with ?download=1",
            responses={200: {"content": {"application/octet-stream": {}}}})
async def get_artifact(group_id: str, sha256: str, request: Request, principal: GroupPrincipal,
                       download: bool = False) -> Any:
    harness = harness_of(request)
    if not download:
        return await ops.artifacts.get(harness, principal, group_id=group_id, sha256=sha256)
    digest, elf = await ops.artifacts.download(harness, principal, group_id=group_id, sha256=sha256)
    return Response(elf, media_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{digest[:16]}.elf"'})
