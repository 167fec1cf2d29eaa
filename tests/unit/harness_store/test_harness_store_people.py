"""harness.md §2.2–2.3: agents (archive status), sessions and insert-if-absent messages (both backends)."""

from __future__ import annotations

from typing import Any

import pytest

from wakeful.harness.errors import AgentNotFound, InvalidRequest, NotFound, SessionInUse, SessionNotFound
from wakeful.harness.store import agents, artifacts, groups, loops, sessions
from wakeful.harness.store.sessions import lifecycle_message_id, wake_message_id

ELF = b"\x7fELF" + b"\x00" * 60


async def _agent(store: Any) -> agents.Agent:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        return await agents.create_agent(tx, group_id=group.id, name="bot", metadata={"team": "ops"})


async def test_agent_create_get_list_archive(store: Any, store_clock: Any) -> None:
    agent = await _agent(store)
    assert agent.status == "active" and agent.archived_ms is None and agent.metadata == {"team": "ops"}
    store_clock.advance(s=5)
    async with store.tx() as tx:
        archived, changed = await agents.set_status(tx, agent.id, "archived")
        again, changed_again = await agents.set_status(tx, agent.id, "archived")
    assert changed and not changed_again
    assert archived.status == "archived" and archived.archived_ms == agent.created_ms + 5000
    async with store.tx() as tx:
        back, _ = await agents.set_status(tx, agent.id, "active")
        listed = await agents.list_agents(tx, group_id=agent.group_id, status="active")
    assert back.archived_ms is None and [a.id for a in listed] == [agent.id]


async def test_agent_refusals(store: Any) -> None:
    agent = await _agent(store)
    cases: list[tuple[type[Exception], dict[str, Any]]] = [
        (NotFound, {"group_id": "grp_nope", "name": "x"}),
        (InvalidRequest, {"group_id": agent.group_id, "name": "y" * 81}),
        (InvalidRequest, {"group_id": agent.group_id, "name": "x", "metadata": [1]}),
        (InvalidRequest, {"group_id": agent.group_id, "name": "x", "metadata": {"k": "v" * 4096}}),
    ]
    for exc, kwargs in cases:
        with pytest.raises(exc):
            async with store.tx() as tx:
                await agents.create_agent(tx, **kwargs)
    with pytest.raises(AgentNotFound) as info:
        async with store.tx() as tx:
            await agents.get_agent(tx, "agt_nope")
    assert info.value.code == "agent_not_found"
    with pytest.raises(InvalidRequest):
        async with store.tx() as tx:
            await agents.set_status(tx, agent.id, "deleted")


