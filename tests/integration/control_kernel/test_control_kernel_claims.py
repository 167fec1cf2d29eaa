"""Claims (control-plane.md §2.5, §10 "claims") and expected revisions (§4.1 step 5, §10 "revisions") on SQLite
and PostgreSQL, with time driven by the store clock."""

from __future__ import annotations

import asyncio

import pytest
from support.control_kernel import make_kit

from wakeful.control import ControlRefused


async def _refused(coro) -> ControlRefused:  # type: ignore[no-untyped-def]
    with pytest.raises(ControlRefused) as caught:
        await coro
    return caught.value


async def test_takeover_after_expiry_fences_the_old_holder(store, store_clock) -> None:
    kit = await make_kit(store, claim_mode="hard")
    a, b = kit.agents[0], kit.agents[1]
    item = await kit.add(title="build")
    first = (await kit.run(a, {"type": "claim.acquire", "item": item, "key": "a-1", "ttl_s": 60}))["claim"]
    assert (first["epoch"], first["expires_ms"]) == (1, store_clock.unix_ms() + 60_000)
    err = await _refused(kit.run(b, {"type": "claim.acquire", "item": item, "key": "b-1"}))
    assert (err.code, err.details["holder"]) == ("claimed_by_other", a.id)
    store_clock.advance(s=61)
    # the expired holder's lifecycle command is refused as expired, not applied
    err = await _refused(kit.run(a, {"type": "work.complete", "item": item},
                                 expected={"item_revision": 1, "claim": {"epoch": 1, "key": "a-1"}}))
    assert err.code == "claim_expired"
    taken = (await kit.run(b, {"type": "claim.acquire", "item": item, "key": "b-1"}))["claim"]
    assert (taken["holder"], taken["epoch"]) == (b.id, 2)
    err = await _refused(kit.run(a, {"type": "work.complete", "item": item},
                                 expected={"item_revision": 1, "claim": {"epoch": 1, "key": "a-1"}}))
    assert err.code == "claim_stale" and err.details["current_epoch"] == 2
    err = await _refused(kit.run(a, {"type": "claim.renew", "item": item},
                                 expected={"claim": {"epoch": 1, "key": "a-1"}}))
    assert err.code == "claim_stale"
    await kit.run(b, {"type": "work.complete", "item": item},
                  expected={"item_revision": 1, "claim": {"epoch": 2, "key": "b-1"}})
    view = await kit.control.item(kit.goal_id, item)
    assert (view["status"], view["claim"]["status"], view["claim"]["epoch"]) == ("done", "released", 2)


async def test_hard_mode_claim_rules(store, store_clock) -> None:
    kit = await make_kit(store, claim_mode="hard")
    a, b = kit.agents[0], kit.agents[1]
    item = await kit.add(title="x")
    err = await _refused(kit.run(a, {"type": "work.block", "item": item, "reason": "r"}, expected={"item_revision": 1}))
    assert err.code == "claim_required"
    await kit.run(a, {"type": "claim.acquire", "item": item, "key": "k1"})
    # same holder, same key: the same claim; same key with another ttl: key reuse
    again = await kit.run(a, {"type": "claim.acquire", "item": item, "key": "k1"})
    assert again["claim"]["epoch"] == 1 and again["changed"] == []
    err = await _refused(kit.run(a, {"type": "claim.acquire", "item": item, "key": "k1", "ttl_s": 120}))
    assert err.code == "idempotency_key_reuse"
    # another agent presenting the holder's claim is stale; without one it needs its own
    err = await _refused(kit.run(b, {"type": "work.block", "item": item, "reason": "r"},
                                 expected={"item_revision": 1, "claim": {"epoch": 1, "key": "k1"}}))
    assert err.code == "claim_stale"
    err = await _refused(kit.run(b, {"type": "work.block", "item": item, "reason": "r"}, expected={"item_revision": 1}))
    assert err.code == "claim_required"
    # a person is not fenced by claims (persons act outside the agents' leases)
    await kit.run(kit.person, {"type": "work.update", "item": item, "detail": "more"}, expected={"item_revision": 1})
    # renew moves the expiry; transfer bumps the epoch and changes the key
    store_clock.advance(s=100)
    renewed = (await kit.run(a, {"type": "claim.renew", "item": item},
                             expected={"claim": {"epoch": 1, "key": "k1"}}))["claim"]
    assert renewed["expires_ms"] == store_clock.unix_ms() + 1_800_000
    moved = (await kit.run(a, {"type": "claim.transfer", "item": item, "to": b.id, "key": "kb"},
                           expected={"claim": {"epoch": 1, "key": "k1"}}))["claim"]
    assert (moved["holder"], moved["epoch"], moved["key"]) == (b.id, 2, "kb")
    # claim_mode cannot change while a claim is active
    err = await _refused(kit.run(kit.person, {"type": "goal.update", "claim_mode": "soft"}))
    assert err.code == "illegal_transition"
    await kit.run(kit.person, {"type": "claim.release", "item": item})
    await kit.run(kit.person, {"type": "goal.update", "claim_mode": "soft"})
    # soft mode: others may act without a claim, but a presented claim must be current
    await kit.run(a, {"type": "claim.acquire", "item": item, "key": "k2"})
    err = await _refused(kit.run(b, {"type": "work.block", "item": item, "reason": "r"},
                                 expected={"item_revision": 2, "claim": {"epoch": 2, "key": "kb"}}))
    assert err.code == "claim_stale"
    await kit.run(b, {"type": "work.block", "item": item, "reason": "r"}, expected={"item_revision": 2})


