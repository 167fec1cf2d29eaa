"""Proposals accepted by authority (issue 20) on SQLite and PostgreSQL: an agent proposes an acceptance revision
or a goal change; the proposal waits on an asked gate; a person's approval applies exactly the proposed document
in the same commit, and is refused when the goal moved on or the approval names another digest."""

from __future__ import annotations

from typing import Any

import pytest
from support.control_kernel import make_kit

from wakeful.control import ControlRefused, projections

DOC = {"criteria": [{"id": "p99", "text": "p99 < 5 ms under mixed load"}]}


async def _refuse(coro: Any) -> ControlRefused:
    with pytest.raises(ControlRefused) as caught:
        await coro
    return caught.value


def _gate(receipt: dict[str, Any]) -> str:
    return str(receipt["proposal"]["gate_id"])


async def test_an_approved_acceptance_proposal_applies_in_the_approving_commit(store) -> None:
    kit = await make_kit(store)
    a = kit.agents[0]
    item = await kit.add(title="measure")
    # an agent may not set acceptance, but may propose it, based on the revision it read
    assert (await _refuse(kit.run(a, {"type": "acceptance.set", "document": DOC},
                                  expected={"acceptance_revision": 0}))).code == "forbidden"
    assert (await _refuse(kit.run(a, {"type": "acceptance.propose", "document": DOC}))).code == "invalid_command"
    err = await _refuse(kit.run(a, {"type": "acceptance.propose", "document": DOC}, expected={"acceptance_revision": 3}))
    assert (err.code, err.details["current"]) == ("revision_conflict", 0)
    proposed = await kit.run(a, {"type": "acceptance.propose", "document": DOC, "bindings": {item: ["p99"]},
                                 "note": "the person asked for mixed load"}, expected={"acceptance_revision": 0})
    gate, want = _gate(proposed), proposed["proposal"]["digest"]
    assert (await kit.control.goal(kit.goal_id))["acceptance_revision"] == 0  # nothing applied yet
    # persons see the open proposal on the status and the board; next makes the agent wait on it
    status = await projections.read(store, kit.goal_id, "status")
    (card,) = status["needs_person"]
    assert (card["id"], card["proposal"]["digest"], card["proposal"]["document"]) == (gate, want, DOC)
    assert card["proposal"]["proposed_by"] == a.ref and card["asked_ms"] is not None
    board = await projections.read(store, kit.goal_id, "board")
    assert gate in [c["id"] for c in board["columns"]["open"]["gated"]]
    waiting = await kit.control.next(a.id, kit.goal_id)
    assert waiting["item"]["id"] == item  # other work continues while the person decides
    # an agent cannot approve; an approval naming another digest is refused; then the person approves
    rev = await kit.item_rev(gate)
    resolve = {"type": "gate.resolve", "item": gate, "outcome": "approve"}
    assert (await _refuse(kit.run(a, resolve, expected={"item_revision": rev}))).code == "forbidden"
    err = await _refuse(kit.run(kit.person, {**resolve, "digest": "0" * 64}, expected={"item_revision": rev}))
    assert (err.code, err.details["reason"]) == ("proposal_stale", "digest_mismatch")
    done = await kit.run(kit.person, {**resolve, "digest": want}, expected={"item_revision": rev})
    acceptance = await kit.control.acceptance(kit.goal_id)
    assert (acceptance["revision"], [c["id"] for c in acceptance["criteria"]]) == (1, ["p99"])
    assert acceptance["bindings"][item]["criteria"] == ["p99"]
    commit = (await kit.control.commits(kit.goal_id, after_seq=done["seq"] - 1, limit=1))[0]
    assert {("acceptance", "insert"), ("item", "update")} <= {(e["entity"], e["op"]) for e in commit["events"]}


async def test_a_proposal_is_refused_once_the_goal_moved_on(store) -> None:
    kit = await make_kit(store)
    a, b = kit.agents[0], kit.agents[1]
    first = _gate(await kit.run(a, {"type": "acceptance.propose", "document": DOC}, expected={"acceptance_revision": 0}))
    other = {"criteria": [{"id": "docs", "text": "documented"}]}
    second = _gate(await kit.run(b, {"type": "acceptance.propose", "document": other},
                                 expected={"acceptance_revision": 0}))
    await kit.run(kit.person, {"type": "gate.resolve", "item": second, "outcome": "approve"},
                  expected={"item_revision": await kit.item_rev(second)})
    err = await _refuse(kit.run(kit.person, {"type": "gate.resolve", "item": first, "outcome": "approve"},
                                expected={"item_revision": await kit.item_rev(first)}))
    assert (err.code, err.details["reason"]) == ("proposal_stale", "acceptance_moved")
    assert (await kit.control.goal(kit.goal_id))["acceptance_revision"] == 1  # the refused approval wrote nothing
    # rejecting a stale proposal applies nothing and closes it
    await kit.run(kit.person, {"type": "gate.resolve", "item": first, "outcome": "reject"},
                  expected={"item_revision": await kit.item_rev(first)})
    assert (await kit.control.acceptance(kit.goal_id))["criteria"][0]["id"] == "docs"


async def test_goal_change_proposals(store) -> None:
    kit = await make_kit(store)
    a = kit.agents[0]
    assert (await _refuse(kit.run(a, {"type": "goal.update", "objective": "x"}))).code == "forbidden"
    assert (await _refuse(kit.run(a, {"type": "goal.propose", "note": "nothing"}))).code == "invalid_command"
    p1 = _gate(await kit.run(a, {"type": "goal.propose", "objective": "ship it under mixed load",
                                 "budget": {"units_per_day": 40}}))
    p2 = _gate(await kit.run(a, {"type": "goal.propose", "objective": "ship it by Friday"}))
    await kit.run(kit.person, {"type": "gate.resolve", "item": p1, "outcome": "approve"},
                  expected={"item_revision": await kit.item_rev(p1)})
    goal = await kit.control.goal(kit.goal_id)
    assert (goal["objective"], goal["budget"]) == ("ship it under mixed load", {"units_per_day": 40})
    err = await _refuse(kit.run(kit.person, {"type": "gate.resolve", "item": p2, "outcome": "approve"},
                                expected={"item_revision": await kit.item_rev(p2)}))
    assert (err.code, err.details["reason"], err.details["fields"]) == ("proposal_stale", "goal_moved", ["objective"])
    assert (await kit.control.goal(kit.goal_id))["objective"] == "ship it under mixed load"
