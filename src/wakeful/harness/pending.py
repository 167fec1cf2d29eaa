"""Pending events after admission (harness.md §11, §12): the ``loop.events`` tool (list, retry, discard), the
reconcile work on them (replay of undelivered events, the 15-minute ack deadline) and the hourly pruning of
settled rows past ``events.dedup_retention_s`` (§2.6).

The deadline fails a Loop (§4.2 row 7) only when the store clock says ``deadline_ms`` has passed **and** this
node's monotonic clock has seen the event pending in the current object for the whole deadline.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.harness import lifecycle as lc
from wakeful.harness.errors import InvalidRequest, NotFound, StoreUnavailable
from wakeful.harness.store import jsontext, loops, retention, schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.ids import lookup_text
from wakeful.harness.store.loops import Loop
from wakeful.harness.tools import LoopTools

if TYPE_CHECKING:
    from wakeful.harness.node import Node, Resident

__all__ = ["ACTIONS", "STATUSES", "PendingEvents", "deadline_notice"]

log = logging.getLogger("wakeful.harness")

E = schema.loop_event
ACTIONS = ("list", "retry", "discard")
STATUSES = ("pending", "acked", "discarded")
MAX_NAMED = 256  # event ids named in one retry/discard
PAGE_DEFAULT, PAGE_MAX = 50, 200  # interfaces.md §1 pagination
PRUNE_EVERY_NS = 3_600 * 1_000_000_000  # §19.3: the prune tick runs hourly
_DELIVERED = operator.attrgetter("delivered")  # a resident's delivered ids (non-empty: it has some to forget)
_LISTED = ("event_id", "topic", "status", "source", "received_ms", "first_delivered_ms", "deadline_ms",
           "acked_ms", "acked_incarnation", "discarded_ms", "envelope_bytes")


def deadline_notice(name: str, loop_id: str, event_id: str, minutes: int, pending: int) -> str:
    """§4.4 ``event-deadline``: the event, the pending count, and the two ways out."""
    return (
        f"Loop {name!r} ({loop_id}) did not acknowledge event {event_id!r} within {minutes} minutes of its "
        f"delivery, so it is now failed. {pending} pending event(s) are kept. Call loop.resume to retry them "
        "with fresh deadlines, or loop.events with action discard to drop them."
    )


class PendingEvents:
    """``loop.events`` for one node, plus the reconcile work on pending events (called from ``Node.tick``)."""

    def __init__(self, node: Node, *, adopt: bool = True) -> None:
        self.node = node
        self.adopt = adopt  # False for the CLI's local mode: the running node reloads (interfaces.md §4.1)
        self._pruned_ns: int | None = None

    # ------------------------------------------------------------------ loop.events (§12)

    async def events(
        self, loop_id: str, action: str = "list", *, event_ids: Sequence[str] | None = None,
        include_payloads: bool = False, status: str | None = None, agent_id: str | None = None,
        limit: int = PAGE_DEFAULT, cursor: str | None = None, actor: str = "operator",
    ) -> dict[str, Any]:
        """``list`` → ``{loop_id, events, next_cursor, pending_count}``; ``retry`` → ``{retried, loop}``;
        ``discard`` → ``{discarded}``. ``agent_id`` limits the call to that agent's Loops (None: operator/admin)."""
        if agent_id is not None and actor == "operator":
            actor = f"agent:{agent_id}"
        if action == "list":
            return await self.list_events(loop_id, include_payloads=include_payloads, status=status, agent_id=agent_id,
                                   limit=limit, cursor=cursor)
        if action == "retry":
            return await self.retry(loop_id, event_ids, agent_id=agent_id, actor=actor)
        if action == "discard":
            return await self.discard(loop_id, event_ids, agent_id=agent_id, actor=actor)
        raise InvalidRequest(f"action must be one of {', '.join(ACTIONS)}", field="action")

    async def list_events(
        self, loop_id: str, *, include_payloads: bool = False, status: str | None = None,
        agent_id: str | None = None, limit: int = PAGE_DEFAULT, cursor: str | None = None,
    ) -> dict[str, Any]:
        """Pending and recently settled events in delivery order ``(received_ms, event_id)``, a page at a time."""
        if status is not None and status not in STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}", field="status")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PAGE_MAX:
            raise InvalidRequest(f"limit must be 1..{PAGE_MAX}", field="limit")
        after = _cursor(cursor)
        stmt = sa.select(E).where(E.c.loop_id == loop_id).order_by(E.c.received_ms, E.c.event_id).limit(limit + 1)
        if status is not None:
            stmt = stmt.where(E.c.status == status)
        if after is not None:
            stmt = stmt.where(sa.tuple_(E.c.received_ms, E.c.event_id) > sa.tuple_(sa.literal(after[0]),
                                                                                   sa.literal(after[1])))
        async with self.node.store.tx(readonly=True) as tx:
            await _owned(tx, loop_id, agent_id, lock=False)
            rows = list(await tx.execute(stmt))
            pending = await lc.pending_count(tx, loop_id)
        page = rows[:limit]
        items = []
        for row in page:
            item = {name: getattr(row, name) for name in _LISTED}
            if include_payloads:
                item["payload"] = jsontext.decode(row.payload)
            items.append(item)
        more = len(rows) > limit
        next_cursor = f"{page[-1].received_ms}:{page[-1].event_id}" if more and page else None
        return {"loop_id": loop_id, "events": items, "next_cursor": next_cursor, "pending_count": pending}

    async def retry(self, loop_id: str, event_ids: Sequence[str] | None = None, *, agent_id: str | None = None,
                    actor: str = "operator") -> dict[str, Any]:
        """§12 / §4.2 row 14: clear the deadlines of the named (or all) pending events; an active Loop is then
        reloaded at a new incarnation so a fresh object receives them. Ids that are not pending are skipped."""
        names = _names(event_ids)
        async with self.node.store.tx() as tx:
            row, ids = await _pending_of(tx, loop_id, agent_id, names)
            if ids:
                await _mark_pending(tx, loop_id, ids, first_delivered_ms=None, deadline_ms=None)
            reload = row.state == lc.ACTIVE and bool(ids)  # nothing to retry: no new incarnation
            if reload:  # the resident object is retired; the node that runs the Loop reloads it (§19.3)
                await loops.update_loop(tx, loop_id, where_incarnation=row.incarnation, object_id=None)
                await lc.append_log(tx, loop_id, row.incarnation, "harness",
                                    f"{actor}: retry of {len(ids)} pending event(s), reloading")
        if reload and self.adopt:
            await self.node.try_load(loop_id)
        view = await LoopTools(self.node, adopt=False).get(loop_id)
        return {"retried": ids, "loop": view}

    async def discard(self, loop_id: str, event_ids: Sequence[str] | None = None, *, agent_id: str | None = None,
                      actor: str = "operator") -> dict[str, Any]:
        """§12: mark the named (or all) pending events ``discarded`` in one transaction, in any Loop state; their
        ids stay known for dedup. Ids that are not pending are skipped."""
        names = _names(event_ids)
        async with self.node.store.tx() as tx:
            row, ids = await _pending_of(tx, loop_id, agent_id, names)
            if ids:
                await _mark_pending(tx, loop_id, ids, status="discarded", discarded_ms=await tx.now_ms())
                await lc.append_log(tx, loop_id, row.incarnation, "harness",
                                    f"{actor}: discarded {len(ids)} pending event(s)")
        return {"discarded": ids}

    # ------------------------------------------------------------------ reconcile work (§11, §12, §2.6)

    async def reconcile(self) -> None:
        """One reconcile pass over pending events: replay what resident objects have not seen, fail Loops whose
        deadline both clocks agree has passed, and prune settled rows once an hour. Never raises for an
        unavailable store (the next tick tries again)."""
        try:
            due = await self._scan()
        except StoreUnavailable as exc:
            log.warning("pending-event reconcile deferred: %s", exc.message)
            return
        for loop_id, event_id in due:
            try:
                await self._fail_deadline(loop_id, event_id)
            except StoreUnavailable as exc:
                log.warning("deadline of %s deferred: %s", loop_id, exc.message)
        await self._prune()

    async def _scan(self) -> list[tuple[str, str]]:
        node = self.node
        residents = node.residents()
        if not residents:
            return []
        stmt = sa.select(E.c.loop_id, E.c.event_id, E.c.deadline_ms).where(E.c.status == "pending").order_by(
            E.c.loop_id, E.c.received_ms, E.c.event_id)
        # issue 16 / benchmarks.md §2.2 idle work: only the objects that were delivered something have ids to
        # forget; an idle node makes no set per Loop each minute
        known = {res.loop_id: (res, set(res.delivered)) for res in filter(_DELIVERED, residents)}
        async with node.store.tx(readonly=True) as tx:
            now_ms = await tx.now_ms()
            rows = list(await tx.execute(stmt))
        _forget_settled(known, rows)
        mono = node.clock.monotonic_ns()
        window_ns = node.config.limits.ack_deadline_s * 1_000_000_000
        replay: set[str] = set()
        due: dict[str, str] = {}
        for r in rows:
            res = node.resident(r.loop_id)
            if res is None:
                continue
            if r.event_id not in res.delivered:
                replay.add(r.loop_id)
            elif (r.deadline_ms is not None and r.deadline_ms <= now_ms and r.loop_id not in due
                  and mono - _delivered_ns(res, r.event_id, mono) >= window_ns):
                due[r.loop_id] = r.event_id
        for loop_id in sorted(replay - set(due)):
            await node.replay(loop_id)
        return sorted(due.items())

    # §4.2 row 7: failed, pending kept (deadlines too), object unloaded, the agent told once
    async def _fail_deadline(self, loop_id: str, event_id: str) -> None:
        node = self.node
        res = node.resident(loop_id)
        if res is None:
            return
        told: str | None = None
        minutes = node.config.limits.ack_deadline_s // 60
        async with node.store.tx() as tx:
            row = await loops.find_loop(tx, loop_id, for_update=True)
            if row is None or row.incarnation != res.incarnation or row.state != lc.ACTIVE:
                return
            still = (await tx.execute(sa.select(E.c.status).where(
                E.c.loop_id == loop_id, E.c.event_id == event_id))).scalar_one_or_none()
            if still != "pending":
                return  # acked or discarded since the scan
            detail = f"event-deadline: {event_id} not acknowledged within {minutes} minutes"
            await lc.move(tx, row, lc.FAILED, None, actor="system", detail=detail,
                          failure=lc.appended_failure(row.failure, detail), object_id=None)
            await lc.append_log(tx, loop_id, row.incarnation, "harness", detail)
            text = deadline_notice(row.name, row.id, event_id, minutes, await lc.pending_count(tx, loop_id))
            told = await lc.write_notice(tx, row, "event-deadline", text)
        node.transitioned(loop_id)
        node.announce(told)
        await node.end_incarnation(loop_id)

    async def _prune(self) -> None:
        mono = self.node.clock.monotonic_ns()
        if self._pruned_ns is not None and mono - self._pruned_ns < PRUNE_EVERY_NS:
            return
        try:
            async with self.node.store.tx() as tx:
                removed = await retention.prune_settled_events(tx, retention_s=self.node.config.dedup_retention_s)
        except StoreUnavailable as exc:
            log.warning("pruning settled events deferred: %s", exc.message)
            return
        self._pruned_ns = mono
        if removed:
            log.info("pruned %d settled events past the dedup retention", removed)


