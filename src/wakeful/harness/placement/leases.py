"""Agent leases in the store: claim, renew, release, list (harness.md §2.8, §19.2).

Every operation is one conditional statement on ``agent_lease`` judged by the store clock, so clock skew between
nodes cannot shorten a lease; ``epoch`` rises on every claim and never decreases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from wakeful.harness.store import schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.each import json_list, json_rows

__all__ = ["Lease", "claim", "held_by", "lease_of", "list_leases", "reclaim", "release", "renew"]

A = schema.agent_lease


@dataclass(frozen=True, slots=True)
class Lease:
    agent_id: str
    node_id: str
    epoch: int
    acquired_ms: int
    renewed_ms: int
    expires_ms: int


def _lease(row: Any) -> Lease:
    return Lease(row.agent_id, row.node_id, int(row.epoch), int(row.acquired_ms), int(row.renewed_ms),
                 int(row.expires_ms))


# §19.2 claim: one conditional upsert; taken only if absent or expired on the store clock; epoch += 1
async def claim(tx: Tx, agent_id: str, node_id: str, ttl_ms: int) -> Lease | None:
    """The new lease, or None when another holder's lease is still unexpired."""
    now = await tx.now_ms()
    dialect: Any = pg_dialect if tx.dialect == "postgresql" else sqlite_dialect
    stmt = dialect.insert(A).values(
        agent_id=agent_id, node_id=node_id, epoch=1, acquired_ms=now, renewed_ms=now, expires_ms=now + ttl_ms,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[A.c.agent_id],
        set_={"node_id": node_id, "epoch": A.c.epoch + 1, "acquired_ms": now, "renewed_ms": now,
              "expires_ms": now + ttl_ms},
        where=A.c.expires_ms <= now,
    ).returning(*A.c)
    row = (await tx.execute(stmt)).first()
    return None if row is None else _lease(row)


# issue 16: a node restarted under its own id (placement/identity.py) takes over the leases its previous process
# still held: the same holder at epoch + 1, so whatever that process still had in flight is fenced (renewals and
# §4.3 step 1 match the epoch), and nobody waits for the TTL. Expired leases are left to the stranded sweep.
#
# A clean shutdown released its leases (§19.4 drain: expires_ms = now, the holder column still this node): free for
# any node to claim, and other live nodes were told to sweep at once. What none of them took is still under this
# node's id when it starts again; ``released`` > 0 takes up to that many of them (those whose agent has an active
# Loop) in the same statement — an ordinary claim of a free lease (epoch + 1), so the restart does not wait for
# the stranded sweep's pages. A lease another node claimed meanwhile names that node and is never touched: every
# row is matched on ``node_id`` again when it is updated.
async def reclaim(tx: Tx, node_id: str, ttl_ms: int, *, released: int = 0) -> dict[str, int]:
    """``{agent_id: new epoch}`` of every unexpired lease held under ``node_id`` and of up to ``released``
    expired ones still under it, now renewed at a new epoch."""
    now = await tx.now_ms()
    mine: Any = A.c.expires_ms > now
    stmt = A.update()
    if released > 0:
        # the agents with an active Loop, read once (MATERIALIZED): as a join, PostgreSQL without statistics on
        # a fresh store (no ANALYZE yet) chose, per expired lease, a bitmap AND with the whole (state, updated_ms,
        # id) index — 8.7 s for 500 leases over 10,000 Loops, past the statement timeout under load
        L = schema.loop
        active = (sa.select(L.c.agent_id).where(L.c.state == "active").distinct().cte("active_agents")
                  .prefix_with("MATERIALIZED", dialect="postgresql"))
        free = (sa.select(A.c.agent_id)
                .where(A.c.node_id == node_id, A.c.expires_ms <= now,
                       A.c.agent_id.in_(sa.select(active.c.agent_id)))
                .order_by(A.c.agent_id).limit(released))
        mine = sa.or_(mine, A.c.agent_id.in_(free.scalar_subquery()))
        stmt = stmt.add_cte(active)
    stmt = stmt.where(A.c.node_id == node_id, mine).values(
        epoch=A.c.epoch + 1, acquired_ms=now, renewed_ms=now, expires_ms=now + ttl_ms,
    ).returning(A.c.agent_id, A.c.epoch)
    return {r.agent_id: int(r.epoch) for r in await tx.execute(stmt)}


