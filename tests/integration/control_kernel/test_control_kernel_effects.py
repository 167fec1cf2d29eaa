"""The effect ledger (control-plane.md §6, §10 "effects") and resume conditions (§3.4) on SQLite and
PostgreSQL, with the store clock driving intent grace and ``time:`` conditions."""

from __future__ import annotations

from typing import Any

import pytest
from support.control_kernel import Kit, make_kit

from wakeful.control import Actor, ControlRefused


async def _refuse(coro: Any) -> ControlRefused:
    with pytest.raises(ControlRefused) as caught:
        await coro
    return caught.value


def _intend(key: str = "pr-1", payload: str = "sha256:aa", item: str | None = None) -> dict[str, Any]:
    body = {"type": "effect.intend", "request_key": key, "kind": "github.pr.create", "target": "repo/x",
            "payload_digest": payload}
    if item is not None:
        body["item"] = item
    return body


async def _effect(kit: Kit, key: str = "pr-1") -> dict[str, Any]:
    return next(e for e in await kit.control.effects(kit.goal_id) if e["request_key"] == key)


async def test_effect_states(store, store_clock) -> None:
    kit = await make_kit(store, intent_grace_s=60)
    a, b = kit.agents[0], kit.agents[1]
    item = await kit.add(title="open a PR")
    first = await kit.run(a, _intend(item=item))
    assert first["effect"]["state"] == "intended" and first["effect"]["attempt"] == 1
    # the same intent again: the existing effect, no new attempt; another payload: conflict
    again = await kit.run(a, _intend(item=item))
    assert again["effect"] == first["effect"] and again["changed"] == []
    assert (await _refuse(kit.run(a, _intend(payload="sha256:bb", item=item)))).code == "request_key_conflict"
    # an unsettled effect holds its item and the goal
    err = await _refuse(kit.run(a, {"type": "work.complete", "item": item}, expected={"item_revision": 1}))
    assert err.code == "effect_unsettled"
    # crash after intend: no readback inside the grace, then allowed
    read = {"type": "effect.readback", "request_key": "pr-1", "attempt": 1, "observed": "absent"}
    assert (await _refuse(kit.run(a, read))).code == "illegal_transition"
    store_clock.advance(s=61)
    assert (await _refuse(kit.run(b, read))).code == "forbidden"  # only the intender or a person
    r = await kit.run(a, read)
    assert (r["effect"]["state"], r["effect"]["attempt"]) == ("intended", 2)  # proven absent: attempt 2
    # settle with an unknown outcome: intend now needs a readback; unreadable holds; present succeeds
    await kit.run(a, {"type": "effect.settle", "request_key": "pr-1", "attempt": 2, "state": "unknown",
                      "detail": "connection reset"})
    assert (await _refuse(kit.run(a, _intend(item=item)))).code == "readback_required"
    stale = {"type": "effect.readback", "request_key": "pr-1", "attempt": 1, "observed": "present"}
    assert (await _refuse(kit.run(a, stale))).code == "revision_conflict"
    held = await kit.run(a, {**read, "attempt": 2, "observed": "unreadable"})
    assert held["effect"]["state"] == "unknown" and (await _effect(kit))["readback"]["observed"] == "unreadable"
    done = await kit.run(a, {**read, "attempt": 2, "observed": "present", "external_ref": "pr#7"})
    assert done["effect"]["state"] == "succeeded"
    eff = await _effect(kit)
    assert eff["outcome"]["external_ref"] == "pr#7" and eff["attempt"] == 2
    assert (await _refuse(kit.run(a, _intend(item=item)))).code == "illegal_transition"  # succeeded is terminal
    await kit.run(a, {"type": "work.complete", "item": item}, expected={"item_revision": 1})


