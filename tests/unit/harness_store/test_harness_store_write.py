"""``Store.write`` (issue 16, event → wake latency): on SQLite the self-scoped writes of a guest — loop.state.put,
agent.notify — are units of the group commit, so they share a commit with the admissions and acks queued beside
them instead of queueing for the writer turn and committing alone; on PostgreSQL each is a transaction of its own
(parallel on the pool). In store terms: units queued and commits counted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.commit_gate import Gate
from support.ingress_harness import counting_statements, round_trips
from support.store_rows import loop_row

from wakeful.harness import selfcalls
from wakeful.harness.budget import LimitWatch
from wakeful.harness.config import Limits
from wakeful.harness.store import Store, Tx, groups, loops, sessions


async def _loop(store: Store) -> loops.Loop:
    return await loop_row(store, capabilities=[{"name": "agent.notify"}])


async def _until(check: Any) -> bool:
    for _ in range(2000):  # polling for a scheduler state (a guard against a hang, not a timing assertion)
        if check():
            return True
        await asyncio.sleep(0.005)
    return False


async def test_a_state_put_and_a_wake_share_one_commit_with_what_is_queued_on_sqlite(store: Store) -> None:
    if store.dialect != "sqlite":
        pytest.skip("PostgreSQL: each a transaction of its own")
    loop = await _loop(store)
    gate = Gate()
    store.before_commit.append(gate)

    async def held(tx: Tx) -> str:
        return (await groups.create_group(tx, name="held")).name

    first = asyncio.create_task(store.grouped(held))
    await gate.entered.wait()  # a batch holds the writer at its COMMIT
    put = asyncio.create_task(
        selfcalls.put_state(store, loop.id, loop.incarnation, {"state": {"above": True}})
    )
    wake = asyncio.create_task(
        selfcalls.notify(
            store,
            LimitWatch(),
            Limits(),
            0,
            loop.id,
            loop.incarnation,
            {"content": "cpu 95", "dedup_key": "k1"},
        )
    )
    assert await _until(lambda: store.grouping.queued == 2)  # both wait as units, not for the writer turn
    commits = store.commits
    gate.release.set()
    assert await first == "held"
    assert (await put)["status"] == "stored"
    assert (await wake).result == {"status": "queued", "message_id": sessions.wake_message_id(loop.id, "k1")}
    assert store.commits - commits == 2  # the held batch, then one commit for the state and the wake
    async with store.tx(readonly=True) as tx:
        row = await loops.get_loop(tx, loop.id)
        assert row.checkpoint == {"above": True}
        assert await sessions.message_exists(tx, sessions.wake_message_id(loop.id, "k1"))


async def test_a_wake_updates_the_loop_row_once(store: Store) -> None:
    """issue 16: the wake window and the last-notified columns are one UPDATE of the Loop row (was two), on both
    stores (on PostgreSQL inside the message's INSERT statement); a duplicate writes nothing."""
    from sqlalchemy import event

    loop = await _loop(store)
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(" ".join(statement.split()).upper())

    event.listen(store.engine.sync_engine, "before_cursor_execute", seen)
    try:
        args = {"content": "cpu 95", "dedup_key": "k1"}
        outcome = await selfcalls.notify(store, LimitWatch(), Limits(), 0, loop.id, loop.incarnation, args)
        assert outcome.result is not None and outcome.result["status"] == "queued"
        text = " ; ".join(statements)
        assert text.count("UPDATE LOOP SET") == 1 and text.count("INSERT INTO MESSAGE") == 1
        statements.clear()
        again = await selfcalls.notify(store, LimitWatch(), Limits(), 0, loop.id, loop.incarnation, args)
        assert again.result is not None and again.result["status"] == "duplicate"
        assert not [s for s in statements if "UPDATE " in s or "INSERT " in s]
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", seen)
    async with store.tx(readonly=True) as tx:
        row = await loops.get_loop(tx, loop.id)
    assert row.notify_window_count == 1 and row.notified_since_activation and row.last_notified_ms is not None


async def test_a_wake_and_a_state_put_read_their_loop_clock_and_message_in_one_statement(
        harness_runner: asyncio.Runner, store_url: str) -> None:
    """issue 16: the fenced read of the Loop row also brings the transaction's store-clock reading (a statement of
    its own on PostgreSQL) and, for a wake, whether its message exists: a wake is three statements on SQLite (the
    read, the message, the Loop row's UPDATE; was four) and two on PostgreSQL, where the message's insert and the
    Loop row's UPDATE are one statement (was five, then three); a state.put two on SQLite and one on PostgreSQL,
    an UPDATE fenced in its WHERE (was three there, then two). The store clock here is the database's own (no
    injected clock), still read once per transaction."""
    store = await Store.open(store_url)
    try:
        loop = await _loop(store)
        with counting_statements(store) as seen_sql:
            args = {"content": "cpu 95", "dedup_key": "k1"}
            outcome = await selfcalls.notify(store, LimitWatch(), Limits(), 0, loop.id, loop.incarnation, args)
            assert outcome.result is not None and outcome.result["status"] == "queued"
            assert len(_work(seen_sql)) == (2 if store.dialect == "postgresql" else 3), seen_sql
            seen_sql.clear()
            again = await selfcalls.notify(store, LimitWatch(), Limits(), 0, loop.id, loop.incarnation, args)
            assert again.result is not None and again.result["status"] == "duplicate"
            # the read alone says duplicate (PostgreSQL: after the kept wake's statement, which wrote nothing)
            assert len(_work(seen_sql)) == (2 if store.dialect == "postgresql" else 1), seen_sql
            seen_sql.clear()
            put = await selfcalls.put_state(store, loop.id, loop.incarnation, {"state": {"above": True}})
            assert put["status"] == "stored"
            assert len(_work(seen_sql)) == (1 if store.dialect == "postgresql" else 2), seen_sql
        async with store.tx(readonly=True) as tx:
            row = await loops.get_loop(tx, loop.id)
            message = await sessions.get_message(tx, sessions.wake_message_id(loop.id, "k1"))
        assert message is not None and row.last_notified_ms == message.created_ms  # one clock reading per wake
        assert row.checkpoint == {"above": True} and row.checkpoint_ms is not None
        assert row.checkpoint_ms >= message.created_ms
    finally:
        await store.close()


async def _wake_behind(store: Store, loop: loops.Loop, hold: Any) -> Any:
    """PostgreSQL: a transaction holds ``loop``'s row FOR UPDATE and runs ``hold(tx)``; a wake (dedup key ``k1``)
    starts and waits for the row lock; the holder then commits. Returns the wake's outcome."""
    import sqlalchemy as sa

    holding, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with store.tx() as tx:
            await loops.get_loop(tx, loop.id, for_update=True)
            await hold(tx)
            holding.set()
            await release.wait()

    held = asyncio.create_task(holder())
    await holding.wait()
    wake = asyncio.create_task(selfcalls.notify(store, LimitWatch(), Limits(), 0, loop.id, loop.incarnation,
                                                {"content": "cpu 95", "dedup_key": "k1"}))
    waiting = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                      "AND wait_event_type = 'Lock'")
    for _ in range(2000):  # until the wake waits for the row lock (a guard against a hang, not a timing)
        async with store.tx(readonly=True) as tx:
            if int((await tx.execute(waiting)).scalar_one()) or wake.done():
                break
        await asyncio.sleep(0.005)
    release.set()
    await held
    return await wake