# §19.2 renew: conditional on node_id = self AND epoch = mine; an agent not renewed is lost.
# issue 16: one statement for all of a node's leases — on PostgreSQL the pairs go as two arrays (unnest), so the
# statement and its parameters stay two however many agents the node holds, and it answers only the agents it did
# not renew (a data-modifying CTE), so an idle node's renewal decodes no row per agent
async def renew(tx: Tx, node_id: str, held: Mapping[str, int], ttl_ms: int) -> set[str]:
    """Renew the given ``{agent_id: epoch}`` to expire ``ttl_ms`` from now on the store clock; returns the agents
    of ``held`` that were not renewed (no longer ours at that epoch): lost."""
    if not held:
        return set()
    now = await tx.now_ms()
    pairs = sorted(held.items())
    if tx.dialect == "postgresql":
        agents = sa.bindparam("agents", [a for a, _ in pairs], type_=pg_dialect.ARRAY(sa.Text))
        mine = sa.select(
            sa.func.unnest(agents).label("agent_id"),
            sa.func.unnest(sa.bindparam("epochs", [e for _, e in pairs], type_=pg_dialect.ARRAY(sa.BigInteger)))
            .label("epoch"),
        ).subquery("mine")
        renewed = A.update().where(
            A.c.node_id == node_id, A.c.agent_id == mine.c.agent_id, A.c.epoch == mine.c.epoch,
        ).values(renewed_ms=now, expires_ms=now + ttl_ms).returning(A.c.agent_id).cte("renewed")
        sent = sa.select(sa.func.unnest(agents).label("agent_id")).subquery("sent")
        lost = sa.select(sent.c.agent_id).where(sent.c.agent_id.not_in(sa.select(renewed.c.agent_id)))
        return {r.agent_id for r in await tx.execute(lost)}
    # SQLite (one node, no leases in use): the pairs as one JSON parameter (store/each.py) — a row value
    # IN (VALUES …) was planned as a scan of every lease, and its parameters were bounded to 500 pairs a statement
    kept = {r.agent_id for r in await tx.execute(_RENEW_SQLITE, {
        "pairs": json_list(pairs), "holder": node_id, "now": now, "expires": now + ttl_ms})}
    return set(held) - kept


_MINE_SQLITE = sa.and_(A.c.node_id == sa.bindparam("holder", type_=sa.Text),
                       sa.tuple_(A.c.agent_id, A.c.epoch).in_(json_rows("pairs", 0, 1)))
_RENEW_SQLITE = A.update().where(_MINE_SQLITE).values(
    renewed_ms=sa.bindparam("now", type_=sa.BigInteger), expires_ms=sa.bindparam("expires", type_=sa.BigInteger),
).returning(A.c.agent_id)
_RELEASE_SQLITE = A.update().where(_MINE_SQLITE).values(
    expires_ms=sa.func.min(A.c.expires_ms, sa.bindparam("now", type_=sa.BigInteger))).returning(A.c.agent_id)


# §19.2 release: expires_ms = now under the same condition (drain, idle agent)
async def release(tx: Tx, node_id: str, held: Mapping[str, int]) -> set[str]:
    if not held:
        return set()
    now = await tx.now_ms()
    pairs = sorted(held.items())
    if tx.dialect != "postgresql":  # (as renew's)
        return {r.agent_id for r in await tx.execute(_RELEASE_SQLITE, {
            "pairs": json_list(pairs), "holder": node_id, "now": now})}
    stmt = A.update().where(
        A.c.node_id == node_id, sa.tuple_(A.c.agent_id, A.c.epoch).in_(pairs),
    ).values(expires_ms=sa.func.least(A.c.expires_ms, now)).returning(A.c.agent_id)
    return {r.agent_id for r in await tx.execute(stmt)}


async def lease_of(tx: Tx, agent_id: str, *, for_share: bool = False) -> Lease | None:
    stmt = sa.select(A).where(A.c.agent_id == agent_id)
    if for_share and tx.dialect == "postgresql":
        stmt = stmt.with_for_update(read=True)
    row = (await tx.execute(stmt)).first()
    return None if row is None else _lease(row)


async def held_by(tx: Tx, node_id: str) -> list[Lease]:
    """Unexpired leases of one node."""
    now = await tx.now_ms()
    stmt = sa.select(A).where(A.c.node_id == node_id, A.c.expires_ms > now).order_by(A.c.agent_id)
    return [_lease(r) for r in await tx.execute(stmt)]


async def list_leases(tx: Tx) -> list[Lease]:
    return [_lease(r) for r in await tx.execute(sa.select(A).order_by(A.c.node_id, A.c.agent_id))]