async def test_failed_effect_may_be_retried_and_settle_rules(store) -> None:
    kit = await make_kit(store)
    a = kit.agents[0]
    await kit.run(a, _intend("k2"))
    await kit.run(a, {"type": "effect.settle", "request_key": "k2", "attempt": 1, "state": "failed"})
    retry = await kit.run(a, _intend("k2"))
    assert (retry["effect"]["state"], retry["effect"]["attempt"]) == ("intended", 2)
    settle = {"type": "effect.settle", "request_key": "k2", "attempt": 2, "state": "succeeded"}
    await kit.run(kit.person, settle)
    assert (await _refuse(kit.run(a, settle))).code == "illegal_transition"
    assert (await _refuse(kit.run(a, {**settle, "request_key": "nope"}))).code == "not_found"
    await kit.run(a, _intend("k3"))
    assert (await _refuse(kit.run(kit.person, {"type": "goal.close"}))).code == "effect_unsettled"


async def test_resume_conditions_fire_once(store, store_clock) -> None:
    kit = await make_kit(store)
    a = kit.agents[0]
    first = await kit.add(title="first")
    waits = await kit.add(title="after first")
    timed = await kit.add(title="tomorrow")
    on_effect = await kit.add(title="after the PR")
    await kit.run(a, {"type": "work.defer", "item": waits, "resume_when": [f"work_done:{first}"]},
                  expected={"item_revision": 1})
    due = store_clock.unix_ms() + 3_600_000
    await kit.run(a, {"type": "work.defer", "item": timed, "resume_when": [f"time:{due}"]},
                  expected={"item_revision": 1})
    await kit.run(a, {"type": "work.defer", "item": on_effect, "resume_when": ["effect_settled:pr-9"]},
                  expected={"item_revision": 1})
    await kit.run(a, {"type": "work.complete", "item": first}, expected={"item_revision": 1})
    view = await kit.control.item(kit.goal_id, waits)
    assert view["status"] == "open"
    receipt = await kit.control.receipt(kit.goal_id, f"resume:{waits}:2")
    assert receipt["command_type"] == "work.resume"
    commits = await kit.control.commits(kit.goal_id, limit=200)
    assert sum(1 for c in commits if c["command_type"] == "work.resume") == 1
    assert (await kit.control.item(kit.goal_id, timed))["status"] == "deferred"
    assert await kit.control.tick() == 0
    store_clock.advance(s=3600)
    assert await kit.control.tick() == 1
    assert await kit.control.tick() == 0
    assert (await kit.control.item(kit.goal_id, timed))["status"] == "open"
    await kit.run(a, _intend("pr-9"))
    assert (await kit.control.item(kit.goal_id, on_effect))["status"] == "deferred"
    await kit.run(a, {"type": "effect.settle", "request_key": "pr-9", "attempt": 1, "state": "failed"})
    assert (await kit.control.item(kit.goal_id, on_effect))["status"] == "open"
    # work.resume is the kernel's: agents and persons may not issue it
    await kit.run(a, {"type": "work.defer", "item": on_effect, "resume_when": ["time:4102444800000"]},
                  expected={"item_revision": 3})
    err = await _refuse(kit.run(kit.person, {"type": "work.resume", "item": on_effect},
                                expected={"item_revision": 4}))
    assert err.code == "forbidden"
    assert str(err) == "a person may not issue work.resume"
    err = await _refuse(kit.run(a, {"type": "work.resume", "item": on_effect}, expected={"item_revision": 4}))
    assert str(err) == "an agent may not issue work.resume"  # issue 20 bug 8: not "a agent"
    system = Actor("system", "system", kit.group_id)
    await kit.run(system, {"type": "work.resume", "item": on_effect})
    assert (await kit.control.item(kit.goal_id, on_effect))["status"] == "open"


async def test_budget_spend_per_day(store, store_clock) -> None:
    kit = await make_kit(store)
    a = kit.agents[0]
    assert (await _refuse(kit.run(a, {"type": "budget.spend", "units": 1}))).code == "illegal_transition"
    await kit.run(kit.person, {"type": "goal.update", "budget": {"units_per_day": 10}})
    await kit.run(a, {"type": "budget.spend", "units": 6})
    err = await _refuse(kit.run(a, {"type": "budget.spend", "units": 5}))
    assert (err.code, err.details["spent"]) == ("budget_exceeded", 6)
    await kit.run(a, {"type": "budget.spend", "units": 4})
    assert (await kit.control.snapshot(kit.goal_id)).budget_spent_today == 10
    store_clock.advance(s=86_400)
    await kit.run(a, {"type": "budget.spend", "units": 10})


