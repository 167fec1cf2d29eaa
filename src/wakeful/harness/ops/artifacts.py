"""Artifact operations (interfaces.md §2.2 "Builds, artifacts"): an uploaded prebuilt ELF, an artifact's metadata
and its bytes.

``artifacts.upload`` takes the ELF's bytes: in process as ``elf``, over HTTP as the raw
``application/octet-stream`` body of ``POST G/artifacts`` (the route reads it bounded and calls this operation).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import ArtifactNotFound
from wakeful.harness.ops.builds import DEFAULT_PATH, acting_agent, agent_in_scope
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import require_person

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = ["MAX_ELF", "download", "get", "upload"]

MAX_ELF = 65_536
_SHA = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


@operation("artifacts.upload")
async def upload(harness: Harness, principal: Principal, *, group_id: str, elf: bytes, path: str = DEFAULT_PATH,
                 agent_id: str | None = None) -> dict[str, Any]:
    """Store a prebuilt ELF (verified as a build is) under the agent's ``path``: ``{artifact, size, path}``."""
    agent = acting_agent(principal, agent_id)
    await agent_in_scope(harness, principal, group_id, agent)
    stored = await harness.loops.upload(agent_id=agent, elf=elf, path=path, creator=principal.actor)
    return {"artifact": stored["artifact"], "size": stored["size"], "path": stored["path"]}


async def _found(harness: Harness, principal: Principal, group_id: str, sha256: str, *, with_bytes: bool) -> Any:
    from wakeful.harness.store import artifacts

    require_person(principal, group_id)
    match = _SHA.fullmatch(sha256)
    if match is None:
        raise ArtifactNotFound(f"artifact {sha256[:80]} not found")
    digest = match.group(1)
    async with harness.store.tx(readonly=True) as tx:
        found = await artifacts.get_artifact(tx, group_id, digest, with_bytes=with_bytes)
    if found is None:
        raise ArtifactNotFound(f"artifact sha256:{digest} not found")
    return found


@operation("artifacts.get")
async def get(harness: Harness, principal: Principal, *, group_id: str, sha256: str) -> dict[str, Any]:
    """An artifact's metadata (group key): ``{artifact, sha256, group_id, size, origin, toolchain, …}``."""
    found = await _found(harness, principal, group_id, sha256, with_bytes=False)
    return {"artifact": f"sha256:{found.sha256}", "sha256": found.sha256, "group_id": found.group_id,
            "size": found.size, "origin": found.origin, "toolchain": found.toolchain,
            "created_by": found.created_by, "created_ms": found.created_ms}


async def download(harness: Harness, principal: Principal, *, group_id: str, sha256: str) -> tuple[str, bytes]:
    """``(hex digest, ELF bytes)`` of an artifact (``GET G/artifacts/{sha256}?download=1``)."""
    found = await _found(harness, principal, group_id, sha256, with_bytes=True)
    return str(found.sha256), bytes(found.elf or b"")