async def test_a_wake_whose_message_commits_while_it_waits_for_the_loop_row_is_a_duplicate(
        harness_runner: asyncio.Runner, store_url: str) -> None:
    """PostgreSQL: the wake's one read (row lock, clock, message) takes its snapshot before it waits for the row
    lock, so it cannot see a message committed meanwhile by the lock's holder — the insert can: the wake is then a
    duplicate and counts nothing, as when the message was there before."""
    import sqlalchemy as sa

    from wakeful.harness.store import schema

    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite: one writer, no row lock to wait for")
    store = await Store.open(store_url)
    try:
        loop = await _loop(store)
        message_id = sessions.wake_message_id(loop.id, "k1")
        async def hold(tx: Tx) -> None:
            await sessions.insert_message(
                tx, session_id=loop.session_id, agent_id=loop.agent_id, group_id=loop.group_id, kind="loop",
                content="first", message_id=message_id, loop_id=loop.id, loop_name=loop.name,
                incarnation=loop.incarnation, dedup_key="k1")

        outcome = await _wake_behind(store, loop, hold)
        assert outcome.result == {"status": "duplicate", "message_id": message_id}
        async with store.tx(readonly=True) as tx:
            row = await loops.get_loop(tx, loop.id)
            count = (await tx.execute(sa.select(sa.func.count()).select_from(schema.message).where(
                schema.message.c.loop_id == loop.id))).scalar_one()
        assert row.notify_window_count == 0 and row.last_notified_ms is None and count == 1
    finally:
        await store.close()