async def test_spend_is_recorded_with_the_work_it_paid_for(store) -> None:
    """Issue 20: spend naming an item waits until its work is written back; spend sent with the write-back is
    recorded in that same commit, and refused with it when over budget (the write-back then waits too)."""
    kit = await make_kit(store)
    a, b = kit.agents[0], kit.agents[1]
    await kit.run(kit.person, {"type": "goal.update", "budget": {"units_per_day": 10}})
    item = await kit.add(title="run the suite")
    err = await _refuse(kit.run(a, {"type": "budget.spend", "units": 2, "item": item}))
    assert (err.code, err.details["reason"]) == ("illegal_transition", "not_written_back")
    await kit.run(a, {"type": "evidence.add", "item": item, "kind": "test", "verdict": "observed",
                      "summary": "suite ran", "spend": {"units": 3}})
    assert (await kit.control.snapshot(kit.goal_id)).budget_spent_today == 3
    await kit.run(a, {"type": "budget.spend", "units": 2, "item": item})  # a's evidence is written back
    err = await _refuse(kit.run(b, {"type": "budget.spend", "units": 1, "item": item}))
    assert err.details["reason"] == "not_written_back"  # b wrote nothing back on it
    over = await _refuse(kit.run(a, {"type": "work.complete", "item": item, "spend": {"units": 6}},
                                 expected={"item_revision": 1}))
    assert over.code == "budget_exceeded"
    assert (await kit.control.item(kit.goal_id, item))["status"] == "open"  # nothing of the refused commit
    await kit.run(a, {"type": "work.complete", "item": item, "spend": {"units": 5}}, expected={"item_revision": 1})
    assert (await kit.control.snapshot(kit.goal_id)).budget_spent_today == 10
    err = await _refuse(kit.run(b, {"type": "budget.spend", "units": 1, "item": item}))
    assert err.code == "budget_exceeded"  # done now, so written back; but today's budget is spent


async def test_stored_state_limits_are_budget_exceeded(store, monkeypatch: pytest.MonkeyPatch) -> None:
    """§4.1 step 7, with the limits lowered so the test stays fast: items not done per goal, evidence per item,
    subjects per goal."""
    from wakeful.control import cmd_evidence, cmd_work

    monkeypatch.setattr(cmd_work, "MAX_OPEN_ITEMS", 3)
    monkeypatch.setattr(cmd_evidence, "MAX_EVIDENCE_PER_ITEM", 2)
    kit = await make_kit(store)
    items = [await kit.add(title=f"i{n}") for n in range(2)]  # the kit's goal has none yet
    third = await kit.add(title="i2")
    assert (await _refuse(kit.add(title="i3"))).code == "budget_exceeded"
    await kit.run(kit.person, {"type": "work.cancel", "item": third}, expected={"item_revision": 1})
    await kit.add(title="i3")  # done items do not count
    obs = {"type": "evidence.add", "item": items[0], "kind": "observation", "verdict": "observed"}
    await kit.run(kit.agents[0], obs)
    await kit.run(kit.agents[0], obs)
    assert (await _refuse(kit.run(kit.agents[0], obs))).code == "budget_exceeded"
    for n in range(15):
        await kit.run(kit.person, {"type": "subject.set", "name": f"s{n}", "revision": "v1"})
    assert (await _refuse(kit.run(kit.person, {"type": "subject.set", "name": "one-more", "revision": "v"}))
            ).code == "budget_exceeded"
    await kit.run(kit.person, {"type": "subject.set", "name": "s0", "revision": "v2"})  # existing names change
    # an agent of another group is not found; a person registers an agent of the group
    other = await kit.control.submit(kit.person, {"operation_id": "other-goal", "command": {
        "type": "goal.create", "title": "t", "objective": "o"}})
    assert (await _refuse(kit.run(kit.person, {"type": "agent.register", "agent_id": "agt_nobody"},
                                  goal_id=other["goal_id"]))).code == "not_found"
    await kit.run(kit.person, {"type": "agent.register", "agent_id": kit.agents[2].id}, goal_id=other["goal_id"])


