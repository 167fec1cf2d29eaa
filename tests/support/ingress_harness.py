"""Helpers for event-intake tests (issue 6): the ``ingress_counter.c`` Loop, what it has seen (its checkpoint),
event rows, and a statement counter to prove a refusal never touched the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


@contextmanager
def counting_statements(store: Store) -> Iterator[list[str]]:
    """Every SQL statement the store's engine runs inside the block (to prove "no database access")."""
    seen_sql: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen_sql.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", before)
    try:
        yield seen_sql
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", before)


@contextmanager
def executed_statements(store: Store) -> Iterator[list[Any]]:
    """The statement objects (SQLAlchemy constructs, before compiling) the store's engine runs inside the block."""
    seen: list[Any] = []

    def before(conn: Any, clauseelement: Any, *args: Any) -> None:
        seen.append(clauseelement)

    event.listen(store.engine.sync_engine, "before_execute", before)
    try:
        yield seen
    finally:
        event.remove(store.engine.sync_engine, "before_execute", before)
