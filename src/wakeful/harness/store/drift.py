"""The reconcile's comparison of a node's residents with the Loop rows, made by the store (harness.md §19.3).

issue 16 / benchmarks.md §2.2 idle work: the reconcile every 60 s compares every resident object with its Loop row
and looks for owned active Loops that are not resident. Read row by row, that is 10,000 rows decoded and compared in
Python each minute at N = 10,000 — most of an idle node's CPU. Here the residents go to the store as one parameter
(PostgreSQL arrays, SQLite a JSON array) and the store answers only the Loops that differ, so an idle node's
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
    if tx.dialect == "postgresql":
        resident, ids = _pg_residents(residents)
    else:
        resident, ids = _sqlite_residents(residents)
    out = [Drift(r.rid, r.agent_id, r.state, int(r.incarnation or 0), r.object_id)
           for r in await tx.execute(_stale(resident))]
    if agents is not None and not agents:
        return out
    stmt = sa.select(L.c.id, L.c.agent_id, L.c.state, L.c.incarnation, L.c.object_id).where(
        L.c.state == "active", L.c.id.not_in(ids))
    if agents is not None:
        stmt = stmt.where(L.c.agent_id.in_(_pg_unnest("agents", list(agents))
                                           if tx.dialect == "postgresql" else list(agents)))
    out.extend(Drift(r.id, r.agent_id, r.state, int(r.incarnation), r.object_id) for r in await tx.execute(stmt))
    return out


def _stale(resident: sa.Subquery) -> sa.Select[tuple[str, str | None, str | None, int | None, str | None]]:
    """The residents whose row is gone or no longer matches (a LEFT JOIN: a gone row answers NULL columns)."""
    return sa.select(resident.c.rid, L.c.agent_id, L.c.state, L.c.incarnation, L.c.object_id).select_from(
        resident.outerjoin(L, L.c.id == resident.c.rid)).where(sa.or_(
            L.c.id.is_(None), L.c.state != "active", L.c.incarnation != resident.c.inc,
            L.c.object_id.is_distinct_from(resident.c.obj)))


def _pg_unnest(name: str, values: list[str]) -> sa.Select[tuple[str]]:
    return sa.select(sa.func.unnest(sa.bindparam(name, values, type_=pg_dialect.ARRAY(sa.Text))))


def _pg_residents(residents: Sequence[tuple[str, int, str]]) -> tuple[sa.Subquery, sa.Select[tuple[str]]]:
    """PostgreSQL: three arrays unnested side by side (three parameters however many residents)."""
    loop_ids, incarnations, object_ids = (list(c) for c in zip(*residents)) if residents else ([], [], [])
    ids = sa.bindparam("ids", loop_ids, type_=pg_dialect.ARRAY(sa.Text))
    resident = sa.select(
        sa.func.unnest(ids).label("rid"),
        sa.func.unnest(sa.bindparam("incs", incarnations, type_=pg_dialect.ARRAY(sa.BigInteger))).label("inc"),
        sa.func.unnest(sa.bindparam("objs", object_ids, type_=pg_dialect.ARRAY(sa.Text))).label("obj"),
    ).subquery("resident")
    return resident, sa.select(sa.func.unnest(ids))


def _sqlite_residents(residents: Sequence[tuple[str, int, str]]) -> tuple[sa.Subquery, sa.Select[tuple[str]]]:
    """SQLite: one JSON array of ``[id, incarnation, object_id]`` read with ``json_each`` (one parameter)."""
    each = sa.func.json_each(sa.bindparam("residents", json.dumps(residents), type_=sa.Text)) \
        .table_valued("value").alias("each")
    item = each.c.value
    resident = sa.select(
        sa.func.json_extract(item, "$[0]").label("rid"),
        sa.func.json_extract(item, "$[1]").label("inc"),
        sa.func.json_extract(item, "$[2]").label("obj"),
    ).subquery("resident")
    return resident, sa.select(resident.c.rid)