async def test_settle_takes_the_spec_outcome_member(store) -> None:
    """control-plane.md §6 writes ``effect.settle {attempt, outcome}`` (issue 20 bug 6); ``state`` stays an alias."""
    kit = await make_kit(store)
    a = kit.agents[0]
    await kit.run(a, _intend("k4"))
    done = await kit.run(a, {"type": "effect.settle", "request_key": "k4", "attempt": 1, "outcome": "failed"})
    assert done["effect"]["state"] == "failed"
    await kit.run(a, _intend("k4"))
    both = {"type": "effect.settle", "request_key": "k4", "attempt": 2, "outcome": "failed", "state": "succeeded"}
    err = await _refuse(kit.run(a, both))
    assert (err.code, err.details["field"]) == ("invalid_command", "command.outcome")
    err = await _refuse(kit.run(a, {"type": "effect.settle", "request_key": "k4", "attempt": 2}))
    assert (err.code, err.details["field"]) == ("invalid_command", "command.outcome")
    assert (await kit.run(a, {**both, "outcome": "succeeded"}))["effect"]["state"] == "succeeded"


async def test_a_person_reads_back_an_effect_of_a_paused_goal(store) -> None:
    """The GPU job that turns out to exist is recorded while the goal is paused (issue 20 bug 7); agents still
    stop at a paused goal."""
    kit = await make_kit(store)
    a = kit.agents[0]
    await kit.run(a, _intend("gpu-1"))
    await kit.run(a, {"type": "effect.settle", "request_key": "gpu-1", "attempt": 1, "outcome": "unknown"})
    await kit.run(kit.person, {"type": "goal.pause"})
    read = {"type": "effect.readback", "request_key": "gpu-1", "attempt": 1, "observed": "present"}
    assert (await _refuse(kit.run(a, read))).code == "goal_not_active"
    assert (await kit.run(kit.person, read))["effect"]["state"] == "succeeded"
    assert (await kit.control.goal(kit.goal_id))["status"] == "paused"


async def test_effect_watch_rules(store) -> None:
    """effect.watch names a Loop of the goal's group owned by a registered agent; only that Loop reads back."""
    from wakeful.harness.store import loops, sessions

    kit = await make_kit(store)
    a = kit.agents[0]
    async with store.tx() as tx:
        session = await sessions.create_session(tx, agent_id=a.id)
        rows = [await loops.insert_loop(tx, group_id=kit.group_id, agent_id=a.id, session_id=session.id,
                                        artifact_sha256="0" * 64, config={}, creator="operator", state="active")
                for _ in range(2)]
    watcher, other = rows[0].id, rows[1].id
    await kit.run(a, _intend("job"))
    await kit.run(a, {"type": "effect.settle", "request_key": "job", "attempt": 1, "outcome": "unknown"})
    watch = {"type": "effect.watch", "request_key": "job", "loop_id": watcher}
    assert (await _refuse(kit.run(a, {**watch, "loop_id": "lp_nope"}))).code == "loop_not_found"
    assert (await _refuse(kit.run(a, {**watch, "request_key": "nope"}))).code == "not_found"
    await kit.run(a, watch)
    read = {"type": "effect.readback", "request_key": "job", "attempt": 1, "observed": "present"}
    assert (await _refuse(kit.run(Actor("loop", other, kit.group_id), read))).code == "forbidden"
    assert (await kit.run(Actor("loop", watcher, kit.group_id), read))["effect"]["state"] == "succeeded"
    assert (await _refuse(kit.run(a, watch))).code == "illegal_transition"  # settled: nothing to watch