async def test_an_ack_commits_beside_an_admission_batch_on_postgresql(store: Store) -> None:
    """issue 16: on PostgreSQL the acks are a lane of the group commit of their own (``Store.lane``): an ack is
    answered while an admission batch still waits at its COMMIT (it queued behind that batch, then committed
    alone); on SQLite, one writer, it joins the next batch as before. Nothing is answered before its commit."""
    from wakeful.harness.store import events

    loop = await _loop(store)
    async with store.tx() as tx:
        await events.insert_event(tx, loop_id=loop.id, group_id=loop.group_id, event_id="e1", topic="t",
                                  payload=1, payload_sha256="0" * 64, envelope_bytes=10, source="api")
    gate = Gate()
    store.before_commit.append(gate)

    async def admission(tx: Tx) -> str:  # the batch the ack would have queued behind
        return (await groups.create_group(tx, name="held")).name

    held = asyncio.create_task(store.grouped(admission))
    await gate.entered.wait()
    ack = asyncio.create_task(selfcalls.ack(store, loop.id, loop.incarnation, {"event_id": "e1"}))
    if store.dialect == "postgresql":
        assert await _until(ack.done)  # committed and answered while the admission batch is held
        assert ack.result() == {"status": "acked", "event_id": "e1", "duplicate": False}
        assert not held.done()
    else:
        assert await _until(lambda: store.grouping.queued == 1)
        assert not ack.done()  # one writer: behind the held batch, and never answered before its own commit
    gate.release.set()
    assert await held == "held"
    assert (await ack)["status"] == "acked"