async def test_wake_insert_is_idempotent_by_id(store: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        session = await sessions.create_session(tx, agent_id=agent.id, title="inbox")
    mid = wake_message_id("lp_x", "event-42")
    assert mid == "loop:lp_x:event-42"
    outcomes = []
    for content in ("first", "second"):
        async with store.tx() as tx:
            outcomes.append(
                await sessions.insert_message(
                    tx,
                    session_id=session.id,
                    agent_id=agent.id,
                    group_id=agent.group_id,
                    kind="loop",
                    content=content,
                    message_id=mid,
                    loop_id="lp_x",
                    loop_name="w",
                    incarnation=1,
                    dedup_key="event-42",
                )
            )
    assert [o.status for o in outcomes] == ["queued", "duplicate"]
    async with store.tx(readonly=True) as tx:
        stored = await sessions.list_messages(tx, session_id=session.id)
        assert await sessions.count_messages(tx, loop_id="lp_x") == 1
    assert [(m.id, m.content, m.role, m.kind) for m in stored] == [(mid, "first", "user", "loop")]


async def test_lifecycle_and_plain_messages(store: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        session = await sessions.create_session(tx, agent_id=agent.id)
        lid = lifecycle_message_id("lp_y", "failed", 4)
        base = {"session_id": session.id, "agent_id": agent.id, "group_id": agent.group_id}
        first = await sessions.insert_message(tx, **base, kind="lifecycle", content="failed", message_id=lid)
        plain = await sessions.insert_message(tx, **base, kind="user", content="hi")
        system = await sessions.insert_message(tx, **base, kind="system", content="note")
    assert lid == "loop:lp_y:lifecycle:failed:4" and first.status == "queued"
    assert plain.message_id.startswith("msg_") and plain.message_id != system.message_id
    async with store.tx(readonly=True) as tx:
        msg = await sessions.get_message(tx, system.message_id)
        lifecycle_only = await sessions.list_messages(tx, agent_id=agent.id, kinds=["lifecycle"])
    assert msg is not None and msg.role == "system"
    assert [m.id for m in lifecycle_only] == [lid]


async def test_message_content_rules(store: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        session = await sessions.create_session(tx, agent_id=agent.id)
    base = {"session_id": session.id, "agent_id": agent.id, "group_id": agent.group_id}
    for kind, content in (("loop", "é" * 4097), ("email", "x"), ("user", 5)):
        with pytest.raises(InvalidRequest):
            async with store.tx() as tx:
                await sessions.insert_message(tx, **base, kind=kind, content=content)
    async with store.tx() as tx:  # exactly 8192 bytes is accepted
        ok = await sessions.insert_message(tx, **base, kind="loop", content="é" * 4096)
    assert ok.status == "queued"


async def test_mark_handled_once_and_unhandled_listing(store: Any, store_clock: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        session = await sessions.create_session(tx, agent_id=agent.id)
        base = {"session_id": session.id, "agent_id": agent.id, "group_id": agent.group_id}
        a = await sessions.insert_message(tx, **base, kind="user", content="a")
        b = await sessions.insert_message(tx, **base, kind="user", content="b")
    store_clock.advance(s=1)
    async with store.tx() as tx:
        assert await sessions.mark_handled(tx, a.message_id, handled_by="handler") is True
        assert await sessions.mark_handled(tx, a.message_id, handled_by="handler") is False
        assert await sessions.mark_handled(tx, "msg_missing", handled_by="handler") is False
        pending = await sessions.list_messages(tx, agent_id=agent.id, unhandled=True)
        handled = await sessions.get_message(tx, a.message_id)
    assert [m.id for m in pending] == [b.message_id]
    assert handled is not None and handled.handled_by == "handler"
    assert handled.handled_ms == handled.created_ms + 1000


async def test_session_in_use_cannot_be_deleted(store: Any) -> None:
    agent = await _agent(store)
    async with store.tx() as tx:
        used = await sessions.create_session(tx, agent_id=agent.id, title="loops")
        free = await sessions.create_session(tx, agent_id=agent.id, title="free")
        art = await artifacts.put_artifact(
            tx, group_id=agent.group_id, elf=ELF, origin="upload", created_by="t"
        )
        await loops.insert_loop(
            tx,
            group_id=agent.group_id,
            agent_id=agent.id,
            session_id=used.id,
            artifact_sha256=art.sha256,
            config={},
            creator=f"agent:{agent.id}",
        )
    with pytest.raises(SessionInUse) as info:
        async with store.tx() as tx:
            await sessions.delete_session(tx, used.id)
    assert info.value.code == "session_in_use"
    async with store.tx() as tx:
        await sessions.delete_session(tx, free.id)
        remaining = await sessions.list_sessions(tx, agent_id=agent.id)
    assert [s.id for s in remaining] == [used.id]
    with pytest.raises(SessionNotFound):
        async with store.tx() as tx:
            await sessions.delete_session(tx, free.id)
    with pytest.raises(InvalidRequest):
        async with store.tx() as tx:
            await sessions.create_session(tx, agent_id=agent.id, title="t" * 201)


@pytest.mark.parametrize("hostile", [5, None, b"agt_x", ["x"], "x" * 5000])
async def test_hostile_ids_are_not_found_never_a_driver_error(store: Any, hostile: Any) -> None:
    from wakeful.harness.store import loops

    for lookup, exc in (
        (loops.get_loop, NotFound),
        (groups.get_group, NotFound),
        (agents.get_agent, AgentNotFound),
        (sessions.get_session, SessionNotFound),
        (groups.revoke_key, NotFound),
    ):
        with pytest.raises(exc) as info:
            async with store.tx() as tx:
                await lookup(tx, hostile)
        assert len(info.value.message) < 140
    async with store.tx() as tx:
        assert await sessions.get_message(tx, hostile) is None
        assert await sessions.mark_handled(tx, hostile, handled_by="x") is False
        assert await artifacts.get_artifact(tx, hostile, hostile) is None
