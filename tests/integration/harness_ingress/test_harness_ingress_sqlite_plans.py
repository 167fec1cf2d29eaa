"""issue 16 (ingest on SQLite): the statements of an admission batch and of an ack batch find the batch's events
by an index, never by a scan of every stored event. SQLite plans a row value ``IN`` a ``VALUES`` list — what
``tuple_(loop_id, event_id).in_([...])`` rendered — as a scan of ``loop_event``, so each batch's cost grew with
the store (1.7 ms per admission batch at 6,000 stored events); the pairs are now one JSON parameter read with
``json_each`` (``store/each.py``). Checked with SQLite's own ``EXPLAIN QUERY PLAN`` of the statements as run;
and the batches' Loop-row read and ack UPDATE are statements built once (fixed texts: no cache key derived, no
list rendered per batch)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from support.commit_gate import Gate
from support.ingress_harness import counter_loop, executed_statements
from support.loops_harness import started

from wakeful.harness import intake as intake_module
from wakeful.harness import selfcalls
from wakeful.harness.config import Limits
from wakeful.harness.intake import Intake
from wakeful.harness.node import Node
from wakeful.harness.store import Store, schema

L = schema.loop


@contextmanager
def _run(store: Store) -> Iterator[list[tuple[str, Any]]]:
    """(SQL text, parameters) of every single statement the store's engine runs inside the block."""
    seen: list[tuple[str, Any]] = []

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if not executemany:
            seen.append((statement, parameters))

    event.listen(store.engine.sync_engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", before)


def _event_scans(db: Path, statements: list[tuple[str, Any]]) -> list[str]:
    """The statements whose plan scans ``loop_event`` (its table or a whole index of it)."""
    conn = sqlite3.connect(db)
    try:
        return [sql for sql, params in statements if "loop_event" in sql and any(
            str(row[3]).startswith("SCAN loop_event") for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))]
    finally:
        conn.close()


async def test_on_sqlite_admission_and_ack_batches_scan_no_stored_events(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    if not store_url.startswith("sqlite"):
        pytest.skip("SQLite's planner (PostgreSQL's batches join array parameters)")
    h = await started(store_url, store_clock, tmp_path / "data", limits=Limits(pending_events=64))
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c, name="a1")
    finally:
        await h.stop()
    store = await Store.open(store_url, clock=store_clock)  # a node that runs no Loop: only the calls below write
    intake = Intake(Node(store, h.config))
    try:
        async with store.tx(readonly=True) as tx:
            inc = int((await tx.execute(sa.select(L.c.incarnation).where(L.c.id == loop_id))).scalar_one())
        for n in range(40):  # stored events, acked: what a scan would walk
            await intake.admit(loop_id=loop_id, topic="t", payload=n, event_id=f"old{n}", source="api")
            await selfcalls.ack(store, loop_id, inc, {"event_id": f"old{n}"})
        for n in range(3):  # pending, acked in the batch below
            await intake.admit(loop_id=loop_id, topic="t", payload=n, event_id=f"p{n}", source="api")

        def admit(event_id: str) -> Any:
            return asyncio.create_task(intake.admit(loop_id=loop_id, topic="t", payload=1, event_id=event_id,
                                                    source="api"))

        def ack(event_id: str) -> Any:
            return asyncio.create_task(selfcalls.ack(store, loop_id, inc, {"event_id": event_id}))

        gate = Gate()  # the first unit held at its commit: what arrives meanwhile is one batch per kind
        store.before_commit.append(gate)
        with _run(store) as statements, executed_statements(store) as objects:
            first = admit("new0")
            await gate.entered.wait()
            admissions = [admit("new1"), admit("new2"), admit("old5")]
            acks = [ack("p0"), ack("p1"), ack("p2"), ack("old3")]
            while intake.waiting < len(admissions) or store.grouping.collecting("loop.ack") < len(acks):
                await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
            gate.release.set()
            await first
            answers = [await t for t in admissions]
            acked = [await t for t in acks]
        assert [a["duplicate"] for a in answers] == [False, False, True]
        assert [a["duplicate"] for a in acked] == [False, False, False, True]
        pairs = [p for sql, p in statements if "json_each" in sql or "VALUES (?, ?), (?, ?)" in sql]
        assert len(pairs) >= 2  # the admission batch's reads and the ack batch's UPDATE, each of many pairs
        touching = [sql for sql, _ in statements if "loop_event" in sql]
        assert len(touching) >= 4
        assert _event_scans(Path(store.engine.url.database or ""), statements) == []
        # the batches' Loop rows and their ack UPDATE: statements built once, the lists their JSON parameters
        assert sum(o is intake_module._LOCK_SQLITE for o in objects) == 2  # (the held batch's, the batch's)
        assert any(o is selfcalls._ACK_SQLITE for o in objects)
    finally:
        await store.close()