def _work(sql: list[str]) -> list[str]:
    """The statements of ``sql`` other than the transaction's own (BEGIN, COMMIT, ROLLBACK)."""
    return [q for q in sql if not q.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK"))]


async def test_a_state_put_refused_by_its_fence_or_by_the_load_config_writes_nothing(store: Store) -> None:
    """issue 16: on PostgreSQL a state.put is one UPDATE fenced in its WHERE; a retired incarnation, a Loop that is
    not active and a checkpoint the load config cannot hold (checked after that UPDATE, which the refusal rolls
    back) are refused as before and leave the row as it was."""
    from wakeful.harness.errors import HostCallRefused

    loop = await _loop(store)
    assert (await selfcalls.put_state(store, loop.id, loop.incarnation, {"state": {"n": 1}}))["status"] == "stored"
    deep: Any = 0
    for _ in range(32):  # 32 levels: the load config nests it one deeper than the JSON limits allow
        deep = [deep]
    for incarnation, state, code in ((loop.incarnation + 1, {"n": 2}, "stale_incarnation"),
                                     (loop.incarnation, deep, "checkpoint_too_large")):
        with pytest.raises(HostCallRefused) as refused:
            await selfcalls.put_state(store, loop.id, incarnation, {"state": state})
        assert refused.value.code == code
    async with store.tx() as tx:
        await loops.update_loop(tx, loop.id, state="paused", pause_reason="manual")
    with pytest.raises(HostCallRefused) as paused:
        await selfcalls.put_state(store, loop.id, loop.incarnation, {"state": {"n": 3}})
    assert paused.value.code == "not_active"
    async with store.tx(readonly=True) as tx:
        row = await loops.get_loop(tx, loop.id)
    assert row.checkpoint == {"n": 1}


async def test_a_state_put_a_read_and_a_wake_skip_begin_and_commit_on_postgresql(
        harness_runner: asyncio.Runner, store_url: str) -> None:
    """issue 16 (event → wake on PostgreSQL): the guest's state.put of an event holds the Loop row the next event's
    admission waits for; it was BEGIN, the fenced UPDATE and COMMIT — three round trips — and is now the UPDATE alone,
    committed as it runs (``Store.single``), checked before it against the load config the row's last state.put
    returned and fenced on that config still being the row's. A read transaction (the session stream's read after
    every wake) was BEGIN, its statement and COMMIT, and is now its statement alone. A wake was four round trips
    (BEGIN, the locked read, the insert with the row's UPDATE, COMMIT) and is now two: the read, and one statement
    that commits as it runs. A state.put the kept config would refuse, or one whose Loop's config changed
    meanwhile, is decided by the transaction as before."""
    from wakeful.harness.errors import HostCallRefused

    if "postgresql" not in store_url:
        pytest.skip("SQLite: no round trips to the server")
    store = await Store.open(store_url)
    try:
        loop = await _loop(store)
        await selfcalls.put_state(store, loop.id, loop.incarnation, {"state": {"n": 0}})  # keeps the config
        commits = store.commits
        with round_trips(store) as sql:
            put = await selfcalls.put_state(store, loop.id, loop.incarnation, {"state": {"n": 1}})
        assert put["status"] == "stored"
        assert len(sql) == 1 and sql[0].lstrip().upper().startswith("WITH"), sql  # was BEGIN, UPDATE, COMMIT
        assert store.commits == commits + 1
        with round_trips(store) as sql:
            async with store.tx(readonly=True) as tx:
                row = await loops.get_loop(tx, loop.id)
        assert len(sql) == 1, sql  # was BEGIN, SELECT, COMMIT
        assert row.checkpoint == {"n": 1}  # committed: read on another session
        commits = store.commits
        with round_trips(store) as sql:
            wake = await selfcalls.notify(store, LimitWatch(), Limits(), 0, loop.id, loop.incarnation,
                                          {"content": "cpu 95", "dedup_key": "k1"})
        assert wake.result is not None and wake.result["status"] == "queued"
        assert len(sql) == 2, sql  # was BEGIN, the locked read, the insert with the UPDATE, COMMIT
        assert store.commits == commits + 1
        async with store.tx(readonly=True) as tx:
            row = await loops.get_loop(tx, loop.id)
            message = await sessions.get_message(tx, sessions.wake_message_id(loop.id, "k1"))
        assert message is not None and row.last_notified_ms == message.created_ms and row.notify_window_count == 1
        deep: Any = 0
        for _ in range(32):  # the load config nests it one deeper than the JSON limits allow
            deep = [deep]
        with pytest.raises(HostCallRefused) as refused:
            await selfcalls.put_state(store, loop.id, loop.incarnation, {"state": deep})
        assert refused.value.code == "checkpoint_too_large"
        async with store.tx() as tx:  # a new config under the kept one: the single UPDATE finds no row
            await loops.update_loop(tx, loop.id, config={"grown": "x" * 64})
        with round_trips(store) as sql:
            again = await selfcalls.put_state(store, loop.id, loop.incarnation, {"state": {"n": 2}})
        assert again["status"] == "stored" and len(sql) == 4, sql  # the UPDATE, then BEGIN, UPDATE, COMMIT
        with pytest.raises(HostCallRefused) as stale:
            await selfcalls.put_state(store, loop.id, loop.incarnation + 1, {"state": {"n": 3}})
        assert stale.value.code == "stale_incarnation"
        async with store.tx(readonly=True) as tx:
            row = await loops.get_loop(tx, loop.id)
        assert row.checkpoint == {"n": 2} and row.config == {"grown": "x" * 64}
    finally:
        await store.close()


async def test_a_wake_whose_loop_row_changes_after_its_read_is_decided_again_under_the_lock(
        harness_runner: asyncio.Runner, store_url: str) -> None:
    """issue 16, PostgreSQL: a wake is decided on an unlocked read of the Loop row and written by one statement that
    locks the row only while it still has the incarnation, state and window the decision read. A transaction that
    changes the window between the two (here: holding the row and counting two wakes) makes that statement write
    nothing; the locked transaction then decides on the row as it is — one message, the window counted once more."""
    import sqlalchemy as sa

    from wakeful.harness.store import schema

    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite: one writer, nothing between a read and its write")
    store = await Store.open(store_url)
    try:
        loop = await _loop(store)
        async def hold(tx: Tx) -> None:
            await loops.update_loop(tx, loop.id, notify_window_count=2, notify_window_start_ms=await tx.now_ms())

        outcome = await _wake_behind(store, loop, hold)
        assert outcome.result is not None and outcome.result["status"] == "queued"
        async with store.tx(readonly=True) as tx:
            row = await loops.get_loop(tx, loop.id)
            count = (await tx.execute(sa.select(sa.func.count()).select_from(schema.message).where(
                schema.message.c.loop_id == loop.id))).scalar_one()
        assert row.notify_window_count == 3 and count == 1
    finally:
        await store.close()


async def test_a_wake_after_the_first_of_an_incarnation_is_one_round_trip_on_postgresql(
        harness_runner: asyncio.Runner, store_url: str) -> None:
    """issue 16 (event → wake p50 on PostgreSQL): the first wake of an incarnation is the unlocked read and the single
    statement (two round trips); the next ones are the single statement alone, its window the one the last wake
    wrote, the clock read in it once — the message's time, the row's last_notified_ms and a rolled window's start.
    A row changed by anything else (here the window) makes it write nothing, and the read path decides as before."""
    import sqlalchemy as sa

    from wakeful.harness.store import schema

    if "postgresql" not in store_url:
        pytest.skip("SQLite: no round trips to the server")
    store = await Store.open(store_url)
    try:
        loop = await _loop(store)

        async def wake(key: str, limits: Limits | None = None) -> tuple[Any, list[str]]:
            with round_trips(store) as sql:
                outcome = await selfcalls.notify(store, LimitWatch(), limits or Limits(), 0, loop.id,
                                                 loop.incarnation, {"content": "cpu 95", "dedup_key": key})
            assert outcome.result is not None
            return outcome.result["status"], sql

        async def row_and_message(key: str) -> tuple[Any, Any]:
            async with store.tx(readonly=True) as tx:
                return (await loops.get_loop(tx, loop.id),
                        await sessions.get_message(tx, sessions.wake_message_id(loop.id, key)))

        assert (await wake("k1"))[0] == "queued"  # the read, the statement
        commits = store.commits
        status, sql = await wake("k2")
        assert status == "queued" and len(sql) == 1, sql  # was 2: the read, the statement
        assert store.commits == commits + 1
        row, message = await row_and_message("k2")
        assert message is not None and row.last_notified_ms == message.created_ms and row.notify_window_count == 2
        first, _ = await row_and_message("k1")
        assert row.notify_window_start_ms == first.notify_window_start_ms  # inside the window: counted on
        assert (await wake("k2"))[0] == "duplicate"  # written nothing: the read path says duplicate
        assert (await wake("k3"))[0] == "queued"
        async with store.tx() as tx:  # another writer changes the window under the kept one
            await tx.execute(sa.update(schema.loop).where(schema.loop.c.id == loop.id).values(notify_window_count=5))
        status, sql = await wake("k4")
        assert status == "queued" and len(sql) == 3, sql  # the statement (nothing written), the read, the statement
        row, _ = await row_and_message("k4")
        assert row.notify_window_count == 6  # counted once, on the row as it was
        async with store.tx() as tx:  # the window an hour old, kept as such: the next wake rolls it in the statement
            await tx.execute(sa.update(schema.loop).where(schema.loop.c.id == loop.id).values(
                notify_window_start_ms=row.notify_window_start_ms - 3_600_000))
        assert (await wake("k5"))[0] == "queued"  # (the read path: the row changed; kept again after it)
        status, sql = await wake("k6", Limits(notify_window_s=0))  # (a window of 0 s: every wake rolls it)
        row, message = await row_and_message("k6")
        assert status == "queued" and len(sql) == 1, sql  # rolled in the statement: a new window from its clock
        assert row.notify_window_start_ms == message.created_ms == row.last_notified_ms
        assert row.notify_window_count == 1 and row.notify_limited_since_ms is None
        full = Limits(notify_per_window=1)  # the kept window is full: the read path refuses, as judge_wake says
        refused = await selfcalls.notify(store, LimitWatch(), full, 0, loop.id, loop.incarnation,
                                         {"content": "cpu 95", "dedup_key": "k7"})
        assert refused.refusal is not None and refused.refusal.code == "rate_limited"
        row, message = await row_and_message("k7")
        assert message is None and row.notify_window_count == 2 and row.notify_limited_since_ms is not None
    finally:
        await store.close()
