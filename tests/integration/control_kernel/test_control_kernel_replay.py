"""Receipts and replay (control-plane.md §2.9, §4.1 steps 2 and 10, §10 "replay" and "ambiguity"): a replay
returns the stored receipt byte for byte and writes nothing; a commit whose reply was lost is answered by the
retry with the original receipt; a commit that failed is applied by the retry — never both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from support.control_kernel import make_kit

from wakeful.control import Control, ControlRefused
from wakeful.control import schema as S
from wakeful.control.canonical import canonical
from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.store import Store, Tx


class FlakyStore(Store):
    """The same database; the next write transaction fails ``after`` or ``before`` its commit."""

    fail: str | None = None

    @asynccontextmanager
    async def tx(self, *, readonly: bool = False) -> AsyncIterator[Tx]:
        mode = None if readonly else self.fail
        if mode is not None:
            self.fail = None
        async with super().tx(readonly=readonly) as tx:
            yield tx
            if mode == "before":
                raise StoreUnavailable("store unavailable during a transaction: injected before commit")
        if mode == "after":
            raise StoreUnavailable("store unavailable during a transaction: injected after commit")


async def _commit_count(store: Store, goal_id: str) -> int:
    async with store.tx(readonly=True) as tx:
        K = S.control_commit
        return int((await tx.execute(sa.select(sa.func.count()).select_from(K).where(K.c.goal_id == goal_id)))
                   .scalar_one())


async def test_replay_is_byte_identical_and_writes_nothing(store) -> None:
    kit = await make_kit(store)
    item = await kit.add(title="x")
    envelope: dict[str, Any] = {"operation_id": "op:claim/1", "goal_id": kit.goal_id,
                                "command": {"type": "claim.acquire", "item": item, "key": "k"}}
    first = await kit.control.submit(kit.agents[0], envelope)
    count = await _commit_count(store, kit.goal_id)
    second = await kit.control.submit(kit.agents[0], envelope)
    assert second.pop("replayed") is True
    assert canonical(second).encode() == canonical(first).encode()
    stored = await kit.control.receipt(kit.goal_id, "op:claim/1")
    assert canonical(stored) == canonical(first)
    assert await _commit_count(store, kit.goal_id) == count
    # the same id with another body, or from another actor, is a conflict
    for actor, cmd in ((kit.agents[0], {**envelope["command"], "key": "other"}), (kit.agents[1], envelope["command"])):
        with pytest.raises(ControlRefused) as refused:
            await kit.control.submit(actor, {**envelope, "command": cmd})
        assert refused.value.code == "operation_id_conflict"
    # goal.create replays per group
    create = {"operation_id": "create-1", "command": {"type": "goal.create", "title": "t", "objective": "o"}}
    g1 = await kit.control.submit(kit.person, create)
    g2 = await kit.control.submit(kit.person, create)
    assert g2.pop("replayed") is True and g2 == g1
    # a refused command leaves no trace: its operation id is still free
    bad = {"operation_id": "op-refused", "goal_id": kit.goal_id,
           "command": {"type": "work.complete", "item": item}, "expected": {"item_revision": 9}}
    with pytest.raises(ControlRefused):
        await kit.control.submit(kit.agents[0], bad)
    with pytest.raises(ControlRefused) as refused:
        await kit.control.receipt(kit.goal_id, "op-refused")
    assert refused.value.code == "not_found"
    applied = await kit.control.submit(kit.agents[0], {**bad, "expected": {"item_revision": 1}})
    assert "replayed" not in applied


async def test_ambiguous_commit_retry_returns_one_outcome(store) -> None:
    kit = await make_kit(store)
    flaky = FlakyStore(store.target, store.engine, store.clock)
    control = Control(flaky)
    item = await kit.add(title="x")
    envelope = {"operation_id": "amb-1", "goal_id": kit.goal_id,
                "command": {"type": "work.update", "item": item, "detail": "d1"}, "expected": {"item_revision": 1}}
    flaky.fail = "after"  # applied, but the reply is lost
    with pytest.raises(StoreUnavailable):
        await control.submit(kit.agents[0], envelope)
    retry = await control.submit(kit.agents[0], envelope)
    assert retry["replayed"] is True and retry["operation_id"] == "amb-1"
    assert (await kit.control.item(kit.goal_id, item))["revision"] == 2
    envelope2 = {"operation_id": "amb-2", "goal_id": kit.goal_id,
                 "command": {"type": "work.update", "item": item, "detail": "d2"}, "expected": {"item_revision": 2}}
    count = await _commit_count(store, kit.goal_id)
    flaky.fail = "before"  # rolled back: nothing applied
    with pytest.raises(StoreUnavailable):
        await control.submit(kit.agents[0], envelope2)
    assert await _commit_count(store, kit.goal_id) == count
    fresh = await control.submit(kit.agents[0], envelope2)
    assert "replayed" not in fresh and fresh["seq"] == count + 1
    assert (await kit.control.item(kit.goal_id, item))["revision"] == 3


async def test_commit_log_events_and_gapless_seq(store) -> None:
    kit = await make_kit(store)
    item = await kit.add(title="x")
    await kit.run(kit.agents[0], {"type": "work.update", "item": item, "title": "y"}, expected={"item_revision": 1})
    commits = await kit.control.commits(kit.goal_id, limit=200)
    assert [c["seq"] for c in commits] == list(range(1, len(commits) + 1))
    assert [c["receipt"]["goal_revision"] for c in commits] == [c["seq"] for c in commits]
    assert (await kit.control.goal(kit.goal_id))["revision"] == commits[-1]["seq"]
    update = commits[-1]
    assert update["command_type"] == "work.update"
    event = next(e for e in update["events"] if e["entity"] == "item")
    assert event["old"]["title"] == "x" and event["new"]["title"] == "y"
    assert set(event["new"]) == {"title", "semantic_digest"}
    page = await kit.control.commits(kit.goal_id, after_seq=2, limit=2)
    assert [c["seq"] for c in page] == [3, 4]


async def test_identity_and_shape_refusals(store) -> None:
    kit = await make_kit(store, register=False)
    a = kit.agents[0]
    item = await kit.add(title="x")
    cases: list[tuple[Any, dict[str, Any], str]] = [
        (a, {"operation_id": "o1", "goal_id": kit.goal_id, "command": {"type": "claim.acquire", "item": item,
                                                                        "key": "k"}}, "not_registered"),
        (a, {"operation_id": "o2", "goal_id": kit.goal_id, "command": {"type": "nope"}}, "invalid_command"),
        (a, {"operation_id": "bad id!", "goal_id": kit.goal_id, "command": {"type": "goal.pause"}},
         "invalid_command"),
        (kit.person, {"operation_id": "o3", "goal_id": kit.goal_id, "command": {"type": "work.add",
                                                                                 "class": "advancement",
                                                                                 "title": "t" * 201}},
         "invalid_command"),
        (kit.person, {"operation_id": "o4", "goal_id": kit.goal_id, "command": {"type": "work.add",
                                                                                 "class": "user_gate",
                                                                                 "title": "t"}},
         "invalid_command"),
        (kit.person, {"operation_id": "o5", "goal_id": "goal_0000000000000000000000000z",
                      "command": {"type": "goal.pause"}}, "not_found"),
        (kit.person, {"operation_id": "o6", "goal_id": kit.goal_id, "command": {"type": "work.add",
                                                                                 "class": "advancement",
                                                                                 "title": "t", "surprise": 1}},
         "invalid_command"),
        (kit.person, {"operation_id": "o7", "goal_id": kit.goal_id, "command": {"type": "work.add",
                                                                                 "class": "advancement",
                                                                                 "title": "t",
                                                                                 "depends_on": ["w_nothere"]}},
         "not_found"),
        (kit.person, ["not", "an", "object"], "invalid_command"),
        (kit.person, {"operation_id": "o8", "goal_id": kit.goal_id, "command": {"type": "claim.acquire",
                                                                                 "item": item, "key": "k"}},
         "forbidden"),
    ]
    for actor, envelope, code in cases:
        with pytest.raises(ControlRefused) as refused:
            await kit.control.submit(actor, envelope)
        assert refused.value.code == code, (envelope, refused.value.to_dict())
    # another group's person does not see the goal
    from wakeful.control import Actor

    stranger = Actor("person", "key_x", "grp_other")
    with pytest.raises(ControlRefused) as refused:
        await kit.control.submit(stranger, {"operation_id": "o9", "goal_id": kit.goal_id,
                                            "command": {"type": "goal.pause"}})
    assert refused.value.code == "not_found"
    # a paused goal refuses everything but goal.resume
    await kit.run(kit.person, {"type": "goal.pause"})
    with pytest.raises(ControlRefused) as refused:
        await kit.run(kit.person, {"type": "work.add", "class": "advancement", "title": "t"})
    assert refused.value.code == "goal_not_active"
    await kit.run(kit.person, {"type": "goal.resume"})
    await kit.run(a, {"type": "agent.register", "agent_id": a.id})
    await kit.run(a, {"type": "claim.acquire", "item": item, "key": "k"})


async def test_an_agent_creates_a_goal_and_is_registered(store) -> None:
    kit = await make_kit(store, register=False)
    a = kit.agents[0]
    receipt = await kit.control.submit(a, {"operation_id": "mine", "command": {
        "type": "goal.create", "title": "agent goal", "objective": "o", "claim_mode": "hard"}})
    assert receipt["seq"] == 1 and [c["entity"] for c in receipt["changed"]] == ["goal", "registration"]
    goal = await kit.control.goal(receipt["goal_id"])
    assert (goal["revision"], goal["claim_mode"], goal["created_by"]) == (1, "hard", a.id)
    assert [(r["agent_id"], r["status"]) for r in goal["agents"]] == [(a.id, "active")]
    commit = (await kit.control.commits(receipt["goal_id"]))[0]
    assert commit["events"][0]["op"] == "insert" and commit["events"][0]["new"]["title"] == "agent goal"
    assert commit["receipt"] == receipt


async def test_dependency_cycles_are_refused(store) -> None:
    kit = await make_kit(store)
    first = await kit.add(title="first")
    second = await kit.add(title="second", depends_on=[first])
    third = await kit.add(title="third", depends_on=[second])
    with pytest.raises(ControlRefused) as refused:
        await kit.run(kit.person, {"type": "work.update", "item": first, "depends_on": [third]},
                      expected={"item_revision": 1})
    assert (refused.value.code, refused.value.details["field"]) == ("invalid_command", "command.depends_on")
    with pytest.raises(ControlRefused):
        await kit.run(kit.person, {"type": "work.update", "item": first, "depends_on": [first]},
                      expected={"item_revision": 1})
    await kit.run(kit.person, {"type": "work.update", "item": third, "depends_on": [first, second]},
                  expected={"item_revision": 1})


async def test_postgresql_connection_cut_mid_command(pg_schema: str) -> None:
    """A real TCP cut between the kernel and PostgreSQL while a command's transaction is open: the command ends
    as ``unavailable``, nothing is half-applied, and the retried envelope applies exactly once."""
    from support.harness_fixtures import PgProxy

    class CutBeforeCommit(Store):
        proxy: Any = None
        armed = False

        @asynccontextmanager
        async def tx(self, *, readonly: bool = False) -> AsyncIterator[Tx]:
            async with super().tx(readonly=readonly) as tx:
                yield tx
                if self.armed and not readonly:
                    self.armed = False
                    self.proxy.cut()

    async with PgProxy() as proxy:
        plain = await Store.open(proxy.url(pg_schema))
        store = CutBeforeCommit(plain.target, plain.engine, plain.clock)
        store.proxy = proxy
        try:
            kit = await make_kit(store)
            item = await kit.add(title="x")
            envelope = {"operation_id": "cut-1", "goal_id": kit.goal_id,
                        "command": {"type": "claim.acquire", "item": item, "key": "k"}}
            store.armed = True
            with pytest.raises(StoreUnavailable) as lost:
                await kit.control.submit(kit.agents[0], envelope)
            assert lost.value.code == "unavailable"
            proxy.restore()
            view = await kit.control.item(kit.goal_id, item)
            assert view["claim"] is None  # rolled back with the connection
            receipt = await kit.control.submit(kit.agents[0], envelope)
            assert "replayed" not in receipt and receipt["claim"]["epoch"] == 1
            again = await kit.control.submit(kit.agents[0], envelope)
            assert again["replayed"] is True
            commits = await kit.control.commits(kit.goal_id, limit=200)
            assert [c["seq"] for c in commits] == list(range(1, len(commits) + 1))
        finally:
            await plain.close()
