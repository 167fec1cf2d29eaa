"""The quota admission primitive: every entry into ``active`` counts and writes under a group-wide lock
(harness.md §15): 20 active Loops per agent, 100 per group, group overrides in ``agent_group.limits``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from wakeful.harness.errors import NotFound, QuotaExceeded
from wakeful.harness.store import jsontext, schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.reads import built_once, by_keys, likely

__all__ = ["QuotaLimits", "admit_active", "count_active", "count_active_by_agent", "effective_limits",
           "group_active", "limits_and_active", "lock_agents_and_count", "lock_group_quota"]

L = schema.loop
C = schema.loop_active_count


@dataclass(frozen=True)
class QuotaLimits:
    """``limits.loops_per_agent`` / ``limits.loops_per_group`` (harness.md §20)."""

    loops_per_agent: int = 20
    loops_per_group: int = 100


def _advisory_key(group_id: str) -> int:
    """A signed 64-bit key for ``wakeful.quota:<group_id>`` (stable across processes and nodes)."""
    digest = hashlib.sha256(f"wakeful.quota:{group_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


# §15: pg_advisory_xact_lock keyed on wakeful.quota:<group_id>; SQLite holds the write lock (BEGIN IMMEDIATE)
async def lock_group_quota(tx: Tx, group_id: str) -> None:
    if tx.dialect == "postgresql":
        # issue 16: the transaction's store-clock reading rides on the lock's row (taken once the lock is held)
        # instead of a round trip of its own (a batch of creates reads the clock for its rows right after)
        clock = tx.clock_column()
        stmt = sa.select(sa.func.pg_advisory_xact_lock(sa.bindparam("k")), *([clock] if clock is not None else []))
        tx.seed_now((await tx.execute(stmt, {"k": _advisory_key(group_id)})).first())


async def effective_limits(tx: Tx, group_id: str, defaults: QuotaLimits | None = None) -> QuotaLimits:
    """The defaults with the group's overrides applied (operator-set ``limits`` JSON)."""
    G = schema.agent_group
    stmt = built_once("quota.limits", lambda: sa.select(G.c.limits).where(G.c.id == sa.bindparam("group_id")))
    return _limits_of(group_id, (await tx.execute(stmt, {"group_id": group_id})).first(), defaults)


def _count_by(column: str) -> sa.Select[Any]:
    return built_once(f"quota.count.{column}", lambda: sa.select(sa.func.count()).select_from(L).where(
        likely(L.c.state == "active"), L.c[column] == sa.bindparam("key")))


async def count_active(tx: Tx, *, agent_id: str | None = None, group_id: str | None = None) -> int:
    if (agent_id is None) != (group_id is None):  # one key: the statement built once (a create batch's group count)
        column, key = ("agent_id", agent_id) if group_id is None else ("group_id", group_id)
        return int((await tx.execute(_count_by(column), {"key": key})).scalar_one())
    stmt = sa.select(sa.func.count()).select_from(L).where(likely(L.c.state == "active"))
    if agent_id is not None:
        stmt = stmt.where(L.c.agent_id == agent_id)
    if group_id is not None:
        stmt = stmt.where(L.c.group_id == group_id)
    return int((await tx.execute(stmt)).scalar_one())


# issue 16: the group's count kept by the store (migration 6, docs/decisions-harness-store.md "The group's active
# count"): the sum of the group's ``loop_active_count`` rows, which the triggers on ``loop`` append to with every
# change of a Loop in or out of ``active``. Read under the group's quota lock, after the statement that took it (a
# PostgreSQL statement's snapshot is taken before the lock is: a count in the locking statement could miss a
# create committed while it waited), the rows are folded into one so the next read is of a few rows — the creates
# and moves since — whatever the size of the group (was: ``count(*)`` of every Loop of the group per batch)
def _fold_pg() -> sa.TextClause:
    # with the group's limits in the same statement: the two reads under the lock are one round trip
    return built_once("quota.group_active.pg", lambda: sa.text(
        "WITH gone AS (DELETE FROM loop_active_count WHERE group_id = :g RETURNING n), "
        "total AS (SELECT coalesce(sum(n), 0) AS n FROM gone), "
        "kept AS (INSERT INTO loop_active_count (group_id, n) SELECT :g, n FROM total WHERE n <> 0) "
        "SELECT agent_group.limits, total.n FROM agent_group, total WHERE agent_group.id = :g",
    ).bindparams(sa.bindparam("g", type_=sa.String)))


