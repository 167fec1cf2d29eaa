"""Builds and artifacts (interfaces.md §2.2): ``POST G/builds`` (the build report; a failed build is a normal
200), ``POST G/artifacts`` (a raw ELF upload) and ``GET G/artifacts/{sha256}`` (metadata or the bytes).

A person principal names the agent whose artifact path is set with ``agent_id`` (body or query); an agent
principal always uses itself.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import ConfigDict, Field

from wakeful.api.auth import GroupPrincipal, MemberPrincipal, Principal
from wakeful.api.body import read_bounded
from wakeful.api.context import harness_of
from wakeful.api.errors import ApiError
from wakeful.api.models import Body
from wakeful.api.routes_agents import agent_in_group
from wakeful.errors import BuildBusy, BuildUnavailable, BundleError
from wakeful.harness.errors import ArtifactNotFound, InvalidRequest
from wakeful.harness.store import artifacts

__all__ = ["router"]

router = APIRouter(tags=["builds and artifacts"])
G = "/v1/agent-groups/{group_id}"
MAX_ELF = 65_536
_SHA = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


class BuildIn(Body):
    model_config = ConfigDict(extra="forbid")
    source: str | None = Field(default=None, max_length=262_144)
    files: dict[str, str] | None = None
    entry: str | None = Field(default=None, min_length=1, max_length=512)
    path: str = Field(default="/loops/main.elf", min_length=1, max_length=512)
    agent_id: str | None = Field(default=None, min_length=1, max_length=40,
                                 description="the agent whose path is set (person principals only)")


def acting_agent(principal: Principal, agent_id: str | None) -> str:
    """The agent a request acts for: the agent principal's own, else the ``agent_id`` given."""
    if principal.agent_id is not None:
        if agent_id is not None and agent_id != principal.agent_id:
            raise ApiError("not_found", f"agent {agent_id[:40]} not found")
        return principal.agent_id
    if agent_id is None:
        raise InvalidRequest("a person principal must name agent_id (or send X-Wakeful-Agent)", field="agent_id")
    return agent_id


def bundle_of(body: BuildIn) -> dict[str, Any]:
    """``{source}`` → a one-file bundle ``main.c``; ``{files, entry}`` as build.md §3."""
    if body.source is not None:
        files = dict(body.files or {})
        files["main.c"] = body.source
        return {"sdk_version": 1, "entry": body.entry or "main.c", "files": files}
    if body.files is None or body.entry is None:
        raise InvalidRequest("a build is {source} or {files, entry}", field="source")
    return {"sdk_version": 1, "entry": body.entry, "files": body.files}


@router.post(G + "/builds", summary="Compile C to a verified eBPF artifact (a failed build is a normal answer)")
async def build(group_id: str, body: BuildIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    harness = harness_of(request)
    agent_id = acting_agent(principal, body.agent_id)
    async with harness.store.tx(readonly=True) as tx:
        await agent_in_group(tx, group_id, agent_id, principal)
    path = artifacts.check_path(body.path)
    builder = harness.loops.builder
    if builder is None:
        raise ApiError("compiler_unavailable", "builds are not enabled on this node")
    try:
        result = await builder.compile(bundle_of(body))
    except BundleError as exc:
        raise ApiError("invalid_bundle", exc.message, rule=getattr(exc, "rule", None),
                       path=getattr(exc, "path", None)) from None
    except BuildUnavailable as exc:
        raise ApiError("compiler_unavailable", exc.message) from None
    except BuildBusy as exc:
        raise ApiError("busy", exc.message, retry_after_s=1) from None
    if result.state != "succeeded" or result.elf is None:
        return {"state": "failed", "kind": "build_failed", "failure": result.failure, "error": result.error,
                "diagnostics": result.diagnostics, "diagnostics_truncated": result.diagnostics_truncated}
    stored = await harness.loops.upload(agent_id=agent_id, elf=result.elf, path=path, creator=principal.actor,
                                        origin="build", toolchain=result.toolchain, diagnostics=result.diagnostics,
                                        lines=result.lines)
    return {"state": "succeeded", "artifact": stored["artifact"], "path": path, "elf_bytes": len(result.elf),
            "diagnostics": result.diagnostics, "diagnostics_truncated": result.diagnostics_truncated,
            "sdk_version": 1, "toolchain": result.toolchain, "cached": result.cached,
            "report": result.report.to_json() if result.report is not None else None}


@router.post(G + "/artifacts", status_code=201, summary="Upload a prebuilt ELF (application/octet-stream)",
             openapi_extra={"requestBody": {"required": True, "content": {"application/octet-stream": {
                 "schema": {"type": "string", "format": "binary", "maxLength": MAX_ELF}}}}})
async def upload(
    group_id: str, request: Request, principal: MemberPrincipal,
    path: Annotated[str, Query(min_length=1, max_length=512)] = "/loops/main.elf",
    agent_id: Annotated[str | None, Query(min_length=1, max_length=40)] = None,
) -> dict[str, Any]:
    harness = harness_of(request)
    kind = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if kind != "application/octet-stream":
        raise ApiError("json_required", "upload the ELF as Content-Type: application/octet-stream")
    actor_agent = acting_agent(principal, agent_id)
    elf = await read_bounded(request, MAX_ELF, too_large=f"an artifact is at most {MAX_ELF} bytes")
    async with harness.store.tx(readonly=True) as tx:
        await agent_in_group(tx, group_id, actor_agent, principal)
    stored = await harness.loops.upload(agent_id=actor_agent, elf=elf, path=path,
                                        creator=principal.actor)
    return {"artifact": stored["artifact"], "size": stored["size"], "path": stored["path"]}


@router.get(G + "/artifacts/{sha256}", summary="Artifact metadata, or its bytes with ?download=1",
            responses={200: {"content": {"application/octet-stream": {}}}})
async def get_artifact(group_id: str, sha256: str, request: Request, principal: GroupPrincipal,
                       download: bool = False) -> Any:
    match = _SHA.fullmatch(sha256)
    if match is None:
        raise ArtifactNotFound(f"artifact {sha256[:80]} not found")
    digest = match.group(1)
    async with harness_of(request).store.tx(readonly=True) as tx:
        found = await artifacts.get_artifact(tx, group_id, digest, with_bytes=download)
    if found is None:
        raise ArtifactNotFound(f"artifact sha256:{digest} not found")
    if download:
        return Response(found.elf or b"", media_type="application/octet-stream",
                        headers={"Content-Disposition": f'attachment; filename="{digest[:16]}.elf"'})
    return {"artifact": f"sha256:{found.sha256}", "sha256": found.sha256, "group_id": found.group_id,
            "size": found.size, "origin": found.origin, "toolchain": found.toolchain,
            "created_by": found.created_by, "created_ms": found.created_ms}