# ids delivered before the scan and no longer pending are settled for good: the per-object memory of §11's
# no-re-trigger rule only needs pending ids, so a long-lived object does not accumulate every id it ever saw
def _forget_settled(known: dict[str, tuple[Resident, set[str]]], rows: list[Any]) -> None:
    pending: dict[str, set[str]] = {}
    for r in rows:
        pending.setdefault(r.loop_id, set()).add(r.event_id)
    for loop_id, (res, before) in known.items():
        settled = before - pending.get(loop_id, set())
        for event_id in settled:
            res.delivered.pop(event_id, None)


def _delivered_ns(res: Resident, event_id: str, default: int) -> int:
    return res.delivered.get(event_id, default)


async def _owned(tx: Tx, loop_id: str, agent_id: str | None, *, lock: bool) -> Loop:
    if lookup_text(loop_id) is None or (agent_id is not None and lookup_text(agent_id) is None):
        raise NotFound("no such Loop")
    row = await loops.find_loop(tx, loop_id, for_update=lock)
    if row is None or (agent_id is not None and row.agent_id != agent_id):
        raise NotFound(f"Loop {loop_id} does not exist")  # never 403 outside the caller's scope
    return row


def _names(event_ids: Sequence[str] | None) -> list[str] | None:
    if event_ids is None:
        return None
    if isinstance(event_ids, (str, bytes)) or not isinstance(event_ids, (list, tuple)):
        raise InvalidRequest("event_ids must be a list of event ids", field="event_ids")
    if len(event_ids) > MAX_NAMED:
        raise InvalidRequest(f"at most {MAX_NAMED} event ids at once", field="event_ids")
    for value in event_ids:
        if not isinstance(value, str) or not 1 <= len(value) <= 128:
            raise InvalidRequest("event ids are strings of 1-128 characters", field="event_ids")
        if "\x00" in value:  # no event id holds it (and PostgreSQL text cannot): refused before any query
            raise InvalidRequest("event ids must not contain U+0000", field="event_ids")
    return list(dict.fromkeys(event_ids))


