"""The reconcile's comparison of a node's residents with the Loop rows, made by the store (harness.md §19.3).

issue 16 / benchmarks.md §2.2 idle work: the reconcile every 60 s compares every resident object with its Loop row
and looks for owned active Loops that are not resident. Read row by row, that is 10,000 rows decoded and compared in
Python each minute at N = 10,000 — most of an idle node's CPU. Here the residents go to the store as one parameter
(a JSON array) and the store answers only the Loops that differ, so an idle node's
reconcile decodes no row however many Loops it runs; the decisions stay the node's, on a fresh read under each
Loop's lock (``Node._reconcile_one``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect

from wakeful.harness.store import schema
from wakeful.harness.store.core import Tx

__all__ = ["Drift", "drift"]

L = schema.loop


@dataclass(frozen=True, slots=True)
class Drift:
    """A Loop the reconcile must look at: ``state`` etc. as the row is now; ``state`` None when the row is gone."""

    loop_id: str
    agent_id: str | None
    state: str | None
    incarnation: int
    object_id: str | None


async def drift(tx: Tx, residents: Sequence[tuple[str, int, str]], agents: Sequence[str] | None) -> list[Drift]:
    """The Loops that differ from what the node runs: each of ``residents`` ``(loop_id, incarnation, object_id)``
    whose row is gone, not active, at another incarnation or with another object; and each active Loop that is not
    resident — of ``agents`` only, when given (a cluster node's held agents; None: every agent)."""
    resident = _residents(tx, residents)
    out = [Drift(r.rid, r.agent_id, r.state, int(r.incarnation or 0), r.object_id)
           for r in await tx.execute(_stale(resident))]
    if agents is not None and not agents:
        return out
    stmt = sa.select(L.c.id, L.c.agent_id, L.c.state, L.c.incarnation, L.c.object_id).where(
        L.c.state == "active", L.c.id.not_in(sa.select(resident.c.rid)))
    if agents is not None:
        stmt = stmt.where(L.c.agent_id.in_(list(agents)))
    out.extend(Drift(r.id, r.agent_id, r.state, int(r.incarnation), r.object_id) for r in await tx.execute(stmt))
    return out


def _stale(resident: sa.Subquery) -> sa.Select[tuple[str, str | None, str | None, int | None, str | None]]:
    """The residents whose row is gone or no longer matches (a LEFT JOIN: a gone row answers NULL columns)."""
    return sa.select(resident.c.rid, L.c.agent_id, L.c.state, L.c.incarnation, L.c.object_id).select_from(
        resident.outerjoin(L, L.c.id == resident.c.rid)).where(sa.or_(
            L.c.id.is_(None), L.c.state != "active", L.c.incarnation != resident.c.inc,
            L.c.object_id.is_distinct_from(resident.c.obj)))


def _residents(tx: Tx, residents: Sequence[tuple[str, int, str]]) -> sa.Subquery:
    """The residents as rows ``(rid, inc, obj)`` of one JSON array ``[[id, incarnation, object_id], …]``: one text
    parameter made by ``json.dumps`` in C (an array parameter per column costs asyncpg a Python ``isinstance`` per
    element), read with ``json_array_elements`` on PostgreSQL and ``json_each`` on SQLite."""
    text = sa.bindparam("residents", json.dumps(residents), type_=sa.Text)
    if tx.dialect == "postgresql":
        each = sa.func.json_array_elements(sa.cast(text, pg_dialect.JSON)).table_valued("value").alias("each")
    else:
        each = sa.func.json_each(text).table_valued("value").alias("each")
    item = each.c.value
    return sa.select(
        item.op("->>")(0).label("rid"),
        sa.cast(item.op("->>")(1), sa.BigInteger).label("inc"),
        item.op("->>")(2).label("obj"),
    ).subquery("resident")
