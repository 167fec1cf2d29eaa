"""Helpers for event-intake tests (issue 6): the ``ingress_counter.c`` Loop, what it has seen (its checkpoint),
event rows, and a statement counter to prove a refusal never touched the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from wakeful.harness.embed import Harness
from wakeful.harness.store import loops, schema
from wakeful.harness.store.core import Store

COUNTER_C = (Path(__file__).parent / "guests" / "ingress_counter.c").read_text()


async def counter_loop(h: Harness, compile_c: Callable[..., bytes], *, name: str = "a1") -> tuple[str, str, str, str]:
    """A fresh tenant with the counter Loop created and resident: (group_id, agent_id, session_id, loop_id)."""
    group = await h.create_group(f"g-{name}")
    agent = await h.create_agent(group.id, name)
    session = await h.create_session(agent.id, "inbox")
    elf = compile_c(COUNTER_C, name="ingress_counter.c")
    art = (await h.upload(agent.id, elf, path="/loops/counter.elf"))["artifact"]
    loop = await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art)
    return group.id, agent.id, session.id, str(loop["id"])


async def seen(h: Harness, loop_id: str) -> list[str]:
    """Event ids the guest popped, in order, across incarnations (from its checkpoint)."""
    async with h.store.tx(readonly=True) as tx:
        row = await loops.get_loop(tx, loop_id)
    state = row.checkpoint or {}
    return list(state.get("seen", []))


async def event_rows(h: Harness | Store, loop_id: str | None = None) -> list[Any]:
    store = h.store if isinstance(h, Harness) else h
    E = schema.loop_event
    stmt = sa.select(E).order_by(E.c.received_ms, E.c.event_id)
    if loop_id is not None:
        stmt = stmt.where(E.c.loop_id == loop_id)
    async with store.tx(readonly=True) as tx:
        return list(await tx.execute(stmt))


async def statuses(h: Harness, loop_id: str) -> dict[str, str]:
    return {r.event_id: r.status for r in await event_rows(h, loop_id)}


def counting_statements(store: Store) -> AbstractContextManager[list[str]]:
    """Every SQL statement the store's engine runs inside the block (to prove "no database access")."""
    return _recording(store, "before_cursor_execute", 2)


@contextmanager
def round_trips(store: Store) -> Iterator[list[str]]:
    """Every message round trip of the store's PostgreSQL sessions inside the block: the statements SQLAlchemy sends
    (``before_cursor_execute``) and the ones the asyncpg adapter sends itself (BEGIN, COMMIT, ROLLBACK: asyncpg's
    query logger sees its simple queries)."""
    seen_sql: list[str] = []
    logged: set[int] = set()

    def statement(conn: Any, cursor: Any, text: str, *rest: Any) -> None:
        seen_sql.append(text)

    def simple(query: Any) -> None:
        if active:
            seen_sql.append(query.query)

    def checkout(dbapi_conn: Any, record: Any, proxy: Any) -> None:
        driver = record.driver_connection
        if id(driver) not in logged:
            logged.add(id(driver))
            driver.add_query_logger(simple)

    active = True
    event.listen(store.engine.sync_engine, "before_cursor_execute", statement)
    event.listen(store.engine.sync_engine, "checkout", checkout)
    try:
        yield seen_sql
    finally:
        active = False
        event.remove(store.engine.sync_engine, "before_cursor_execute", statement)
        event.remove(store.engine.sync_engine, "checkout", checkout)


def executed_statements(store: Store) -> AbstractContextManager[list[Any]]:
    """The statement objects (SQLAlchemy constructs, before compiling) the store's engine runs inside the block."""
    return _recording(store, "before_execute", 1)


@contextmanager
def _recording(store: Store, name: str, position: int) -> Iterator[list[Any]]:
    """The argument at ``position`` of every engine event ``name`` inside the block."""
    seen: list[Any] = []

    def before(*args: Any) -> None:
        seen.append(args[position])

    event.listen(store.engine.sync_engine, name, before)
    try:
        yield seen
    finally:
        event.remove(store.engine.sync_engine, name, before)
