"""issue 16 (PostgreSQL ingest, pg-ingest): what an admission batch's reads cost the server as the store grows.

The batch's one read statement (``intake._batch_reads_pg``) sums the group's pending bytes of its active Loops
(§10.2 step 5), joining each pending event to its Loop row. With statistics taken while ``loop`` held a few rows
(autovacuum analyzes once a minute at most; a create burst outgrows it) PostgreSQL joined them through
``loop_state_updated`` — every active Loop read once per pending event of the group (at N = 1,000 in the bench's
ingest step: ~27,000 rows and 23–38 ms per batch). Written ``IS TRUE`` (``reads.likely``), the state is a filter on
the row the event's key found. Its dedup read (§10.2 step 3: the batch's (Loop, event id) pairs already stored)
was a hash join over a scan of every stored event once the batch held a few dozen pairs (2,368 rows for 30 pairs at
N = 1,000, growing with the store); each pair is now one key probe (a LATERAL subquery the planner cannot flatten)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from support.store_rows import loop_row

from wakeful.harness import intake
from wakeful.harness.store import loops, schema

E, L = schema.loop_event, schema.loop


async def _loop_rows_read(tx: Any, action: Any, table: str = "loop") -> int:
    stats = sa.text("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                    f"FROM pg_stat_xact_user_tables WHERE relname = '{table}' AND schemaname = current_schema()")
    before = (await tx.execute(stats)).scalar() or 0
    await action()
    return int((await tx.execute(stats)).scalar() or 0) - int(before)


async def test_a_batchs_backlog_read_finds_each_pending_events_loop_by_its_key_with_stale_statistics(
    store: Any,
) -> None:
    if store.dialect != "postgresql":
        pytest.skip("PostgreSQL's statistics")
    first = await loop_row(store)
    async with store.tx() as tx:  # (the bench's store: analyzed while it held a few Loops)
        await tx.execute(sa.text("ANALYZE loop"))
        await tx.execute(sa.text("ANALYZE loop_event"))
    async with store.tx() as tx:
        await loops.insert_created(tx, [loops.new_loop_values(
            loop_id=f"lp_many{n:06d}{first.group_id[-6:]}", group_id=first.group_id, agent_id=first.agent_id,
            session_id=first.session_id, name=None, artifact_sha256=first.artifact_sha256, artifact_path=None,
            config={}, capabilities=None, creator="t", now=1) for n in range(2000)])
        many = sorted(r.id for r in await loops.list_loops(tx, group_id=first.group_id, limit=2001))
        await tx.execute(sa.insert(E), [{
            "loop_id": loop_id, "event_id": "e1", "group_id": first.group_id, "topic": "t", "payload": "1",
            "payload_sha256": "0" * 64, "envelope_bytes": 10, "status": "pending", "source": "api",
            "received_ms": 1} for loop_id in many[:20]])
    async with store.tx() as tx:
        backlog: dict[str, int] = {}

        async def reads() -> None:
            await intake._batch_reads_pg(tx, [(first.id, "e2")], [first.id], [first.group_id], {},
                                         {first.id: []}, backlog, {})

        read = await _loop_rows_read(tx, reads)
    assert backlog == {first.group_id: 200}
    assert read <= 20 + 1, read  # each pending event's Loop (base: every active Loop per pending event, ~40,000)


async def test_a_batchs_dedup_read_probes_each_pair_by_its_key_however_many_events_are_stored(store: Any) -> None:
    if store.dialect != "postgresql":
        pytest.skip("PostgreSQL's plans")
    first = await loop_row(store)
    async with store.tx() as tx:
        await tx.execute(sa.insert(E), [{
            "loop_id": first.id, "event_id": f"old{n:05d}", "group_id": first.group_id, "topic": "t", "payload": "1",
            "payload_sha256": "0" * 64, "envelope_bytes": 10, "status": "acked", "source": "api",
            "received_ms": n} for n in range(3000)])
        await tx.execute(sa.text("ANALYZE loop_event"))
    pairs = [(first.id, f"new{n:02d}") for n in range(39)] + [(first.id, "old01234")]
    async with store.tx() as tx:
        known: dict[tuple[str, str], str] = {}
        last: dict[str, int] = {}

        async def reads() -> None:
            await intake._batch_reads_pg(tx, pairs, [first.id], [first.group_id], known, {first.id: []}, {}, last)

        read = await _loop_rows_read(tx, reads, "loop_event")
    assert known == {(first.id, "old01234"): "0" * 64} and last == {first.id: 2999}
    assert read <= 10, read  # the one stored pair and the newest acked event (base: a scan of all 3,000)
