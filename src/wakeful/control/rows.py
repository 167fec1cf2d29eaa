"""Reading and writing control rows as plain dicts (JSON columns decoded), shared by the kernel and reads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from wakeful.control import schema as S
from wakeful.control.canonical import canonical, decode
from wakeful.control.rules import item_defaults
from wakeful.harness.store.core import Tx

__all__ = [
    "ITEM_COLUMNS", "claim_row", "contract_row", "effect_row", "encode_item", "evidence_row", "goal_row",
    "item_row", "load_claims", "load_contract", "load_effects", "load_evidence", "load_goal", "load_item",
    "load_items",
]

ITEM_COLUMNS = tuple(c.name for c in S.work_item.columns if c.name != "fields")
_GOAL_JSON = ("subjects", "budget")


def goal_row(row: Any) -> dict[str, Any]:
    out = dict(row._mapping)
    for name in _GOAL_JSON:
        out[name] = decode(out[name])
    return out


def item_row(row: Any) -> dict[str, Any]:
    data = dict(row._mapping)
    fields = item_defaults()
    fields.update(decode(data.pop("fields")) or {})
    data.update(fields)
    return data


def encode_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """Column values of ``work_item`` for an item dict (the non-column fields go to ``fields``)."""
    values = {name: item[name] for name in ITEM_COLUMNS if name in item}
    values["fields"] = canonical({k: v for k, v in item.items() if k not in ITEM_COLUMNS})
    return values


def claim_row(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


def evidence_row(row: Any) -> dict[str, Any]:
    out = dict(row._mapping)
    for name in ("criterion_ids", "workload", "criterion_digests"):
        out[name] = decode(out[name])
    return out


def effect_row(row: Any) -> dict[str, Any]:
    out = dict(row._mapping)
    for name in ("outcome", "readback"):
        out[name] = decode(out[name])
    return out


def contract_row(row: Any) -> dict[str, Any]:
    """An acceptance revision: document, criteria (with ``workload_digest``), digests and bindings."""
    document = decode(row.document)
    digests = decode(row.criterion_digests)
    criteria = []
    for c in document["criteria"]:
        entry = dict(c)
        entry.setdefault("independent", False)
        if c.get("workload") is not None:
            from wakeful.control.canonical import digest

            entry["workload_digest"] = digest(c["workload"])
        criteria.append(entry)
    return {
        "goal_id": row.goal_id, "revision": row.revision, "document": document, "digest": row.digest,
        "criteria": criteria, "criterion_digests": digests, "bindings": decode(row.bindings),
        "set_by": row.set_by, "set_ms": row.set_ms,
    }


async def load_goal(tx: Tx, goal_id: str, *, for_update: bool = False) -> dict[str, Any] | None:
    stmt = sa.select(S.goal).where(S.goal.c.id == goal_id)
    row = await tx.first(stmt, for_update=for_update)
    return None if row is None else goal_row(row)


async def load_item(tx: Tx, goal_id: str, item_id: str, *, for_update: bool = False) -> dict[str, Any] | None:
    stmt = sa.select(S.work_item).where(S.work_item.c.id == item_id, S.work_item.c.goal_id == goal_id)
    row = await tx.first(stmt, for_update=for_update)
    return None if row is None else item_row(row)


async def load_items(tx: Tx, goal_id: str, *, status: str | None = None, cls: str | None = None) -> list[dict[str, Any]]:
    where = {"status": status, "class": cls}
    return await _goal_rows(tx, S.work_item, goal_id, ("created_ms", "id"), item_row, where)


async def load_claims(tx: Tx, goal_id: str, *, item_id: str | None = None) -> list[dict[str, Any]]:
    return await _goal_rows(tx, S.work_claim, goal_id, ("item_id",), claim_row, {"item_id": item_id})


async def load_contract(tx: Tx, goal_id: str, revision: int) -> dict[str, Any] | None:
    A = S.acceptance
    row = (await tx.execute(sa.select(A).where(A.c.goal_id == goal_id, A.c.revision == revision))).first()
    return None if row is None else contract_row(row)


async def load_evidence(
    tx: Tx, goal_id: str, *, item_id: str | None = None, criterion_id: str | None = None
) -> list[dict[str, Any]]:
    rows = await _goal_rows(tx, S.evidence, goal_id, ("seq", "id"), evidence_row, {"work_item_id": item_id})
    if criterion_id is not None:
        rows = [r for r in rows if criterion_id in r["criterion_ids"]]
    return rows


async def load_effects(
    tx: Tx, goal_id: str, *, state: str | None = None, item_id: str | None = None
) -> list[dict[str, Any]]:
    where = {"state": state, "work_item_id": item_id}
    return await _goal_rows(tx, S.effect, goal_id, ("created_ms", "id"), effect_row, where)


async def _goal_rows(
    tx: Tx, table: sa.Table, goal_id: str, order: tuple[str, ...], decode: Callable[[Any], dict[str, Any]],
    where: Mapping[str, str | None],
) -> list[dict[str, Any]]:
    """The rows of ``table`` for ``goal_id`` ordered by the ``order`` columns and decoded, keeping those whose
    column equals each value of ``where`` that is not None."""
    stmt = sa.select(table).where(table.c.goal_id == goal_id).order_by(*(table.c[name] for name in order))
    for name, value in where.items():
        if value is not None:
            stmt = stmt.where(table.c[name] == value)
    return [decode(r) for r in (await tx.execute(stmt)).all()]