async def _pending_of(tx: Tx, loop_id: str, agent_id: str | None, names: list[str] | None) -> tuple[Loop, list[str]]:
    """The caller's Loop, locked, and the ids of its pending events among ``names`` (all when None), locked."""
    row = await _owned(tx, loop_id, agent_id, lock=True)
    return row, await _pending_ids(tx, loop_id, names)


async def _mark_pending(tx: Tx, loop_id: str, ids: list[str], **values: Any) -> None:
    """Set ``values`` on the events ``ids`` of ``loop_id`` that are still pending."""
    await tx.execute(sa.update(E).where(E.c.loop_id == loop_id, E.c.status == "pending",
                                        E.c.event_id.in_(ids)).values(**values))


async def _pending_ids(tx: Tx, loop_id: str, names: list[str] | None) -> list[str]:
    stmt = sa.select(E.c.event_id).where(E.c.loop_id == loop_id, E.c.status == "pending").order_by(
        E.c.received_ms, E.c.event_id)
    if names is not None:
        if not names:
            return []
        stmt = stmt.where(E.c.event_id.in_(names))
    return [r.event_id for r in await tx.execute(tx.for_update(stmt))]


def _cursor(cursor: str | None) -> tuple[int, str] | None:
    if cursor is None:
        return None
    ms, sep, event_id = str(cursor).partition(":") if isinstance(cursor, str) else ("", "", "")
    if not sep or not ms.isdigit() or len(ms) > 19 or not event_id or len(event_id) > 128:
        raise InvalidRequest("cursor is not one this list returned", field="cursor")
    return int(ms), event_id
