"""harness.md §2.4, §8: content-addressed artifacts, ELF checks, path names that move (both backends)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from wakeful.harness.errors import ArtifactNotFound, InvalidArtifact, InvalidRequest
from wakeful.harness.store import agents, artifacts, groups

ELF_A = b"\x7fELF" + b"A" * 100
ELF_B = b"\x7fELF" + b"B" * 100


async def _agent(store: Any) -> agents.Agent:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        return await agents.create_agent(tx, group_id=group.id, name="bot")


async def test_put_is_content_addressed_and_idempotent(store: Any, store_clock: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        first = await artifacts.put_artifact(
            tx, group_id=agent.group_id, elf=ELF_A, origin="build", created_by="agent:x", toolchain="zig"
        )
    store_clock.advance(s=10)
    async with store.tx() as tx:
        again = await artifacts.put_artifact(
            tx, group_id=agent.group_id, elf=ELF_A, origin="upload", created_by="y"
        )
        meta = await artifacts.get_artifact(tx, agent.group_id, first.sha256, with_bytes=False)
    assert first.sha256 == hashlib.sha256(ELF_A).hexdigest() and first.size == len(ELF_A)
    assert again == first and first.elf == ELF_A  # immutable: the second put changes nothing
    assert meta is not None and meta.elf is None and meta.origin == "build"


@pytest.mark.parametrize(
    ("elf", "what"),
    [(b"MZ\x90\x00", "ELF"), (b"\x7fELF" + b"\x00" * 65_533, "65536"), ("text", "bytes")],
)
async def test_bad_elf_is_invalid_artifact(store: Any, elf: Any, what: str) -> None:
    agent = await _agent(store)
    with pytest.raises(InvalidArtifact) as info:
        async with store.tx() as tx:
            await artifacts.put_artifact(
                tx, group_id=agent.group_id, elf=elf, origin="upload", created_by="t"
            )
    assert info.value.code == "invalid_artifact" and what in info.value.message


async def test_exactly_64_kib_is_accepted(store: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        art = await artifacts.put_artifact(
            tx, group_id=agent.group_id, elf=b"\x7fELF" + b"\x00" * 65_532, origin="upload", created_by="t"
        )
    assert art.size == 65_536


@pytest.mark.parametrize(
    "path", ["loops/main.elf", "/a/../b", "/a//b", "/a b", "/" + "x" * 512, "/a/", "/é", "", 3]
)
def test_path_rules(path: Any) -> None:
    with pytest.raises(InvalidRequest):
        artifacts.check_path(path)


def test_good_paths() -> None:
    for path in ("/loops/main.elf", "/a", "/a.b/c-d_e/...x", "/" + "x" * 511):
        assert artifacts.check_path(path) == path


async def test_path_moves_and_resolution(store: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        a = await artifacts.put_artifact(
            tx, group_id=agent.group_id, elf=ELF_A, origin="build", created_by="t"
        )
        b = await artifacts.put_artifact(
            tx, group_id=agent.group_id, elf=ELF_B, origin="build", created_by="t"
        )
        await artifacts.set_path(
            tx, agent_id=agent.id, group_id=agent.group_id, path="/loops/main.elf", sha256=a.sha256
        )
        pinned = await artifacts.resolve_artifact(
            tx, group_id=agent.group_id, agent_id=agent.id, ref="/loops/main.elf"
        )
        await artifacts.set_path(
            tx, agent_id=agent.id, group_id=agent.group_id, path="/loops/main.elf", sha256=b.sha256
        )
        moved = await artifacts.resolve_artifact(
            tx, group_id=agent.group_id, agent_id=agent.id, ref="/loops/main.elf"
        )
        by_digest = await artifacts.resolve_artifact(
            tx, group_id=agent.group_id, agent_id=agent.id, ref=f"sha256:{a.sha256}"
        )
        paths = await artifacts.list_paths(tx, agent.id)
    assert pinned.sha256 == a.sha256 and moved.sha256 == b.sha256 and by_digest.elf == ELF_A
    assert [(p.path, p.sha256) for p in paths] == [("/loops/main.elf", b.sha256)]


async def test_unknown_refs_are_artifact_not_found(store: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        other = await groups.create_group(tx, name="other")
        art = await artifacts.put_artifact(tx, group_id=other.id, elf=ELF_A, origin="build", created_by="t")
    for ref in (
        f"sha256:{art.sha256}",
        "sha256:" + "0" * 64,
        "/nope.elf",
    ):  # another group's bytes do not count
        with pytest.raises(ArtifactNotFound) as info:
            async with store.tx() as tx:
                await artifacts.resolve_artifact(tx, group_id=agent.group_id, agent_id=agent.id, ref=ref)
        assert info.value.code == "artifact_not_found"
    for ref in ("", "sha256:XYZ", "relative.elf"):
        with pytest.raises(InvalidRequest):
            async with store.tx() as tx:
                await artifacts.resolve_artifact(tx, group_id=agent.group_id, agent_id=agent.id, ref=ref)