def _limits_of(group_id: str, row: Any, defaults: QuotaLimits | None) -> QuotaLimits:
    if row is None:
        raise NotFound(f"group {group_id} not found", resource="group", id=group_id)
    base = defaults or QuotaLimits()
    overrides = jsontext.decode(row.limits) or {}
    return QuotaLimits(
        loops_per_agent=int(overrides.get("loops_per_agent", base.loops_per_agent)),
        loops_per_group=int(overrides.get("loops_per_group", base.loops_per_group)),
    )


async def group_active(tx: Tx, group_id: str) -> int:
    """The group's active Loops, from the store's count; folds its rows into one. The caller holds the group's
    quota lock (``lock_group_quota``), taken by an earlier statement of this transaction."""
    if tx.dialect == "postgresql":
        row = (await tx.execute(_fold_pg(), {"g": group_id})).first()
        return 0 if row is None else int(row.n)
    # SQLite: the writer's lock is held; the rows are read as they are deleted, the sum written back as one
    gone = built_once("quota.group_active.gone", lambda: sa.delete(C).where(
        C.c.group_id == sa.bindparam("g")).returning(C.c.n))
    rows = (await tx.execute(gone, {"g": group_id})).all()
    total = sum(int(r.n) for r in rows)
    if total:
        await tx.execute(C.insert().values(group_id=group_id, n=total))
    return total


async def limits_and_active(tx: Tx, group_id: str, defaults: QuotaLimits | None = None) -> tuple[QuotaLimits, int]:
    """``effective_limits`` and ``group_active`` (its caller's lock held): on PostgreSQL one statement."""
    if tx.dialect == "postgresql":
        row = (await tx.execute(_fold_pg(), {"g": group_id})).first()
        return _limits_of(group_id, row, defaults), 0 if row is None else int(row.n)
    return await effective_limits(tx, group_id, defaults), await group_active(tx, group_id)


async def count_active_by_agent(tx: Tx, agent_ids: list[str]) -> dict[str, int]:
    """Active Loops of each of ``agent_ids`` (absent: none), one statement (a batch of creates)."""
    stmt, params = by_keys(tx.dialect, "quota.count_by_agent", lambda keys: sa.select(
        L.c.agent_id, sa.func.count().label("n")).where(likely(L.c.state == "active"), keys).group_by(L.c.agent_id),
        L.c.agent_id, sorted(set(agent_ids)))
    return {r.agent_id: int(r.n) for r in await tx.execute(stmt, params)}


async def lock_agents_and_count(tx: Tx, agent_ids: list[str]) -> tuple[dict[str, str], dict[str, int]]:
    """The agents of ``agent_ids`` locked (``FOR UPDATE`` on PostgreSQL, in id order) with their statuses, and
    ``count_active_by_agent``: on PostgreSQL one statement (issue 16: a round trip fewer inside a create batch's
    group lock, which serialises the group's creates). Its caller holds the group lock, so no Loop of these
    agents enters ``active`` meanwhile and the count is the one a statement of its own would read."""
    A = schema.agent
    keys = sorted(set(agent_ids))
    if tx.dialect != "postgresql":
        stmt, params = by_keys(tx.dialect, "quota.agents_locked", lambda k: sa.select(A.c.id, A.c.status).where(
            k).order_by(A.c.id), A.c.id, keys)
        status = {r.id: r.status for r in await tx.execute(stmt, params)}
        return status, await count_active_by_agent(tx, keys)
    n = sa.select(sa.func.count()).select_from(L).where(
        likely(L.c.state == "active"), L.c.agent_id == A.c.id).correlate(A).scalar_subquery()
    stmt, params = by_keys(tx.dialect, "quota.agents_locked_counted", lambda k: sa.select(
        A.c.id, A.c.status, n.label("n")).where(k).order_by(A.c.id).with_for_update(of=A), A.c.id, keys)
    rows = (await tx.execute(stmt, params)).all()
    return {r.id: r.status for r in rows}, {r.id: int(r.n) for r in rows if r.n}


# §15: count and write in the same transaction under the group lock, so concurrent entries never overshoot
async def admit_active(tx: Tx, *, group_id: str, agent_id: str, defaults: QuotaLimits | None = None) -> None:
    """Take the group's quota lock and check that one more Loop of this agent may enter ``active``.

    Raises ``QuotaExceeded(scope, limit)``. The caller writes the Loop as ``active`` in the same
    transaction (the lock is held until it ends); a Loop already active must not be admitted again.
    Take this lock before any Loop row lock in the transaction, so lock order is the same everywhere.
    """
    await lock_group_quota(tx, group_id)
    limits, in_group = await limits_and_active(tx, group_id, defaults)
    if await count_active(tx, agent_id=agent_id) >= limits.loops_per_agent:
        raise QuotaExceeded("agent", limits.loops_per_agent)
    if in_group >= limits.loops_per_group:
        raise QuotaExceeded("group", limits.loops_per_group)
