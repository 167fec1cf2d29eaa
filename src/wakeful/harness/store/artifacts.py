"""Artifacts: content-addressed ELF bytes per group, and the agent's path names for them (harness.md §2.4, §8).

Artifacts are immutable; rebuilding to the same path moves the name, Loops keep their pinned digest.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from wakeful.harness.errors import ArtifactNotFound, HarnessError, InvalidArtifact, InvalidRequest
from wakeful.harness.store import schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.each import json_list, json_rows
from wakeful.harness.store.ids import lookup_text
from wakeful.harness.store.reads import padded

__all__ = [
    "Artifact",
    "ArtifactPath",
    "check_elf",
    "check_path",
    "get_artifact",
    "get_lines",
    "list_paths",
    "put_artifact",
    "put_lines",
    "resolve_artifact",
    "resolve_artifacts",
    "resolve_path",
    "set_path",
]

MAX_ELF_BYTES = 65_536
MAX_PATH_BYTES = 512
ORIGINS = ("build", "upload")
_PATH_CHARS = re.compile(r"[A-Za-z0-9._/-]+")
_SHA_REF = re.compile(r"sha256:([0-9a-f]{64})")
AR = schema.artifact
AP = schema.artifact_path
AL = schema.artifact_lines


@dataclass(frozen=True)
class Artifact:
    group_id: str
    sha256: str
    size: int
    origin: str
    toolchain: str | None
    created_by: str
    created_ms: int
    elf: bytes | None  # None when read without the bytes


@dataclass(frozen=True)
class ArtifactPath:
    agent_id: str
    path: str
    sha256: str
    updated_ms: int


# §2.4: ≤ 65,536 bytes whatever the runtime's max_elf_bytes, starting with \x7fELF
def check_elf(elf: object) -> bytes:
    if not isinstance(elf, (bytes, bytearray)):
        raise InvalidArtifact("the artifact must be bytes")
    if len(elf) > MAX_ELF_BYTES:
        raise InvalidArtifact(f"the ELF is {len(elf)} bytes; at most {MAX_ELF_BYTES}", size=len(elf))
    if not bytes(elf[:4]) == b"\x7fELF":
        raise InvalidArtifact("the artifact does not start with \\x7fELF")
    return bytes(elf)


# §2.4: absolute, ≤ 512 bytes, [A-Za-z0-9._/-], no `..` or `//` segments
def check_path(path: object) -> str:
    ok = (
        isinstance(path, str)
        and path.startswith("/")
        and len(path.encode()) <= MAX_PATH_BYTES
        and _PATH_CHARS.fullmatch(path) is not None
        and "//" not in path
        and ".." not in path.split("/")
        and not path.endswith("/")
    )
    if not ok:
        raise InvalidRequest(
            "path must be absolute, at most 512 bytes of [A-Za-z0-9._/-], with no '..' or '//' segments",
            field="path",
        )
    assert isinstance(path, str)
    return path


def _artifact(row: Any, with_bytes: bool) -> Artifact:
    elf = bytes(row.elf) if with_bytes else None
    return Artifact(
        row.group_id, row.sha256, row.size, row.origin, row.toolchain, row.created_by, row.created_ms, elf
    )


async def put_artifact(
    tx: Tx, *, group_id: str, elf: bytes, origin: str, created_by: str, toolchain: str | None = None
) -> Artifact:
    """Store the bytes under their digest (idempotent: an existing artifact is returned unchanged)."""
    data = check_elf(elf)
    if origin not in ORIGINS:
        raise InvalidRequest(f"origin must be one of {', '.join(ORIGINS)}", field="origin")
    sha = hashlib.sha256(data).hexdigest()
    values = {
        "group_id": group_id,
        "sha256": sha,
        "elf": data,
        "size": len(data),
        "origin": origin,
        "toolchain": toolchain,
        "created_by": created_by,
        "created_ms": await tx.now_ms(),
    }
    await tx.insert_if_absent(AR, values)
    found = await get_artifact(tx, group_id, sha)
    assert found is not None
    return found


async def get_artifact(tx: Tx, group_id: str, sha256: str, *, with_bytes: bool = True) -> Artifact | None:
    if lookup_text(group_id) is None or lookup_text(sha256) is None:
        return None
    cols = [c for c in AR.c if with_bytes or c.name != "elf"]
    row = (await tx.execute(sa.select(*cols).where(AR.c.group_id == group_id, AR.c.sha256 == sha256))).first()
    return None if row is None else _artifact(row, with_bytes)


# issue 18: a build's line table (``LineTable.to_json()``) is kept beside its artifact, only for its own digest
async def put_lines(tx: Tx, *, group_id: str, sha256: str, lines: dict[str, Any]) -> bool:
    """Keep the table for the artifact (idempotent); False when it describes another ELF."""
    if lines.get("elf_sha256") != sha256:
        return False
    text = json.dumps(lines, separators=(",", ":"))
    await tx.insert_if_absent(AL, {"group_id": group_id, "sha256": sha256, "lines": text})
    return True


async def get_lines(tx: Tx, group_id: str, sha256: str) -> dict[str, Any] | None:
    """The artifact's table as stored, or None (uploaded ELFs, builds without one, a table bound elsewhere)."""
    if lookup_text(group_id) is None or lookup_text(sha256) is None:
        return None
    stmt = sa.select(AL.c.lines).where(AL.c.group_id == group_id, AL.c.sha256 == sha256)
    text = (await tx.execute(stmt)).scalar()
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) and value.get("elf_sha256") == sha256 else None


