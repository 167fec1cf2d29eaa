"""Following a Loop's log and transitions, or a session's messages, from the store (``wakeful loop tail`` and
``wakeful session watch`` in local mode): a cursor to start from, then the records after it, oldest first.

The HTTP API has the session stream (``GET …/sessions/{id}/stream``) and no log stream, so these run only in
process, as the operator, on the node's store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.harness.store import loops, schema, sessions

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.store import Tx

__all__ = ["loop_cursor", "loop_records", "session_cursor", "session_records"]

LOG, TR, M = schema.loop_log, schema.loop_transition, schema.message
BATCH = 1000  # records read per poll and kind


async def loop_cursor(harness: Harness, loop_id: str, *, logs_back: int = 20, transitions_back: int = 5) -> dict[str, int]:
    """Where a tail starts: just before the Loop's last ``logs_back`` log lines and ``transitions_back``
    transitions (``not_found`` for an unknown Loop)."""
    async with harness.store.tx(readonly=True) as tx:
        await loops.get_loop(tx, loop_id)
        start_log = (await tx.execute(sa.select(sa.func.max(LOG.c.seq)).where(LOG.c.loop_id == loop_id))).scalar()
        start_tr = (await tx.execute(sa.select(sa.func.max(TR.c.seq)).where(TR.c.loop_id == loop_id))).scalar()
        # seqs are global across Loops, so the start is found by rank
        return {"log": await _rank(tx, LOG, loop_id, logs_back, start_log),
                "transition": await _rank(tx, TR, loop_id, transitions_back, start_tr)}


async def loop_records(harness: Harness, loop_id: str, cursor: dict[str, int]) -> list[dict[str, Any]]:
    """The log lines and transitions after ``cursor`` (which moves past them), in time order."""
    async with harness.store.tx(readonly=True) as tx:
        logs = list(await tx.execute(sa.select(LOG).where(
            LOG.c.loop_id == loop_id, LOG.c.seq > cursor["log"]).order_by(LOG.c.seq).limit(BATCH)))
        trs = list(await tx.execute(sa.select(TR).where(
            TR.c.loop_id == loop_id, TR.c.seq > cursor["transition"]).order_by(TR.c.seq).limit(BATCH)))
    records = [{"type": "log", "seq": r.seq, "at_ms": r.at_ms, "incarnation": r.incarnation,
                "source": r.source, "text": r.text} for r in logs]
    records += [{"type": "transition", "seq": r.seq, "at_ms": r.at_ms, "from": r.from_state,
                 "from_reason": r.from_reason, "to": r.to_state, "to_reason": r.to_reason,
                 "incarnation": r.incarnation, "actor": r.actor, "detail": r.detail} for r in trs]
    if logs:
        cursor["log"] = logs[-1].seq
    if trs:
        cursor["transition"] = trs[-1].seq
    return sorted(records, key=lambda r: (r["at_ms"], r["type"], r["seq"]))


async def session_cursor(harness: Harness, session_id: str, *, from_start: bool) -> tuple[int, str]:
    """Where a watch starts: after the session's newest message, or at its beginning (``not_found`` for an
    unknown session)."""
    async with harness.store.tx(readonly=True) as tx:
        await sessions.get_session(tx, session_id)
        last = (await tx.execute(sa.select(M.c.created_ms, M.c.id).where(M.c.session_id == session_id)
                                 .order_by(M.c.created_ms.desc(), M.c.id.desc()).limit(1))).first()
    return (-1, "") if from_start or last is None else (int(last.created_ms), str(last.id))


async def session_records(harness: Harness, session_id: str,
                          cursor: tuple[int, str]) -> tuple[list[dict[str, Any]], tuple[int, str]]:
    """The session's messages after ``cursor``, oldest first, and the cursor past them."""
    after = sa.or_(M.c.created_ms > cursor[0], sa.and_(M.c.created_ms == cursor[0], M.c.id > cursor[1]))
    async with harness.store.tx(readonly=True) as tx:
        rows = list(await tx.execute(sa.select(M).where(M.c.session_id == session_id, after)
                                     .order_by(M.c.created_ms, M.c.id).limit(BATCH)))
    records = [{"type": "message", "id": r.id, "kind": r.kind, "loop_id": r.loop_id, "loop_name": r.loop_name,
                "incarnation": r.incarnation, "content": r.content, "created_ms": r.created_ms,
                "handled_ms": r.handled_ms} for r in rows]
    return records, ((int(rows[-1].created_ms), str(rows[-1].id)) if rows else cursor)


async def _rank(tx: Tx, table: Any, loop_id: str, back: int, newest: Any) -> int:
    """The seq just before the Loop's ``back``-th newest row (0 when it has fewer)."""
    if newest is None:
        return 0
    stmt = (sa.select(table.c.seq).where(table.c.loop_id == loop_id).order_by(table.c.seq.desc())
            .offset(back).limit(1))
    found = (await tx.execute(stmt)).scalar()
    return int(found) if found is not None else 0
