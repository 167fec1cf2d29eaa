"""A Loop row and the rows it hangs from (group, agent, session, artifact), written straight to the store: the
store-level tests' common starting point."""

from __future__ import annotations

from typing import Any

from wakeful.harness.store import agents, artifacts, groups, loops, sessions

ELF = b"\x7fELF" + b"\x01" * 64


async def loop_row(store: Any, *, elf: bytes = ELF, config: dict[str, Any] | None = None,
                   creator: str | None = None, **kwargs: Any) -> loops.Loop:
    """A new group, agent ``bot``, session and artifact ``elf``, and a Loop of them (``creator`` defaults to the
    agent; ``kwargs`` go to ``loops.insert_loop``)."""
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        agent = await agents.create_agent(tx, group_id=group.id, name="bot")
        session = await sessions.create_session(tx, agent_id=agent.id)
        art = await artifacts.put_artifact(tx, group_id=group.id, elf=elf, origin="build", created_by="t")
        return await loops.insert_loop(
            tx, group_id=group.id, agent_id=agent.id, session_id=session.id, artifact_sha256=art.sha256,
            config=config if config is not None else {}, creator=creator or f"agent:{agent.id}", **kwargs)


async def sibling_rows(tx: Any, first: loops.Loop, n: int) -> list[loops.Loop]:
    """``first`` and ``n`` more Loops of its group, agent, session and artifact, in ``tx``."""
    return [first] + [await loops.insert_loop(
        tx, group_id=first.group_id, agent_id=first.agent_id, session_id=first.session_id,
        artifact_sha256=first.artifact_sha256, config={}, creator=first.creator) for _ in range(n)]