# §2.4: rebuilding to the same path moves the name
async def set_path(tx: Tx, *, agent_id: str, group_id: str, path: str, sha256: str) -> ArtifactPath:
    check_path(path)
    now = await tx.now_ms()
    moved = await tx.execute(
        AP.update().where(AP.c.agent_id == agent_id, AP.c.path == path).values(sha256=sha256, updated_ms=now)
    )
    if moved.rowcount == 0:
        await tx.execute(
            AP.insert().values(agent_id=agent_id, path=path, group_id=group_id, sha256=sha256, updated_ms=now)
        )
    return ArtifactPath(agent_id, path, sha256, now)


async def resolve_path(tx: Tx, agent_id: str, path: str) -> str | None:
    stmt = sa.select(AP.c.sha256).where(AP.c.agent_id == agent_id, AP.c.path == path)
    value = (await tx.execute(stmt)).scalar()
    return None if value is None else str(value)


async def list_paths(tx: Tx, agent_id: str) -> list[ArtifactPath]:
    rows = await tx.execute(sa.select(AP).where(AP.c.agent_id == agent_id).order_by(AP.c.path))
    return [ArtifactPath(r.agent_id, r.path, r.sha256, r.updated_ms) for r in rows]


# §8: loop.create takes `sha256:<hex>` or a path of the owning agent; the bytes must exist
_NO_ELF = [c for c in AR.c if c.name != "elf"]
_BY_PAIRS_SQLITE = sa.select(*_NO_ELF).where(sa.tuple_(AR.c.group_id, AR.c.sha256).in_(json_rows("pairs", 0, 1)))


async def resolve_artifacts(tx: Tx, refs: Sequence[tuple[str, str, str]]) -> list[Artifact | HarnessError]:
    """``resolve_artifact`` of several ``(group_id, agent_id, ref)`` without the bytes, each answer (or its
    refusal) in order: the digests in one statement (issue 16: a batch of creates' reads); a path is resolved on
    its own."""
    shas: list[str | HarnessError | None] = []
    for _, agent_id, ref in refs:
        try:
            if not isinstance(ref, str) or not ref:
                raise InvalidRequest("artifact must be 'sha256:<hex>' or a path", field="artifact")
            match = _SHA_REF.fullmatch(ref)
            shas.append(match.group(1) if match else await resolve_path(tx, agent_id, check_path(ref)))
        except HarnessError as exc:
            shas.append(exc)
    pairs = sorted({(g, sha) for (g, _, _), sha in zip(refs, shas, strict=True)
                    if isinstance(sha, str) and lookup_text(g) is not None})
    found: dict[tuple[str, str], Artifact] = {}
    if pairs:
        if tx.dialect == "postgresql":
            stmt = sa.select(*_NO_ELF).where(sa.tuple_(AR.c.group_id, AR.c.sha256).in_(padded(pairs)))
            rows = await tx.execute(stmt)
        else:  # a row value IN (VALUES …) was planned as a scan of every artifact: one JSON parameter
            rows = await tx.execute(_BY_PAIRS_SQLITE, {"pairs": json_list(pairs)})
        found = {(r.group_id, r.sha256): _artifact(r, False) for r in rows}
    out: list[Artifact | HarnessError] = []
    for (group_id, _, ref), sha in zip(refs, shas, strict=True):
        if isinstance(sha, HarnessError):
            out.append(sha)
            continue
        art = None if sha is None else found.get((group_id, sha))
        out.append(ArtifactNotFound(f"artifact {ref} not found", artifact=ref) if art is None else art)
    return out


async def resolve_artifact(tx: Tx, *, group_id: str, agent_id: str, ref: str) -> Artifact:
    if not isinstance(ref, str) or not ref:
        raise InvalidRequest("artifact must be 'sha256:<hex>' or a path", field="artifact")
    match = _SHA_REF.fullmatch(ref)
    sha = match.group(1) if match else await resolve_path(tx, agent_id, check_path(ref))
    found = None if sha is None else await get_artifact(tx, group_id, sha)
    if found is None:
        raise ArtifactNotFound(f"artifact {ref} not found", artifact=ref)
    return found
