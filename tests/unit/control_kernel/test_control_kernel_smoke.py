"""The first slice end to end on both stores: goal.create, acceptance.set, work.add, claim, evidence.add,
work.complete, with replay."""

from __future__ import annotations

from support.control_kernel import make_kit

from wakeful.control import ControlRefused


async def test_first_slice(store, store_clock) -> None:
    kit = await make_kit(store)
    a, b = kit.agents[0], kit.agents[1]
    item = await kit.add(title="measure", detail="run the bench")
    acc = await kit.run(kit.person, {"type": "acceptance.set", "document": {"criteria": [
        {"id": "latency", "text": "p99 under 5 ms"}]}, "bindings": {item: ["latency"]}},
        expected={"acceptance_revision": 0})
    assert acc["command_type"] == "acceptance.set"
    claim = (await kit.run(a, {"type": "claim.acquire", "item": item, "key": "sess-1"}))["claim"]
    assert claim["epoch"] == 1 and claim["holder"] == a.id
    try:
        await kit.run(b, {"type": "claim.acquire", "item": item, "key": "sess-2"})
        raise AssertionError("a second claim was granted")
    except ControlRefused as exc:
        assert exc.code == "claimed_by_other"
    rev = await kit.item_rev(item)
    try:
        await kit.run(a, {"type": "work.complete", "item": item}, expected={"item_revision": rev})
        raise AssertionError("completed without evidence")
    except ControlRefused as exc:
        assert exc.code == "acceptance_unmet" and exc.details["criteria"] == {"latency": "missing"}
    await kit.run(b, {"type": "evidence.add", "item": item, "criterion_ids": ["latency"], "kind": "test",
                      "subject": "code", "artifact_revision": "git:r1", "verdict": "pass"})
    done = await kit.run(a, {"type": "work.complete", "item": item}, op="complete-1",
                         expected={"item_revision": rev, "claim": {"epoch": 1, "key": "sess-1"}})
    again = await kit.run(a, {"type": "work.complete", "item": item}, op="complete-1",
                          expected={"item_revision": rev, "claim": {"epoch": 1, "key": "sess-1"}})
    assert again.pop("replayed") is True and again == done
    view = await kit.control.item(kit.goal_id, item)
    assert (view["status"], view["done_kind"], view["claim"]["status"]) == ("done", "completed", "released")
    commits = await kit.control.commits(kit.goal_id, limit=200)
    assert [c["seq"] for c in commits] == list(range(1, len(commits) + 1))
    assert (await kit.control.acceptance(kit.goal_id))["status"] == "accepted"
