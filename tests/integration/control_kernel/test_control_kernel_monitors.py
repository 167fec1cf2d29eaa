"""Monitor items backed by Loop rows (control-plane.md §3.2 work.add, §9 kernel side): the Loop must be in the
goal's group and owned by a registered agent; a watching monitor is not claimed; ``monitor.observe`` counts a wake
without moving the item revision and fires ``loop_wake`` resume conditions once; ``monitor.watch`` records the
Loop's state. (The bridge from real Loops is tested in tests/integration/control_next.)"""

from __future__ import annotations

from typing import Any

import pytest
from support.control_kernel import make_kit

from wakeful.control import Actor, ControlRefused
from wakeful.harness.store import agents, groups, loops, sessions


async def _loop(store: Any, group_id: str, agent_id: str, state: str = "active") -> str:
    async with store.tx() as tx:
        session = await sessions.create_session(tx, agent_id=agent_id)
        row = await loops.insert_loop(tx, group_id=group_id, agent_id=agent_id, session_id=session.id,
                                      artifact_sha256="0" * 64, config={}, creator="operator", state=state,
                                      pause_reason="user" if state == "paused" else None)
    return row.id


async def _set_state(store: Any, loop_id: str, state: str) -> None:
    async with store.tx() as tx:
        await loops.update_loop(tx, loop_id, state=state, pause_reason="user" if state == "paused" else None)


async def _refuse(coro: Any) -> ControlRefused:
    with pytest.raises(ControlRefused) as caught:
        await coro
    return caught.value


async def test_monitor_items_and_their_loops(store) -> None:
    kit = await make_kit(store, n_agents=3, register=False)
    a, b, c = kit.agents
    for agent in (a, b):
        await kit.run(agent, {"type": "agent.register", "agent_id": agent.id})
    mine = await _loop(store, kit.group_id, a.id)
    unregistered = await _loop(store, kit.group_id, c.id)
    async with store.tx() as tx:
        other_group = await groups.create_group(tx, name="other")
        stranger = await agents.create_agent(tx, group_id=other_group.id, name="s")
    foreign = await _loop(store, other_group.id, stranger.id)
    for loop_id, code in ((foreign, "loop_foreign"), (unregistered, "loop_foreign"), ("lp_nope", "loop_not_found")):
        err = await _refuse(kit.add(a, **{"class": "monitor", "title": "watch", "loop_id": loop_id}))
        assert (err.code, err.details["loop_id"]) == (code, loop_id)
    monitor = await kit.add(a, **{"class": "monitor", "title": "watch CI", "loop_id": mine, "target": "ci/main"})
    # watching: not claimed while its Loop is active
    err = await _refuse(kit.run(b, {"type": "claim.acquire", "item": monitor, "key": "k"}))
    assert (err.code, err.details["reason"]) == ("illegal_transition", "watching")
    follow = await kit.add(a, title="act on the next wake")
    await kit.run(a, {"type": "work.defer", "item": follow, "resume_when": [f"loop_wake:{mine}"]},
                  expected={"item_revision": 1})
    # wakes: only the backing Loop observes; counters move, the revision does not
    loop_actor, other_loop = Actor("loop", mine, kit.group_id), Actor("loop", unregistered, kit.group_id)
    err = await _refuse(kit.run(other_loop, {"type": "monitor.observe", "item": monitor, "message_id": "m0"}))
    assert err.code == "forbidden"
    receipt = await kit.run(loop_actor, {"type": "monitor.observe", "item": monitor, "message_id": "m1",
                                         "summary": "build red"}, op=f"wake:m1:{monitor}")
    again = await kit.run(loop_actor, {"type": "monitor.observe", "item": monitor, "message_id": "m1",
                                       "summary": "build red"}, op=f"wake:m1:{monitor}")
    assert again["replayed"] is True and again["evidence"] == receipt["evidence"]
    view = await kit.control.item(kit.goal_id, monitor)
    assert (view["observations"], view["revision"]) == (1, 1)
    assert [(e["kind"], e["verdict"], e["source"], e["recorded_by"]) for e in view["evidence"]] == [
        ("loop_wake", "observed", "loop", f"system:loop:{mine}")]
    resumed = await kit.control.item(kit.goal_id, follow)
    assert resumed["status"] == "open"
    # a structured wake records its verdict; an invalid member falls back to a plain observation
    await kit.run(kit.person, {"type": "acceptance.set", "document": {"criteria": [{"id": "green", "text": "CI"}]}},
                  expected={"acceptance_revision": 0})
    ok = {"verdict": "pass", "criterion_ids": ["green"], "subject": "code", "artifact_revision": "git:r1"}
    r2 = await kit.run(loop_actor, {"type": "monitor.observe", "item": monitor, "message_id": "m2", "evidence": ok})
    r3 = await kit.run(loop_actor, {"type": "monitor.observe", "item": monitor, "message_id": "m3",
                                    "evidence": {**ok, "criterion_ids": ["nope"]}})
    evidence = {e["id"]: e for e in await kit.control.evidence(kit.goal_id, item=monitor)}
    assert (evidence[r2["evidence"]]["verdict"], evidence[r2["evidence"]]["applicability"]) == ("pass", {"green": None})
    assert (evidence[r3["evidence"]]["verdict"], evidence[r3["evidence"]]["criterion_ids"]) == ("observed", [])
    assert (await kit.control.acceptance(kit.goal_id))["status"] == "accepted"
    # the Loop leaves active: the bridge records it and the item becomes claimable
    await _set_state(store, mine, "paused")
    system = Actor("system", "loop-state", kit.group_id)
    await kit.run(system, {"type": "monitor.watch", "item": monitor, "loop_state": "paused", "reason": "user",
                           "incarnation": 1})
    watched = await kit.control.item(kit.goal_id, monitor)
    assert watched["watch_state"] == {"state": "paused", "reason": "user", "incarnation": 1}
    assert watched["revision"] == 1
    claim = await kit.run(b, {"type": "claim.acquire", "item": monitor, "key": "k"})
    assert claim["claim"]["holder"] == b.id
    err = await _refuse(kit.run(a, {"type": "monitor.watch", "item": monitor, "loop_state": "active"}))
    assert err.code == "forbidden"  # the bridge's command is the kernel's own
