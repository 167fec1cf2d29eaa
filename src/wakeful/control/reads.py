"""The control plane's read API (interfaces.md §2.2 control-plane routes): plain JSON-able dicts.

Every read is one read-only transaction; unknown ids are ``not_found``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from wakeful.control import rows
from wakeful.control import schema as S
from wakeful.control.applicability import acceptance_status, assess, inapplicable_reason
from wakeful.control.canonical import decode
from wakeful.control.errors import ControlRefused
from wakeful.harness.store.core import Tx

__all__ = [
    "acceptance", "commits", "effects", "evidence", "goal", "goals", "item", "item_public", "items", "receipt",
]


def _missing(what: str, ident: object) -> ControlRefused:
    shown = ident if isinstance(ident, str) and len(ident) <= 80 else "?"
    return ControlRefused("not_found", f"{what} {shown} not found", resource=what)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and len(value) <= 200 else None


def _filters(**values: object) -> None:
    """Filters are strings of at most 200 characters or absent (hostile types never reach the driver)."""
    for name, value in values.items():
        if value is not None and _text(value) is None:
            raise ControlRefused("invalid_command", f"{name} must be a short string", field=name)


def _count(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ControlRefused("invalid_command", f"{name} must be an integer in {lo}..{hi}", field=name)
    return value


async def _goal(tx: Tx, goal_id: object) -> dict[str, Any]:
    gid = _text(goal_id)
    found = None if gid is None else await rows.load_goal(tx, gid)
    if found is None:
        raise _missing("goal", goal_id)
    return found


async def goal(tx: Tx, goal_id: str) -> dict[str, Any]:
    """The goal row with its registrations."""
    found = await _goal(tx, goal_id)
    GA = S.goal_agent
    regs = (await tx.execute(sa.select(GA).where(GA.c.goal_id == goal_id).order_by(GA.c.registered_ms,
                                                                                     GA.c.agent_id))).all()
    found["agents"] = [{k: v for k, v in dict(r._mapping).items() if k != "goal_id"} for r in regs]
    return found


async def goals(tx: Tx, group_id: str, *, status: str | None = None, agent_id: str | None = None) -> list[dict[str, Any]]:
    _filters(group_id=group_id, status=status, agent_id=agent_id)
    G, GA = S.goal, S.goal_agent
    stmt = sa.select(G).where(G.c.group_id == group_id).order_by(G.c.created_ms, G.c.id)
    if status is not None:
        stmt = stmt.where(G.c.status == status)
    if agent_id is not None:
        stmt = stmt.where(G.c.id.in_(sa.select(GA.c.goal_id).where(GA.c.agent_id == agent_id,
                                                                    GA.c.status == "active")))
    return [rows.goal_row(r) for r in (await tx.execute(stmt)).all()]


def item_public(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("status_seq",)}


async def items(tx: Tx, goal_id: str, *, status: str | None = None, cls: str | None = None) -> list[dict[str, Any]]:
    _filters(status=status, cls=cls)
    await _goal(tx, goal_id)
    return [item_public(i) for i in await rows.load_items(tx, goal_id, status=status, cls=cls)]


async def item(tx: Tx, goal_id: str, item_id: str) -> dict[str, Any]:
    """One item with its claim (or None), its evidence and its effects."""
    await _goal(tx, goal_id)
    iid = _text(item_id)
    found = None if iid is None else await rows.load_item(tx, goal_id, iid)
    if found is None:
        raise _missing("item", item_id)
    claims = await rows.load_claims(tx, goal_id, item_id=item_id)
    out = item_public(found)
    out["claim"] = {k: v for k, v in claims[0].items() if k != "goal_id"} if claims else None
    out["evidence"] = await rows.load_evidence(tx, goal_id, item_id=item_id)
    out["effects"] = await rows.load_effects(tx, goal_id, item_id=item_id)
    return out


async def acceptance(tx: Tx, goal_id: str, *, revision: int | None = None) -> dict[str, Any]:
    """A contract revision (default: current); the current one carries criterion statuses and the goal's
    acceptance status (§5). ``{revision: 0, status: "none"}`` when no contract was set."""
    g = await _goal(tx, goal_id)
    current = int(g["acceptance_revision"])
    rev = current if revision is None else revision
    if rev == 0 and current == 0:
        return {"goal_id": goal_id, "revision": 0, "current_revision": 0, "status": "none", "criteria": []}
    contract = await rows.load_contract(tx, goal_id, rev) if isinstance(rev, int) else None
    if contract is None:
        raise _missing("acceptance revision", str(rev))
    out = {k: v for k, v in contract.items() if k != "criteria"}
    out["current_revision"] = current
    if rev == current:
        all_items = {i["id"]: i for i in await rows.load_items(tx, goal_id)}
        ev = await rows.load_evidence(tx, goal_id)
        statuses = assess(contract, ev, all_items, g["subjects"])
        out["criteria"] = [{**c, **statuses[c["id"]].to_dict()} for c in contract["criteria"]]
        out["status"] = acceptance_status((s.status for s in statuses.values()), has_contract=True)
    else:
        out["criteria"] = contract["criteria"]
        out["status"] = None
    return out


async def evidence(tx: Tx, goal_id: str, *, item: str | None = None, criterion: str | None = None) -> list[dict[str, Any]]:
    """Evidence rows with ``applicability``: per named criterion, None (counts now) or the §5 reason."""
    _filters(item=item, criterion=criterion)
    g = await _goal(tx, goal_id)
    rev = int(g["acceptance_revision"])
    contract = await rows.load_contract(tx, goal_id, rev) if rev else None
    criteria = {c["id"]: c for c in contract["criteria"]} if contract else {}
    out = []
    for ev in await rows.load_evidence(tx, goal_id, item_id=item, criterion_id=criterion):
        ev["applicability"] = {
            cid: inapplicable_reason(
                ev, criteria.get(cid), criterion_id=cid, acceptance_revision=rev,
                criterion_digests=contract["criterion_digests"] if contract else {}, subjects=g["subjects"])
            for cid in ev["criterion_ids"]
        }
        out.append(ev)
    return out


async def effects(tx: Tx, goal_id: str, *, state: str | None = None) -> list[dict[str, Any]]:
    _filters(state=state)
    await _goal(tx, goal_id)
    return await rows.load_effects(tx, goal_id, state=state)


async def commits(tx: Tx, goal_id: str, *, after_seq: int = 0, limit: int = 50) -> list[dict[str, Any]]:
    """The commit log after ``after_seq``, oldest first, at most ``limit`` (1..200) entries."""
    after_seq = _count("after_seq", after_seq, 0, 2**62)
    limit = _count("limit", limit, 1, 200)
    await _goal(tx, goal_id)
    K = S.control_commit
    stmt = (sa.select(K).where(K.c.goal_id == goal_id, K.c.seq > after_seq).order_by(K.c.seq).limit(limit))
    out = []
    for r in (await tx.execute(stmt)).all():
        row = dict(r._mapping)
        for name in ("actor", "expected", "events", "receipt"):
            row[name] = decode(row[name])
        out.append(row)
    return out


async def receipt(tx: Tx, goal_id: str, operation_id: str) -> dict[str, Any]:
    """The stored receipt of an applied operation (byte-identical to what the commit returned)."""
    await _goal(tx, goal_id)
    K = S.control_commit
    op = _text(operation_id)
    row = None if op is None else (await tx.execute(
        sa.select(K.c.receipt).where(K.c.goal_id == goal_id, K.c.operation_id == op))).first()
    if row is None:
        raise _missing("operation", operation_id)
    value: dict[str, Any] = decode(row.receipt)
    return value


async def goals_needing_person(store: Any) -> dict[str, Any]:
    """``{"goals_needing_person": [...]}``: goals with open ``user_gate`` / ``user_action`` items
    (control-plane.md §8 ``needs_person``), for the ``wakeful status`` document."""
    G, W = S.goal, S.work_item
    stmt = (sa.select(G.c.id, G.c.title, sa.func.count().label("n"))
            .select_from(G.join(W, W.c.goal_id == G.c.id))
            .where(W.c.status == "open", W.c["class"].in_(("user_gate", "user_action")))
            .group_by(G.c.id, G.c.title).order_by(G.c.id))
    async with store.tx(readonly=True) as tx:
        found = [{"goal_id": r.id, "title": r.title, "items": int(r.n)} for r in await tx.execute(stmt)]
    return {"goals_needing_person": found}
