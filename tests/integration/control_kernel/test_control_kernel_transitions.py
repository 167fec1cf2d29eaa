"""control-plane.md §3.4 and §3.5 row by row: every (from status, command) pair of the work item table, and every
gate outcome, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from support.control_kernel import Kit, make_kit

from wakeful.control import Actor, ControlRefused

FAR = "time:4102444800000"  # 2100-01-01: never fires during the test

# (from, command) -> to ("open", "blocked", "deferred", "done:<kind>") or None = illegal_transition
TABLE: dict[tuple[str, str], str | None] = {
    ("open", "work.block"): "blocked",
    ("open", "work.defer"): "deferred",
    ("open", "work.reopen"): None,
    ("open", "work.resume"): None,
    ("open", "work.complete"): "done:completed",
    ("open", "work.supersede"): "done:superseded",
    ("open", "work.cancel"): "done:cancelled",
    ("blocked", "work.block"): None,
    ("blocked", "work.defer"): None,
    ("blocked", "work.reopen"): "open",
    ("blocked", "work.resume"): None,
    ("blocked", "work.complete"): None,
    ("blocked", "work.supersede"): "done:superseded",
    ("blocked", "work.cancel"): "done:cancelled",
    ("deferred", "work.block"): None,
    ("deferred", "work.defer"): None,
    ("deferred", "work.reopen"): "open",
    ("deferred", "work.resume"): "open",
    ("deferred", "work.complete"): None,
    ("deferred", "work.supersede"): "done:superseded",
    ("deferred", "work.cancel"): "done:cancelled",
    **{("done", c): None for c in ("work.block", "work.defer", "work.reopen", "work.resume", "work.complete",
                                   "work.supersede", "work.cancel", "work.update")},
}
BODIES: dict[str, dict[str, Any]] = {
    "work.block": {"reason": "waiting on CI"},
    "work.defer": {"resume_when": [FAR]},
    "work.reopen": {},
    "work.resume": {"condition": FAR},
    "work.complete": {},
    "work.supersede": {"replacement": {"class": "advancement", "title": "better"}},
    "work.cancel": {},
    "work.update": {"title": "renamed"},
}


async def _in_state(kit: Kit, state: str) -> str:
    item = await kit.add(title=f"in {state}")
    if state == "blocked":
        await kit.run(kit.person, {"type": "work.block", "item": item, "reason": "x"}, expected={"item_revision": 1})
    elif state == "deferred":
        await kit.run(kit.person, {"type": "work.defer", "item": item, "resume_when": [FAR]},
                      expected={"item_revision": 1})
    elif state == "done":
        await kit.run(kit.person, {"type": "work.cancel", "item": item}, expected={"item_revision": 1})
    return item


def _status(view: dict[str, Any]) -> str:
    return f"done:{view['done_kind']}" if view["status"] == "done" else str(view["status"])


async def test_work_item_transitions_row_by_row(store) -> None:
    kit = await make_kit(store, n_agents=1)
    agent, system = kit.agents[0], Actor("system", "system", kit.group_id)
    for (start, command), want in TABLE.items():
        item = await _in_state(kit, start)
        rev = await kit.item_rev(item)
        actor = system if command == "work.resume" else kit.person if command == "work.cancel" else agent
        body = {"type": command, "item": item, **BODIES[command]}
        case = f"{start} --{command}-->"
        if want is None:
            with pytest.raises(ControlRefused) as refused:
                await kit.run(actor, body, expected={"item_revision": rev})
            assert refused.value.code == "illegal_transition", case
            assert await kit.item_rev(item) == rev, case  # nothing written
        else:
            receipt = await kit.run(actor, body, expected={"item_revision": rev})
            view = await kit.control.item(kit.goal_id, item)
            assert _status(view) == want, case
            assert view["revision"] > rev, case
            assert {"entity": "item", "id": item, "revision": view["revision"], "status": view["status"]} in (
                receipt["changed"]), case


async def test_gate_resolution_rows(store) -> None:
    """§3.5: approve satisfies covered scopes and reopens targets blocked with gate:<id>; reject blocks targets;
    cancel and defer leave targets unchanged; done targets are never touched."""
    kit = await make_kit(store, n_agents=1)
    person = kit.person
    scope = "production:goal:deploy/eu"

    async def gate_over(*targets: str, gate_scope: str = "production:project:deploy") -> str:
        return await kit.add(**{"class": "user_gate", "title": "ship?", "scope": gate_scope,
                                "targets": list(targets), "question": "Deploy to EU?"})

    # approve
    t1 = await kit.add(title="deploy", required_scopes=[scope])
    t2 = await kit.add(title="blocked one", required_scopes=[scope])
    await kit.run(person, {"type": "work.block", "item": t2, "reason": "gate:pending"}, expected={"item_revision": 1})
    g = await gate_over(t1, t2)
    # make t2's block reason name the gate
    await kit.run(person, {"type": "work.reopen", "item": t2}, expected={"item_revision": 2})
    await kit.run(person, {"type": "work.block", "item": t2, "reason": f"gate:{g}"}, expected={"item_revision": 3})
    await kit.run(person, {"type": "gate.resolve", "item": g, "outcome": "approve"}, expected={"item_revision": 1})
    gv, v1, v2 = [await kit.control.item(kit.goal_id, i) for i in (g, t1, t2)]
    assert (gv["status"], gv["done_kind"], gv["outcome"]) == ("done", "resolved", "approve")
    assert v1["satisfied_scopes"] == [scope] and v1["status"] == "open"
    assert v2["status"] == "open" and v2["satisfied_scopes"] == [scope]

    # reject
    t3 = await kit.add(title="risky", required_scopes=[scope])
    g2 = await gate_over(t3)
    await kit.run(person, {"type": "gate.resolve", "item": g2, "outcome": "reject"}, expected={"item_revision": 1})
    v3 = await kit.control.item(kit.goal_id, t3)
    assert (v3["status"], v3["blocked_reason"], v3["satisfied_scopes"]) == ("blocked", f"gate_rejected:{g2}", [])

    # cancel and defer leave the target unchanged
    t4 = await kit.add(title="later", required_scopes=[scope])
    g3 = await gate_over(t4)
    await kit.run(person, {"type": "gate.resolve", "item": g3, "outcome": "defer", "resume_when": [FAR]},
                  expected={"item_revision": 1})
    assert (await kit.control.item(kit.goal_id, g3))["status"] == "deferred"
    await kit.run(person, {"type": "gate.resolve", "item": g3, "outcome": "cancel"}, expected={"item_revision": 2})
    g3v, v4 = await kit.control.item(kit.goal_id, g3), await kit.control.item(kit.goal_id, t4)
    assert (g3v["status"], g3v["done_kind"]) == ("done", "cancelled")
    assert (v4["status"], v4["revision"], v4["satisfied_scopes"]) == ("open", 1, [])

    # a late approval after the target was superseded changes nothing, and the replacement is not approved
    t5 = await kit.add(title="old plan", required_scopes=[scope])
    g4 = await gate_over(t5)
    sup = await kit.run(kit.agents[0], {"type": "work.supersede", "item": t5, "replacement": {
        "class": "advancement", "title": "new plan", "required_scopes": [scope]}}, expected={"item_revision": 1})
    replacement = next(c["id"] for c in sup["changed"] if c["id"] != t5)
    before = await kit.control.item(kit.goal_id, t5)
    await kit.run(person, {"type": "gate.resolve", "item": g4, "outcome": "approve"}, expected={"item_revision": 1})
    after = await kit.control.item(kit.goal_id, t5)
    assert after == before
    assert (await kit.control.item(kit.goal_id, replacement))["satisfied_scopes"] == []

    # a narrower gate does not cover; a resolved gate cannot be resolved again
    t6 = await kit.add(title="global", required_scopes=["production:global:*"])
    g5 = await gate_over(t6, gate_scope="production:goal:*")
    await kit.run(person, {"type": "gate.resolve", "item": g5, "outcome": "approve"}, expected={"item_revision": 1})
    assert (await kit.control.item(kit.goal_id, t6))["satisfied_scopes"] == []
    with pytest.raises(ControlRefused) as refused:
        await kit.run(person, {"type": "gate.resolve", "item": g5, "outcome": "reject"},
                      expected={"item_revision": 2})
    assert refused.value.code == "illegal_transition"
    # agents may ask, never resolve
    g6 = await gate_over(t6)
    await kit.run(kit.agents[0], {"type": "gate.ask", "item": g6})
    assert (await kit.control.item(kit.goal_id, g6))["asked_ms"] is not None
    with pytest.raises(ControlRefused) as refused:
        await kit.run(kit.agents[0], {"type": "gate.resolve", "item": g6, "outcome": "approve"},
                      expected={"item_revision": 2})
    assert refused.value.code == "forbidden"


async def test_completion_rules_each_with_its_own_code(store) -> None:
    """§3.3: dependencies, gates, unsettled effects, continuation, acceptance — and a blocker's completion reopens
    what it blocked, in the same commit."""
    kit = await make_kit(store, n_agents=1)
    a = kit.agents[0]

    async def complete(item: str, **body: Any) -> dict[str, Any]:
        return await kit.run(a, {"type": "work.complete", "item": item, **body},
                             expected={"item_revision": await kit.item_rev(item)})

    dep = await kit.add(title="first")
    later = await kit.add(title="second", depends_on=[dep])
    gated = await kit.add(title="prod", required_scopes=["production:goal:eu"])
    for item, code in ((later, "dependencies_open"), (gated, "gate_required")):
        with pytest.raises(ControlRefused) as refused:
            await complete(item)
        assert refused.value.code == code
    with pytest.raises(ControlRefused) as refused:
        await complete(dep, continuation="successor")
    assert refused.value.code == "continuation_invalid"
    with pytest.raises(ControlRefused) as refused:
        await complete(dep, continuation="no_followup", successors=[later])
    assert refused.value.code == "continuation_invalid"
    done = await complete(dep, continuation="successor", successors=[later])
    assert done["changed"][0]["status"] == "done"
    view = await kit.control.item(kit.goal_id, dep)
    assert (view["continuation"], view["successors"], view["completed_by"]) == ("successor", [later], a.id)
    await complete(later)  # its dependency is done(completed) now
    # a cancelled dependency never satisfies depends_on
    dropped = await kit.add(title="dropped")
    orphan = await kit.add(title="orphan", depends_on=[dropped])
    await kit.run(kit.person, {"type": "work.cancel", "item": dropped}, expected={"item_revision": 1})
    with pytest.raises(ControlRefused) as refused:
        await complete(orphan)
    assert (refused.value.code, refused.value.details["items"]) == ("dependencies_open", [dropped])
    # a blocker blocks the items it lists and reopens them when it completes
    x, y = await kit.add(title="x"), await kit.add(title="y")
    blocker = await kit.add(a, **{"class": "blocker", "title": "no creds", "recovery": "ask ops", "blocks": [x, y]})
    assert {(await kit.control.item(kit.goal_id, i))["blocked_reason"] for i in (x, y)} == {f"blocker:{blocker}"}
    await kit.run(kit.person, {"type": "work.reopen", "item": y}, expected={"item_revision": 2})
    await kit.run(kit.person, {"type": "work.block", "item": y, "reason": "something else"},
                  expected={"item_revision": 3})
    receipt = await complete(blocker)
    assert {c["id"] for c in receipt["changed"] if c["entity"] == "item"} == {blocker, x}
    assert (await kit.control.item(kit.goal_id, x))["status"] == "open"
    assert (await kit.control.item(kit.goal_id, y))["blocked_reason"] == "something else"  # not its block
    # a person may complete a user_action; an agent may not; a gate is never "completed"
    action = await kit.add(**{"class": "user_action", "title": "renew the cert"})
    with pytest.raises(ControlRefused) as refused:
        await complete(action)
    assert refused.value.code == "forbidden"
    await kit.run(kit.person, {"type": "work.complete", "item": action}, expected={"item_revision": 1})
    gate = await kit.add(**{"class": "user_gate", "title": "g", "scope": "production:goal:eu", "targets": [gated],
                            "question": "EU?"})
    with pytest.raises(ControlRefused) as refused:
        await kit.run(kit.person, {"type": "work.complete", "item": gate}, expected={"item_revision": 1})
    assert refused.value.code == "illegal_transition"


async def test_the_kernel_guards_done_items_for_every_handler(store) -> None:
    """§4.3 #6 is enforced once in the kernel's row writer, below every command handler."""
    from wakeful.control import rows
    from wakeful.control.kernel import Ctx

    kit = await make_kit(store, n_agents=1)
    item = await _in_state(kit, "done")
    with pytest.raises(ControlRefused) as refused:
        async with store.tx() as tx:
            goal = await rows.load_goal(tx, kit.goal_id, for_update=True)
            ctx = Ctx(tx, 0, kit.person, goal, {}, {}, 1800, 60, "work.reopen")
            row = await ctx.item(item)
            await ctx.write_item(row, status="open", done_kind=None)
    assert refused.value.code == "illegal_transition"
    assert (await kit.control.item(kit.goal_id, item))["status"] == "done"
