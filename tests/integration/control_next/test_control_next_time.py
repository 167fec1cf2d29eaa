"""``next`` against the store and the kernel, in time (injected store clock), on SQLite and PostgreSQL:
row 2 (the daily budget: stop until the next UTC day), row 3 (an intended effect past the grace needs a
readback), a peer's claim that expires (takeover), and a ``time:`` deferral resumed by the kernel's sweep.
"""

from __future__ import annotations

from typing import Any

from support.control_next_support import Ctl

from wakeful.control import Actor, Control
from wakeful.control.next import day_window


async def test_next_in_time(store: Any, store_clock: Any) -> None:
    control = Control(store)
    ctl = await Ctl.open(store, submitter=control, name="time")
    person, me = ctl.person, ctl.agent_actor
    goal = (await ctl.submit(person, {"operation_id": "g", "command": {
        "type": "goal.create", "title": "t", "objective": "o", "budget": {"units_per_day": 10}}}))["goal_id"]
    g = ctl.on(goal)
    peer = await ctl.new_agent("peer")
    for agent in (ctl.agent, peer):
        await g.cmd(person, "agent.register", agent_id=agent)
    item = await g.add(person, "advancement", "work")

    # a peer's claim: wait on its item or its expiry; after the expiry the item is mine to take over
    peer_actor = Actor("agent", peer, ctl.group_id)
    claim = (await g.cmd(peer_actor, "claim.acquire", item=item, key="peer-key", ttl_s=60))["claim"]
    waiting = await ctl.next(goal)
    assert waiting["wake_when"] == [f"work_done:{item}", f"time:{claim['expires_ms']}"]
    store_clock.advance(s=61)
    taken = await ctl.next(goal, claim=True)
    assert (taken["action"], taken["claim"]["claim"]["holder"]) == ("start", ctl.agent)
    assert taken["claim"]["claim"]["epoch"] == claim["epoch"] + 1  # a takeover fences the old holder

    # an intended effect past the grace (60 s): read it back before anything else
    await g.cmd(me, "effect.intend", request_key="pr-1", kind="github.pr.create", target="repo",
                payload_digest="d", item=item)
    assert (await ctl.next(goal))["action"] == "continue"
    store_clock.advance(s=61)
    readback = await ctl.next(goal)
    assert (readback["action"], readback["reasons"]) == ("readback_effect", ["intent_grace_passed"])
    await g.cmd(me, "effect.readback", request_key="pr-1", attempt=1, observed="present")

    # the daily budget: spent → stop until the next UTC day
    await g.cmd(me, "budget.spend", units=10, note="tokens")
    stopped = await ctl.next(goal)
    assert (stopped["decision"], stopped["reasons"]) == ("stop", ["budget_exhausted"])
    assert stopped["resume_at"] == day_window(store_clock.unix_ms())[1]
    store_clock.advance(ms=stopped["resume_at"] - store_clock.unix_ms())
    again = await ctl.next(goal, claim=True)  # a new day; my 30-minute claim expired meanwhile: claim again
    assert (again["action"], again["item"]["id"]) == ("start", item)

    # a time: deferral: waiting on the time, resumed by the kernel's sweep once it has passed
    at = store_clock.unix_ms() + 5_000
    await g.cmd(me, "work.defer", item=item, resume_when=[f"time:{at}"],
                expected={"item_revision": await g.revision(item)})
    deferred = await ctl.next(goal)
    assert (deferred["wait_kind"], deferred["wake_when"]) == ("no_new_facts", [f"time:{at}"])
    assert await control.tick() == 0
    store_clock.advance(s=6)
    assert await control.tick() == 1
    assert (await ctl.next(goal))["item"]["id"] == item
