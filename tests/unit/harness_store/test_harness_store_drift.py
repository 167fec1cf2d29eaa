"""harness.md §19.3 reconcile, issue 16: the store compares a node's residents with the Loop rows (``drift``) and
answers only what differs — a resident whose row is gone, not active, at another incarnation or with another
object, and an active Loop that is not resident (of the held agents, when given) — on both backends."""

from __future__ import annotations

from typing import Any

from support.store_rows import loop_row

from wakeful.harness.store import agents, drift, loops, sessions


async def _more(store: Any, first: loops.Loop, agent_id: str | None = None) -> loops.Loop:
    """Another active Loop beside ``first`` (of ``agent_id`` when given: a new session of it)."""
    async with store.tx() as tx:
        session_id = first.session_id
        if agent_id is not None:
            session_id = (await sessions.create_session(tx, agent_id=agent_id)).id
        return await loops.insert_loop(
            tx, group_id=first.group_id, agent_id=agent_id or first.agent_id, session_id=session_id,
            artifact_sha256=first.artifact_sha256, config={}, creator="t")


async def _attached(store: Any, loop: loops.Loop, object_id: str) -> tuple[str, int, str]:
    """Run ``loop`` at a new incarnation with ``object_id`` attached, as a node's load does; its resident triple."""
    async with store.tx() as tx:
        incarnation = await loops.begin_incarnation(tx, loop.id, node_id="n1")
        assert incarnation is not None
        assert await loops.attach_object(tx, loop.id, incarnation, object_id)
    return loop.id, incarnation, object_id


async def _drift(store: Any, residents: list[tuple[str, int, str]], agents_: list[str] | None) -> dict[str, Any]:
    async with store.tx(readonly=True) as tx:
        return {d.loop_id: d for d in await drift.drift(tx, residents, agents_)}


async def test_matching_residents_answer_nothing(store: Any) -> None:
    first = await loop_row(store)
    residents = [await _attached(store, first, "obj_a")]
    for k in range(3):
        residents.append(await _attached(store, await _more(store, first), f"obj_{k}"))
    assert await _drift(store, residents, None) == {}
    assert await _drift(store, residents, [first.agent_id]) == {}
    assert await _drift(store, [], []) == {}


async def test_each_kind_of_difference_is_answered_with_the_row_as_it_is(store: Any) -> None:
    first = await loop_row(store)
    same = await _attached(store, first, "obj_same")
    gone = await _attached(store, await _more(store, first), "obj_gone")
    paused = await _attached(store, await _more(store, first), "obj_paused")
    moved = await _attached(store, await _more(store, first), "obj_moved")
    retired = await _attached(store, await _more(store, first), "obj_retired")
    not_resident = await _more(store, first)
    async with store.tx() as tx:
        assert await loops.delete_loop(tx, gone[0])
        assert await loops.update_loop(tx, paused[0], state="paused", pause_reason="manual")
        assert await loops.begin_incarnation(tx, moved[0], node_id="n2") == moved[1] + 1  # adopted elsewhere
        assert await loops.update_loop(tx, retired[0], object_id=None)  # §4.2 row 14: a retry retired it
    found = await _drift(store, [same, gone, paused, moved, retired], None)
    assert set(found) == {gone[0], paused[0], moved[0], retired[0], not_resident.id}
    assert found[gone[0]].state is None
    assert (found[paused[0]].state, found[paused[0]].incarnation) == ("paused", paused[1])
    assert (found[moved[0]].state, found[moved[0]].incarnation, found[moved[0]].object_id) == (
        "active", moved[1] + 1, None)
    assert (found[retired[0]].incarnation, found[retired[0]].object_id) == (retired[1], None)
    assert (found[not_resident.id].state, found[not_resident.id].agent_id) == ("active", first.agent_id)


async def test_active_loops_not_resident_only_of_the_agents_given(store: Any) -> None:
    first = await loop_row(store)
    async with store.tx() as tx:
        other = (await agents.create_agent(tx, group_id=first.group_id, name="other")).id
    theirs = await _more(store, first, agent_id=other)
    assert set(await _drift(store, [], None)) == {first.id, theirs.id}
    assert set(await _drift(store, [], [first.agent_id])) == {first.id}
    assert set(await _drift(store, [], [other])) == {theirs.id}
    assert await _drift(store, [], []) == {}  # a cluster node holding no agent owns no Loop