async def test_scope_limits_and_exclusion(store) -> None:
    kit = await make_kit(store)
    a, b = kit.agents[0], kit.agents[1]
    one = await kit.add(title="api", write_scopes=["src/api/**"])
    two = await kit.add(title="handler", write_scopes=["src/api/handlers.py"])
    three = await kit.add(title="docs", write_scopes=["docs/"])
    await kit.run(a, {"type": "claim.acquire", "item": one, "key": "k"})
    err = await _refused(kit.run(b, {"type": "claim.acquire", "item": two, "key": "k"}))
    assert (err.code, err.details["item"]) == ("write_scope_conflict", one)
    await kit.run(b, {"type": "claim.acquire", "item": three, "key": "k"})
    # at most five live claims per agent per goal
    extra = [await kit.add(title=f"t{i}") for i in range(5)]
    for i in extra[:4]:
        await kit.run(a, {"type": "claim.acquire", "item": i, "key": "k"})
    err = await _refused(kit.run(a, {"type": "claim.acquire", "item": extra[4], "key": "k"}))
    assert err.code == "budget_exceeded"
    # bound items are not claimed by others; excluded agents lose their claims and cannot act
    bound = await kit.add(title="mine", bound_agent=b.id)
    err = await _refused(kit.run(a, {"type": "claim.acquire", "item": bound, "key": "k"}))
    assert err.code == "forbidden"
    err = await _refused(kit.run(a, {"type": "work.update", "item": bound, "detail": "x"}, expected={"item_revision": 1}))
    assert err.code == "forbidden"
    await kit.run(b, {"type": "work.update", "item": bound, "detail": "x"}, expected={"item_revision": 1})
    await kit.run(kit.person, {"type": "agent.exclude", "agent_id": a.id})
    claims = [(await kit.control.item(kit.goal_id, i))["claim"] for i in (one, *extra[:4])]
    assert {c["status"] for c in claims} == {"released"}
    err = await _refused(kit.run(a, {"type": "claim.acquire", "item": extra[4], "key": "k"}))
    assert err.code == "excluded"
    err = await _refused(kit.run(a, {"type": "agent.register", "agent_id": a.id}))
    assert err.code == "excluded"
    # gated items are not claimed until a gate covers their scope
    gated = await kit.add(title="prod", required_scopes=["production:goal:eu"])
    err = await _refused(kit.run(b, {"type": "claim.acquire", "item": gated, "key": "k"}))
    assert (err.code, err.details["scopes"]) == ("gate_required", ["production:goal:eu"])
    dep = await kit.add(title="after", depends_on=[three])
    err = await _refused(kit.run(b, {"type": "claim.acquire", "item": dep, "key": "k2"}))
    assert err.code == "dependencies_open"


async def test_racing_updates_on_one_item_and_on_two(store) -> None:
    """§4.2: two agents racing on one item get one receipt and one revision_conflict; on two items, two."""
    kit = await make_kit(store)
    a, b = kit.agents[0], kit.agents[1]
    item = await kit.add(title="shared")
    results = await asyncio.gather(
        kit.run(a, {"type": "work.update", "item": item, "detail": "from a"}, expected={"item_revision": 1}),
        kit.run(b, {"type": "work.update", "item": item, "detail": "from b"}, expected={"item_revision": 1}),
        return_exceptions=True)
    receipts = [r for r in results if isinstance(r, dict)]
    refusals = [r for r in results if isinstance(r, ControlRefused)]
    assert len(receipts) == 1 and len(refusals) == 1, results
    assert refusals[0].code == "revision_conflict" and refusals[0].details["current"] == 2
    x, y = await kit.add(title="x"), await kit.add(title="y")
    both = await asyncio.gather(
        kit.run(a, {"type": "work.update", "item": x, "detail": "a"}, expected={"item_revision": 1}),
        kit.run(b, {"type": "work.update", "item": y, "detail": "b"}, expected={"item_revision": 1}))
    first = min(r["seq"] for r in both)
    assert sorted(r["seq"] for r in both) == [first, first + 1]  # both applied, one after the other
    err = await _refused(kit.run(a, {"type": "work.update", "item": x, "detail": "c"}))
    assert (err.code, err.details["field"]) == ("invalid_command", "expected.item_revision")
    err = await _refused(kit.run(a, {"type": "work.update", "item": x, "detail": "c"},
                                 expected={"item_revision": 2, "goal_revision": 1}))
    assert err.code == "revision_conflict" and err.details["entity"] == "goal"
