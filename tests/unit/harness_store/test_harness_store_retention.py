"""harness.md §2.6, §3, §8 retention and event rows: settled events after 24 h, idle rate buckets after an hour,
unreferenced artifacts after 30 days, messages only on request; pending order and duplicates (both backends)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from support.store_rows import loop_row

from wakeful.harness.store import artifacts, events, loops, retention, schema, sessions

ELF = b"\x7fELF" + b"\x04" * 64
HOUR_S = 3600


async def _loop(store: Any) -> loops.Loop:
    return await loop_row(store, elf=ELF, creator="operator")


async def _add(store: Any, loop: loops.Loop, event_id: str, payload: Any = None) -> bool:
    async with store.tx() as tx:
        return await events.insert_event(
            tx,
            loop_id=loop.id,
            group_id=loop.group_id,
            event_id=event_id,
            topic="t",
            payload=payload or {},
            payload_sha256="0" * 64,
            envelope_bytes=30,
            source="api",
        )


async def test_events_insert_if_absent_and_pending_order(store: Any, store_clock: Any) -> None:
    loop = await _loop(store)
    assert await _add(store, loop, "b", {"v": 1})
    assert await _add(store, loop, "a")  # same millisecond: event id breaks the tie
    store_clock.advance(ms=1)
    assert await _add(store, loop, "0")
    assert not await _add(store, loop, "b", {"v": 2})  # duplicate: the stored payload is kept
    async with store.tx(readonly=True) as tx:
        pending = await events.pending_events(tx, loop.id)
        stored = await events.get_event(tx, loop.id, "b")
        assert await events.count_pending(tx, loop.id) == 3
        assert await events.get_event(tx, loop.id, "zzz") is None
    assert [e.event_id for e in pending] == ["a", "b", "0"]
    assert stored is not None and stored.payload == {"v": 1} and stored.status == "pending"


async def test_settled_events_pruned_after_retention(store: Any, store_clock: Any) -> None:
    loop = await _loop(store)
    for event_id in ("acked", "discarded", "pending", "fresh"):
        await _add(store, loop, event_id)
    async with store.tx() as tx:
        now = await tx.now_ms()
        E = schema.loop_event
        await tx.execute(E.update().where(E.c.event_id == "acked").values(status="acked", acked_ms=now))
        await tx.execute(
            E.update().where(E.c.event_id == "discarded").values(status="discarded", discarded_ms=now)
        )
    store_clock.advance(s=24 * HOUR_S - 1)
    async with store.tx() as tx:
        assert await retention.prune_settled_events(tx) == 0  # still inside the dedup window
        now = await tx.now_ms()
        await tx.execute(E.update().where(E.c.event_id == "fresh").values(status="acked", acked_ms=now))
    store_clock.advance(s=2)
    async with store.tx() as tx:
        assert await retention.prune_settled_events(tx) == 2
        left = sorted((await tx.execute(sa.select(E.c.event_id))).scalars())
    assert left == ["fresh", "pending"]  # pending events are never pruned


async def test_rate_buckets_artifacts_and_messages(store: Any, store_clock: Any) -> None:
    loop = await _loop(store)
    async with store.tx() as tx:
        now = await tx.now_ms()
        await tx.execute(schema.rate_bucket.insert().values(key="web:x", tokens=1.0, refreshed_ms=now))
        orphan = await artifacts.put_artifact(
            tx, group_id=loop.group_id, elf=ELF + b"o", origin="upload", created_by="t"
        )
        named = await artifacts.put_artifact(
            tx, group_id=loop.group_id, elf=ELF + b"n", origin="build", created_by="t"
        )
        await artifacts.set_path(
            tx, agent_id=loop.agent_id, group_id=loop.group_id, path="/n.elf", sha256=named.sha256
        )
        await sessions.insert_message(
            tx,
            session_id=loop.session_id,
            agent_id=loop.agent_id,
            group_id=loop.group_id,
            kind="user",
            content="x",
        )
    store_clock.advance(s=HOUR_S + 1)
    async with store.tx() as tx:
        assert await retention.prune_rate_buckets(tx) == 1
        assert await retention.prune_artifacts(tx) == 0  # younger than 30 days
    store_clock.advance(s=30 * 24 * HOUR_S)
    async with store.tx() as tx:
        report = await retention.prune_all(tx)
        kept = {
            a.sha256
            for a in [
                await artifacts.get_artifact(tx, loop.group_id, s)
                for s in (orphan.sha256, named.sha256, loop.artifact_sha256)
            ]
            if a
        }
        assert await sessions.count_messages(tx, session_id=loop.session_id) == 1  # messages: only on request
        report_msgs = await retention.prune_all(tx, messages_older_than_days=30)
        assert await sessions.count_messages(tx, session_id=loop.session_id) == 0
    assert report == retention.PruneReport(events=0, rate_buckets=0, artifacts=1, messages=0)
    assert kept == {named.sha256, loop.artifact_sha256}  # a Loop's pinned digest and a named one stay
    assert report_msgs.messages == 1
