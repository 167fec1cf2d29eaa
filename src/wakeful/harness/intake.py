"""Event intake (harness.md §10, §14): rate-limit buckets, webhook secret resolution, scope checks, strict body
parsing, and durable admission of one event in one transaction with the Loop row locked.

The HTTP routes (``wakeful.api``) and ``loop.send`` call these in the order §10.3 / §10.4 prescribe; after a
commit the node holding the Loop is signalled so delivery does not wait for the reconciler (§10.2).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from wakeful.errors import Busy, InvalidParams, ObjectNotFound
from wakeful.errors import MailboxFull as RuntimeMailboxFull
from wakeful.harness import eventbody
from wakeful.harness import lifecycle as lc
from wakeful.harness.errors import (
    GroupBacklogFull,
    HarnessError,
    LoopMailboxFull,
    LoopNotActive,
    NotFound,
    RateLimited,
    StoreUnavailable,
)
from wakeful.harness.ratelimit import (
    Deferred,
    Limiter,
    LocalLimiter,
    Staged,
    TxLimiter,
    global_bucket,
    loop_bucket,
)
from wakeful.harness.store import loops, schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.each import json_list, json_rows, json_table
from wakeful.harness.store.group import LOCKED_AHEAD, Waiters
from wakeful.harness.store.ids import lookup_text
from wakeful.harness.store.reads import built_once, likely

if TYPE_CHECKING:
    from wakeful.harness.node import Node, Resident

__all__ = ["MAILBOX_RETRY_S", "BACKLOG_RETRY_S", "SOURCES", "Intake", "secret_digest", "secret_shape_ok"]

log = logging.getLogger("wakeful.harness")

E, L = schema.loop_event, schema.loop
MAILBOX_RETRY_S = 5  # §10.2 step 4
BACKLOG_RETRY_S = 30  # §10.2 step 5
SOURCES = ("api", "webhook", "send", "operator")  # §2.6
BATCH_EVENTS = 256  # admissions per batch unit (bounded statement parameters); more start the next unit
_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")  # §10.4 step 2: 43 chars of the URL-safe base64 alphabet


def secret_shape_ok(secret: object) -> bool:
    """§10.4 step 2, decided without any store access."""
    return isinstance(secret, str) and _SECRET.fullmatch(secret) is not None


def secret_digest(secret: str) -> str:
    """Hex SHA-256 of a webhook secret: the only form in which it is stored (§13)."""
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


@dataclass
class _Admission:
    loop_id: str
    event: eventbody.NormalEvent
    source: str
    secret_sha256: str | None
    group_id: str | None
    agent_id: str | None
    index: int = -1  # its place in the batch that admits it
    takes: list[tuple[str, float, float, int]] | None = None  # its bucket checks, taken by the admission (issue 16)


class Intake:
    """Event intake of one node (``Harness.intake``). ``limiter`` defaults to in-process buckets on the node's
    monotonic clock; a cluster passes a shared one."""

    def __init__(self, node: Node, *, limiter: Limiter | None = None) -> None:
        self.node = node
        self.limiter: Limiter = limiter or LocalLimiter(node.clock)
        # issue 16: a shared limiter's checks are taken inside the admission's group-commit transaction
        self._in_tx: TxLimiter | None = limiter if isinstance(limiter, TxLimiter) else None
        self._signalled: set[str] = set()
        # the next batch unit (not started yet) and the admissions it will take
        self._collecting: tuple[asyncio.Future[list[tuple[dict[str, Any], bool] | HarnessError]],
                                list[_Admission], Waiters] | None = None

    @property
    def waiting(self) -> int:
        """Admissions collected for the next batch (not counting the batch committing)."""
        return 0 if self._collecting is None else len(self._collecting[1])

    # ------------------------------------------------------------------ §14 rate limits

    def deferred(self) -> Deferred | None:
        """A request's bucket checks to be taken by its admission (a shared limiter), or None (in-process buckets:
        each check is taken where the route reaches it)."""
        return Deferred() if self._in_tx is not None else None

    async def take_global(self, deferred: Deferred | None = None) -> None:
        """Bucket ``ingress:global`` (6,000 per minute); checked before any secret or Loop lookup.
        Raises ``RateLimited`` (``retry_after_s``) or ``StoreUnavailable`` (a shared limiter that is down).
        With ``deferred`` the check is noted there instead, for the admission's transaction (``admit``)."""
        per_min = self.node.config.limits.ingress_global_per_min
        await self._take(global_bucket(), per_min, deferred)

    async def take_loop(self, loop_id: str, deferred: Deferred | None = None) -> None:
        """Bucket ``ingress:loop:<id>`` (60 per minute), keyed by Loop id, never by secret; duplicates count."""
        per_min = self.node.config.limits.ingress_per_loop_per_min
        await self._take(loop_bucket(loop_id), per_min, deferred)

    async def _take(self, bucket: str, per_min: int, deferred: Deferred | None) -> None:
        if deferred is not None and not deferred.done and self._in_tx is not None:
            deferred.checks.append((bucket, float(per_min), per_min / 60.0, per_min))
            return
        wait = await self.limiter.take(bucket, float(per_min), per_min / 60.0)
        if wait is not None:
            raise _limited(per_min, wait)

    async def settle(self, deferred: Deferred | None) -> None:
        """Take a request's noted checks now, in order (it ends with an answer before its admission): raises
        ``RateLimited`` at the first empty bucket, so that answer is the 429 the checks' §10.3 order gives."""
        if deferred is None or deferred.done:
            return
        deferred.done = True
        for bucket, capacity, rate, per_min in deferred.checks:
            wait = await self.limiter.take(bucket, capacity, rate)
            if wait is not None:
                raise _limited(per_min, wait)

    async def _take_deferred(self, tx: Tx, batch: list[_Admission]) -> dict[int, RateLimited]:
        """The batch's noted bucket checks, in the admission's transaction: stage by stage (the global bucket,
        then the Loop's), a request refused at one stage reaching no later one → index → its 429. One statement
        for all of them while no bucket refuses (``take_staged``)."""
        due, plan = await self._stage(tx, batch)
        if plan is None:
            return {}
        return await self._refusals(tx, due, plan, _returned(await tx.execute(plan.statement, plan.params)))

    async def _stage(self, tx: Tx, batch: list[_Admission]) -> tuple[list[_Admission], Staged | None]:
        """The batch's requests with noted checks and the limiter's plan for them (None: nothing to take)."""
        due = [a for a in batch if a.takes]
        if self._in_tx is None or not due:
            return due, None
        return due, await self._in_tx.stage(tx, [[(b, c, r) for b, c, r, _ in a.takes or ()] for a in due])

    @staticmethod
    async def _refusals(tx: Tx, due: list[_Admission], plan: Staged,
                        returned: dict[str, float | None]) -> dict[int, RateLimited]:
        refused: dict[int, RateLimited] = {}
        for adm, answer in zip(due, await plan.finish(tx, returned)):
            if answer is not None and adm.takes is not None:
                stage, wait = answer
                refused[adm.index] = _limited(adm.takes[stage][3], wait)
        return refused

    # ------------------------------------------------------------------ lookups

    async def resolve_webhook(self, secret: str) -> tuple[str, str]:
        """§10.4 steps 2–3 → ``(loop_id, secret_sha256)``. A badly shaped secret is ``NotFound`` without any
        store access; otherwise one indexed equality lookup of its digest (no comparison of secrets)."""
        if not secret_shape_ok(secret):
            raise NotFound("no such webhook")
        digest = secret_digest(secret)
        async with self.node.store.tx(readonly=True) as tx:
            stmt = sa.select(L.c.id).where(L.c.webhook_secret_sha256 == digest)
            loop_id = (await tx.execute(stmt)).scalar_one_or_none()
        if loop_id is None:
            raise NotFound("no such webhook")
        return str(loop_id), digest

    async def loop_in_scope(self, group_id: str, loop_id: str, agent_id: str | None) -> None:
        """§10.3 step 7: the Loop exists in the group (and belongs to ``agent_id`` for an agent key)."""
        if lookup_text(group_id) is None or lookup_text(loop_id) is None:
            raise NotFound("no such Loop")
        res = self.node.resident(loop_id)
        if res is not None and res.group_id:  # issue 16: a resident Loop's owner is known without a store read
            owner = (res.group_id, res.agent_id)
        else:
            async with self.node.store.tx(readonly=True) as tx:
                stmt = sa.select(L.c.group_id, L.c.agent_id).where(L.c.id == loop_id)
                row = (await tx.execute(stmt)).first()
            if row is None:
                raise NotFound("no such Loop")
            owner = (str(row.group_id), str(row.agent_id))
        if owner[0] != group_id or (agent_id is not None and owner[1] != agent_id):
            raise NotFound("no such Loop")

    # ------------------------------------------------------------------ §10.1 / §10.2

    def parse_body(self, raw: bytes, *, route: Literal["group", "webhook"]) -> dict[str, Any]:
        """The body as a JSON object (see ``eventbody.parse_body``): ``InvalidJson`` on the group route,
        ``JsonObjectRequired`` on the webhook route; strict-rule violations surface later as ``invalid_event``."""
        return eventbody.parse_body(raw, route=route)

    async def admit(
        self, *, loop_id: str, topic: str, payload: Any, event_id: str | None,
        idempotency_keys: Sequence[str] = (), delivery_ids: Sequence[str] = (), source: str,
        secret_sha256: str | None = None, group_id: str | None = None, agent_id: str | None = None,
        deferred: Deferred | None = None,
    ) -> dict[str, Any]:
        """§10.1 normalisation, then §10.2 admission in one transaction with the Loop row locked.

        ``deferred``: the request's bucket checks not taken yet (``take_global`` / ``take_loop``), taken in that
        transaction before the §10.2 checks; a refused event is ``RateLimited`` and not stored. An answer before
        the admission (the event's own ``InvalidEvent``) leaves them to the caller's ``settle``.

        Returns the ``202`` body ``{status: "accepted", event_id, duplicate[, payload_mismatch]}``. Raises
        ``InvalidEvent``, ``PayloadTooLarge``, ``NotFound``, ``LoopNotActive``, ``LoopMailboxFull``,
        ``GroupBacklogFull`` or ``StoreUnavailable`` — and then nothing was written.
        """
        if source not in SOURCES:
            raise ValueError(f"unknown event source {source!r}")
        event = eventbody.normalise(topic=topic, payload=payload, event_id=event_id,
                                    idempotency_keys=idempotency_keys, delivery_ids=delivery_ids)
        if lookup_text(loop_id) is None:
            raise NotFound("no such Loop")
        takes: list[tuple[str, float, float, int]] | None = None
        if deferred is not None and not deferred.done and deferred.checks:
            deferred.done = True  # from here the admission's transaction takes them
            takes = list(deferred.checks)

        # issue 16: group commit — concurrent admissions share one transaction; answered after it commits
        answer, handed = await self._admit_grouped(_Admission(loop_id, event, source, secret_sha256, group_id,
                                                              agent_id, takes=takes))
        if not answer["duplicate"]:
            if not handed:
                self.signal(loop_id)
            self.node.instruments.admitted(loop_id)  # after each commit of a new event (§10.2)
        return answer

    async def _admit_grouped(self, adm: _Admission) -> tuple[dict[str, Any], bool]:
        """Admissions waiting meanwhile are checked together by one unit of the store's group commit, with a
        fixed number of statements per batch instead of per event (``_admit_many``); a batch that fails for a
        reason other than an event's own refusal is retried event by event (``_admit``), so a fault of one
        event cannot fail the others."""
        if (self._collecting is None or self._collecting[0].done()  # (a unit that failed before it ran: done)
                or len(self._collecting[1]) >= BATCH_EVENTS):
            taken: list[_Admission] = []

            def close() -> None:
                if self._collecting is not None and self._collecting[1] is taken:
                    self._collecting = None  # closed: admissions from now on go to the next unit

            async def unit(tx: Tx) -> list[tuple[dict[str, Any], bool] | HarnessError]:
                close()
                return await self._admit_many(tx, taken)  # (a rerun of the unit admits the same ones)

            def locks() -> list[str]:  # the Loop rows _admit_many locks (the batch locks them with the others')
                close()
                return [a.loop_id for a in taken]

            task = asyncio.ensure_future(self.node.store.grouped(unit, locks=locks))
            self._collecting = (task, taken, Waiters(task))
        _, collected, waiters = self._collecting
        collected.append(adm)
        try:
            outcomes: list[tuple[dict[str, Any], bool] | HarnessError] = await waiters.wait()
        except HarnessError:
            raise
        except Exception as exc:
            log.info("batch admission failed (%s); admitting %s alone", type(exc).__name__, adm.loop_id)

            async def alone(tx: Tx) -> tuple[dict[str, Any], bool]:
                return await self._admit(tx, adm.loop_id, adm.event, adm.source, adm.secret_sha256, adm.group_id,
                                         adm.agent_id, adm.takes)

            single: tuple[dict[str, Any], bool] = await self.node.store.grouped(alone, key=adm.loop_id,
                                                                                locks=lambda: [adm.loop_id])
            return single
        outcome = outcomes[adm.index]
        if isinstance(outcome, HarnessError):
            raise outcome
        return outcome

    async def _admit_many(self, tx: Tx, batch: list[_Admission]) -> list[tuple[dict[str, Any], bool] | HarnessError]:
        """``_admit`` for many events at once, with the same checks in the same order and the same answers:
        each Loop row is read (and locked, in id order) once, and the dedup, pending, backlog and ordering
        figures are read once for the batch and then carried forward in memory, event by event."""
        for n, adm in enumerate(batch):
            adm.index = n
        loop_ids = sorted({a.loop_id for a in batch})
        lrows = await _lock_loops(tx, loop_ids)
        due, plan = await self._stage(tx, batch)  # (bucket rows after Loop rows: one lock order)
        live = sorted(i for i, r in lrows.items() if r.state == lc.ACTIVE)
        pending: dict[str, list[str]] = {i: [] for i in live}
        known: dict[tuple[str, str], str] = {}
        backlog: dict[str, int] = {}
        last: dict[str, int] = {}
        returned: dict[str, float | None] | None = None
        if live:
            pairs = sorted({(a.loop_id, a.event.event_id) for a in batch if a.loop_id in pending})
            group_ids = sorted({lrows[i].group_id for i in live})
            if tx.dialect == "postgresql":  # (the bucket checks ride in the reads' statement)
                returned = await _batch_reads_pg(tx, pairs, live, group_ids, known, pending, backlog, last, plan)
            else:  # (one statement: the four reads tagged by kind)
                known, backlog, last = await _batch_figures(tx, pairs, group_ids, pending)
        refused: dict[int, RateLimited] = {}
        if plan is not None:
            if returned is None:
                returned = _returned(await tx.execute(plan.statement, plan.params))
            refused = await self._refusals(tx, due, plan, returned)
        limits = self.node.config.limits
        now = await tx.now_ms()
        outcomes: list[tuple[dict[str, Any], bool] | HarnessError] = []
        rows: list[dict[str, Any]] = []
        checked: dict[str, int] = {}  # (_plan_hand_off: this pass's checked prefix of each Loop's pending ids)
        for adm in batch:
            if adm.index in refused:  # §10.3 step 3 / 8 before §10.2: refused, not stored
                outcomes.append(refused[adm.index])
                continue
            try:
                outcomes.append(self._admit_one(tx, adm, lrows.get(adm.loop_id), known, pending, backlog, last,
                                                now, limits, rows, checked))
            except HarnessError as exc:
                outcomes.append(exc)
        if rows:
            if tx.dialect == "postgresql":  # (one INSERT of the rows as arrays: one execution, one plan)
                await tx.execute(_INSERT_PG, {c: [r[c] for r in rows] for c in _INSERT_COLUMNS})
            else:
                await tx.execute(_INSERT_SQLITE, rows)
        return outcomes

    def _admit_one(self, tx: Tx, adm: _Admission, row: Any, known: dict[tuple[str, str], str],
                   pending: dict[str, list[str]], backlog: dict[str, int], last: dict[str, int], now: int,
                   limits: Any, rows: list[dict[str, Any]], checked: dict[str, int]) -> tuple[dict[str, Any], bool]:
        loop_id, event = adm.loop_id, adm.event
        if (row is None or (adm.group_id is not None and row.group_id != adm.group_id)
                or (adm.agent_id is not None and row.agent_id != adm.agent_id)
                or (adm.secret_sha256 is not None and row.webhook_secret_sha256 != adm.secret_sha256)):
            raise NotFound("no such Loop")  # step 1
        if row.state != lc.ACTIVE:  # step 2
            raise LoopNotActive(f"Loop {loop_id} is {row.state}", state=row.state, pause_reason=row.pause_reason)
        stored = known.get((loop_id, event.event_id))
        if stored is not None:  # step 3
            return _accepted(event.event_id, True, stored != event.payload_sha256), False
        waiting = pending[loop_id]
        if len(waiting) >= limits.pending_events:  # step 4
            raise LoopMailboxFull(f"Loop {loop_id} already holds {limits.pending_events} pending events",
                              retry_after_s=MAILBOX_RETRY_S)
        held = backlog.get(row.group_id, 0)
        if held + event.envelope_bytes > limits.group_backlog_bytes:  # step 5
            raise GroupBacklogFull(f"the group's pending events would exceed {limits.group_backlog_bytes} bytes",
                                   retry_after_s=BACKLOG_RETRY_S)
        before = last.get(loop_id)
        received = now if before is None or now > before else before + 1
        handed = self._plan_hand_off(tx, loop_id, row.incarnation, waiting, event, checked)
        rows.append({
            "loop_id": loop_id, "event_id": event.event_id, "group_id": row.group_id, "topic": event.topic,
            "payload": event.payload_text, "payload_sha256": event.payload_sha256,
            "envelope_bytes": event.envelope_bytes, "status": "pending", "source": adm.source, "received_ms": received,
            **self._stamp(handed, now),
        })
        known[(loop_id, event.event_id)] = event.payload_sha256
        waiting.append(event.event_id)
        backlog[row.group_id] = held + event.envelope_bytes
        last[loop_id] = received
        return _accepted(event.event_id, False, False), handed  # step 6

    async def _admit(self, tx: Tx, loop_id: str, event: eventbody.NormalEvent, source: str,
                     secret_sha256: str | None, group_id: str | None,
                     agent_id: str | None,
                     takes: list[tuple[str, float, float, int]] | None = None) -> tuple[dict[str, Any], bool]:
        """One admission inside a (group) transaction → (the answer, whether the event is handed to the resident
        object right after the commit). Every refusal is raised before anything is written (``Store.grouped``)
        but the bucket checks ``takes``: a token taken stays taken whatever §10.2 answers."""
        row = await loops.find_loop(tx, loop_id, for_update=True)
        if takes:
            one = _Admission(loop_id, event, source, secret_sha256, group_id, agent_id, index=0, takes=takes)
            refused = await self._take_deferred(tx, [one])
            if 0 in refused:
                raise refused[0]
        if (row is None or (group_id is not None and row.group_id != group_id)
                or (agent_id is not None and row.agent_id != agent_id)
                or (secret_sha256 is not None and row.webhook_secret_sha256 != secret_sha256)):
            raise NotFound("no such Loop")  # step 1: also a secret rotated or revoked meanwhile
        if row.state != lc.ACTIVE:  # step 2
            raise LoopNotActive(f"Loop {loop_id} is {row.state}", state=row.state, pause_reason=row.pause_reason)
        known = (await tx.execute(sa.select(E.c.payload_sha256).where(
            E.c.loop_id == loop_id, E.c.event_id == event.event_id))).first()
        if known is not None:  # step 3: any status; the stored payload is kept
            return _accepted(event.event_id, True, known.payload_sha256 != event.payload_sha256), False
        limits = self.node.config.limits
        # the pending ids (at most the bound): their number is step 4, and whether they all reached the resident
        # object decides the in-memory hand-off below
        pending = list((await tx.execute(sa.select(E.c.event_id).where(
            E.c.loop_id == loop_id, E.c.status == "pending").limit(limits.pending_events))).scalars())
        if len(pending) >= limits.pending_events:  # step 4
            raise LoopMailboxFull(f"Loop {loop_id} already holds {limits.pending_events} pending events",
                              retry_after_s=MAILBOX_RETRY_S)
        backlog = await _group_backlog(tx, row.group_id)
        if backlog + event.envelope_bytes > limits.group_backlog_bytes:  # step 5
            raise GroupBacklogFull(f"the group's pending events would exceed {limits.group_backlog_bytes} bytes",
                                   retry_after_s=BACKLOG_RETRY_S)
        now = await tx.now_ms()
        last = await _last_received(tx, loop_id)
        received = now if last is None or now > last else last + 1  # admission order = delivery order
        mark = tx.after_commit_mark()
        handed = self._plan_hand_off(tx, loop_id, row.incarnation, pending, event)
        inserted = await tx.insert_if_absent(E, {
            "loop_id": loop_id, "event_id": event.event_id, "group_id": row.group_id, "topic": event.topic,
            "payload": event.payload_text, "payload_sha256": event.payload_sha256,
            "envelope_bytes": event.envelope_bytes, "status": "pending", "source": source, "received_ms": received,
            **self._stamp(handed, now),
        })
        if handed and not inserted:  # a duplicate after all (a concurrent insert): nothing to hand over
            tx.drop_after_commit(mark)
            tx.shared["intake.hand_off"][loop_id].discard(event.event_id)
            handed = False
        return _accepted(event.event_id, not inserted, False), handed  # step 6

    # §11 / issue 16: the delivery stamp of an event handed to the resident object right after the commit is
    # written by the insert itself (no write of its own); a hand-off that is refused after all is stamped again at
    # the delivery that follows (``Node.stamp_again``)
    def _stamp(self, handed: bool, now: int) -> dict[str, int | None]:
        if not handed:
            return {"first_delivered_ms": None, "deadline_ms": None}
        return {"first_delivered_ms": now, "deadline_ms": now + self.node.config.limits.ack_deadline_s * 1000}

    # issue 16: delivery without a store round trip. The event goes to the resident object straight after the
    # commit when every older pending event of the Loop has reached that object already (or is handed to it
    # just before, in this same transaction), so the order stays (received_ms, event_id); otherwise the usual
    # signal → replay reads the pending events from the store.
    def _plan_hand_off(self, tx: Tx, loop_id: str, incarnation: int, pending: list[str],
                       event: eventbody.NormalEvent, checked: dict[str, int] | None = None) -> bool:
        """``checked`` (a batch, planned in one synchronous pass over a ``pending`` list that only grows): how
        many leading ids of the Loop's list are known to have reached the object or to be handed ahead, so each
        event looks at the ids after those only (was the whole list per event: quadratic in a Loop's backlog)."""
        res = self.node.resident(loop_id)
        if res is None or res.incarnation != incarnation:
            return False
        planned: dict[str, set[str]] = tx.shared.setdefault("intake.hand_off", {})
        ahead = planned.setdefault(loop_id, set())
        start = 0 if checked is None else checked.get(loop_id, 0)
        for n in range(start, len(pending)):
            i = pending[n]
            if i not in res.delivered and i not in ahead:
                if checked is not None:
                    checked[loop_id] = n  # (this one stays in the way for the rest of the pass)
                return False
        if checked is not None:
            checked[loop_id] = len(pending)
        ahead.add(event.event_id)
        tx.after_commit(lambda: self._hand_off(res, event))
        return True

    def _hand_off(self, res: Resident, event: eventbody.NormalEvent) -> None:
        node = self.node
        if node.resident(res.loop_id) is not res or event.event_id in res.delivered:
            self._not_handed(res.loop_id, event.event_id)
            return
        try:
            # the payload as admitted: exact JSON types only (§10.1's checks), equal to the stored text's decoding,
            # and the runtime boxes its own copy (issue 16: the stored text was decoded again for every event)
            done = node.runtime.deliver_nowait(res.object_id, event.event_id, event.topic, event.payload)
        except (RuntimeMailboxFull, Busy, ObjectNotFound, InvalidParams):
            self._not_handed(res.loop_id, event.event_id)  # the store path delivers it later, in order (§11)
            return
        if done.duplicate:  # an id the object took for a repeat: the replay path decides (reload, §11)
            self._not_handed(res.loop_id, event.event_id)
            return
        res.delivered.setdefault(event.event_id, node.clock.monotonic_ns())

    def _not_handed(self, loop_id: str, event_id: str) -> None:
        """The event's insert stamped a delivery that did not happen: the replay that delivers it stamps it anew."""
        res = self.node.resident(loop_id)
        if res is not None and event_id not in res.delivered:
            self.node.stamp_again(res, event_id)
        self.signal(loop_id)

    async def send(self, loop_id: str, topic: str, payload: Any = None, event_id: str | None = None, *,
                   agent_id: str | None = None, source: str = "operator") -> dict[str, Any]:
        """The third intake path (§10.5): ``loop.send`` (the owner's MCP tool, source ``send``) and
        ``wakeful loop send`` (source ``operator``): same normalisation, admission and answer, no buckets.
        ``agent_id`` limits it to that agent's Loops (None: operator)."""
        if agent_id is not None and lookup_text(agent_id) is None:
            raise NotFound("no such Loop")
        return await self.admit(loop_id=loop_id, topic=topic, payload=payload, event_id=event_id, source=source,
                                agent_id=agent_id)

    # ------------------------------------------------------------------ delivery signal (§10.2, §11)

    def signal(self, loop_id: str) -> None:
        """Deliver a Loop's pending events soon if it is resident here; one queued replay per Loop at a time."""
        resident = self.node.resident(loop_id) is not None
        if not resident and self.node.placement is not None:
            self.node.placement.admitted(loop_id)  # cluster: NOTIFY wakeful_events, the lease holder delivers
            return
        if not resident or loop_id in self._signalled:
            return
        self._signalled.add(loop_id)
        self.node.spawn(self._replay(loop_id))

    async def _replay(self, loop_id: str) -> None:
        self._signalled.discard(loop_id)  # admissions from now on are covered by this replay's read or the next
        try:
            await self.node.replay(loop_id)
        except StoreUnavailable as exc:
            log.warning("delivery to %s deferred to the reconciler: %s", loop_id, exc.message)


def _returned(rows: Any) -> dict[str, float | None]:
    """What a limiter's ``Staged.statement`` returned: bucket → level (None: created by it)."""
    return {str(r.key): None if r.level is None else float(r.level) for r in rows}


def _limited(per_min: int, wait: float) -> RateLimited:
    return RateLimited(f"too many events ({per_min} per minute); retry later", retry_after_s=wait)


def _accepted(event_id: str, duplicate: bool, mismatch: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {"status": "accepted", "event_id": event_id, "duplicate": duplicate}
    if mismatch:
        answer["payload_mismatch"] = True
    return answer


# issue 16 (event → wake on PostgreSQL): an admission held its Loop rows FOR UPDATE until its commit, so the guest's
# ack of the event before it (a lane of its own, beside the admissions) waited for that commit too, and only then
# could the guest take the new event: in the bench's wake step the low event's ack queued on the row lock for the
# whole of the high event's admission. Now an admission shares the rows (FOR SHARE: a transition's UPDATE still
# waits for it, and it for the transition), as an ack does, and admissions of one Loop exclude each other with a
# transaction advisory lock keyed on the Loop, taken row by row in id order just before the row's own lock (the
# lock order: wakeful.intake:<id>, then the row, by id). A batch whose rows the group commit locked FOR UPDATE
# ahead (``store.group``) holds them exclusively already and takes no advisory lock.
_INTAKE_LOCK_SQL = "pg_advisory_xact_lock(('x' || substr(md5('wakeful.intake:' || loop.id), 1, 16))::bit(64)::bigint)"


def _lock_for_admission(tx: Tx, lock: sa.Select[Any]) -> sa.Select[Any]:
    if tx.dialect != "postgresql" or tx.shared.get(LOCKED_AHEAD):
        return tx.for_update(lock)
    return tx.for_share(lock.add_columns(sa.literal_column(_INTAKE_LOCK_SQL).label("wakeful_intake_lock")))


# issue 16 (event → wake, PostgreSQL round trips): the figures an admission batch checks — the stored payloads of
# its (Loop, event id) pairs (§10.2 step 3), the Loops' pending events (step 4), the groups' pending bytes (step 5)
# and the Loops' newest received_ms in each status (the admission order) — read by one statement, a UNION ALL of the
# four reads tagged by kind, instead of four statements (four round trips) one after the other. Read after the Loop
# rows are locked, in a snapshot of its own (READ COMMITTED): what a concurrent admission committed is seen.
_KNOWN, _PENDING, _BACKLOG, _LAST = 0, 1, 2, 3


def _figures_stmt() -> sa.Select[Any]:
    """``_batch_figures``'s statement on SQLite, built once (issue 16: built per batch it was 7 % of a node's
    samples in the bench's wake step). The pairs and the Loops are each one JSON array parameter read with
    ``json_each`` (issue 16, ingest): as expanding lists, ``(loop_id, event_id) IN (VALUES (?, ?), …)`` was
    planned as a scan of every stored event (SQLite uses no index for a row value IN a VALUES list) — an
    admission batch's cost grew with the store — and SQLAlchemy rendered the statement's text again on every
    execution; now each read searches the primary key or ``loop_event_pending``. The groups stay an expanding
    list (one group, mostly): as a ``json_each`` the backlog read was planned over every active Loop. A Loop's
    newest received_ms is one row per Loop, the largest of three ``max`` (one index probe per status: SQLite's
    min/max optimisation; NULL without events), not a ``GROUP BY`` per status, which walked every acked event
    of each Loop."""
    text, num = sa.String, sa.BigInteger
    each = json_table("live")
    pairs: Any = json_rows("pairs", 0, 1)
    live: Any = json_rows("live")
    groups: Any = sa.bindparam("groups", expanding=True)  # (one group, mostly; as a json_each the backlog read
    # was planned over every active Loop of the store)

    def tagged(kind: int, loop_id: Any, event_id: Any, label: Any, n: Any) -> sa.Select[Any]:
        columns: list[Any] = [sa.literal_column(str(kind), sa.Integer).label("kind"),
                              sa.cast(loop_id, text).label("loop_id"), sa.cast(event_id, text).label("event_id"),
                              sa.cast(label, text).label("label"), sa.cast(n, num).label("n")]
        return sa.select(*columns)

    reads = [
        tagged(_KNOWN, E.c.loop_id, E.c.event_id, E.c.payload_sha256, 0).where(
            sa.tuple_(E.c.loop_id, E.c.event_id).in_(pairs)),
        tagged(_PENDING, E.c.loop_id, E.c.event_id, None, E.c.received_ms).where(
            E.c.loop_id.in_(live), E.c.status == "pending"),
        tagged(_BACKLOG, None, None, E.c.group_id, sa.func.coalesce(sa.func.sum(E.c.envelope_bytes), 0)).select_from(
            E.join(L, L.c.id == E.c.loop_id)).where(
            E.c.group_id.in_(groups), E.c.status == "pending", L.c.state == lc.ACTIVE).group_by(E.c.group_id),
        tagged(_LAST, each.c.value, None, None, sa.func.nullif(sa.func.max(*(sa.func.coalesce(
            sa.select(sa.func.max(E.c.received_ms)).where(E.c.loop_id == each.c.value, E.c.status == status)
            .scalar_subquery(), -1) for status in ("pending", "acked", "discarded"))), -1)).select_from(each),
    ]
    union = sa.union_all(*reads).subquery("figures")
    return sa.select(union).order_by(union.c.kind, union.c.loop_id, union.c.n, union.c.event_id)


_FIGURES = _figures_stmt()


async def _batch_figures(tx: Tx, pairs: list[tuple[str, str]], group_ids: list[str],
                         pending: dict[str, list[str]]) -> tuple[dict[tuple[str, str], str], dict[str, int],
                                                                 dict[str, int]]:
    """(known payload digests, pending bytes per group, newest received_ms per Loop); ``pending`` (its keys: the
    live Loops) is filled in, oldest first."""
    known: dict[tuple[str, str], str] = {}
    backlog: dict[str, int] = {}
    last: dict[str, int] = {}
    params = {"pairs": json_list(pairs), "live": json_list(sorted(pending)), "groups": group_ids}
    for r in await tx.execute(_FIGURES, params):
        if r.kind == _KNOWN:
            known[(r.loop_id, r.event_id)] = r.label
        elif r.kind == _PENDING:
            pending[r.loop_id].append(r.event_id)  # (oldest first)
        elif r.kind == _BACKLOG:
            backlog[r.label] = int(r.n)
        elif r.n is not None:
            last[r.loop_id] = max(int(r.n), last.get(r.loop_id, int(r.n)))
    return known, backlog, last


async def _lock_loops(tx: Tx, loop_ids: list[str]) -> dict[str, Any]:
    """The batch's Loop rows, locked in id order (PostgreSQL: shared, with the Loop's intake lock, as
    ``_lock_for_admission`` says), read with the transaction's store clock
    (``Tx.clock_column``: no statement of its own for it); the ids are one array parameter on PostgreSQL and one
    JSON parameter on SQLite, so the statement has one text whatever the batch's size, its prepared statement is
    reused, and it is built once (issue 16)."""
    clock = tx.clock_column()
    if tx.dialect == "postgresql":
        rows = list(await tx.execute(_lock_stmt_pg(tx, clock), {"ids": loop_ids}))
    else:  # (SQLite: no clock column, no row lock; the ids one JSON parameter, the statement built once)
        rows = list(await tx.execute(_LOCK_SQLITE, {"ids": json_list(loop_ids)}))
    if rows:
        tx.seed_now(rows[0])
    return {r.id: r for r in rows}


_TEXTS = pg_dialect.ARRAY(sa.String)
_LOCK_COLUMNS = (L.c.id, L.c.group_id, L.c.agent_id, L.c.webhook_secret_sha256, L.c.state, L.c.pause_reason,
                 L.c.incarnation)
_LOCK_SQLITE = sa.select(*_LOCK_COLUMNS).where(L.c.id.in_(json_rows("ids"))).order_by(L.c.id)
# issue 16 (ingest on PostgreSQL): the batch's statements are built once (``reads.built_once``) and run with their
# bind values — built per batch, they and the cache keys SQLAlchemy derives from each new statement object were ~8 %
# of the node's CPU in the bench's ingest step (the lock, the reads with the bucket CTEs, the insert)


def _lock_stmt_pg(tx: Tx, clock: sa.ColumnElement[Any] | None) -> sa.Select[Any]:
    """``_lock_loops``'s statement on PostgreSQL (ids: the array parameter ``ids``), one per form
    ``_lock_for_admission`` gives it (the batch's rows locked ahead or not) and per clock column (or none)."""
    def build() -> sa.Select[Any]:
        columns = [*_LOCK_COLUMNS, *([] if clock is None else [clock])]
        where = L.c.id == sa.any_(sa.bindparam("ids", type_=_TEXTS))
        return _lock_for_admission(tx, sa.select(*columns).where(where).order_by(L.c.id))

    clocked, ahead = "+clock" if clock is not None else "", "+ahead" if tx.shared.get(LOCKED_AHEAD) else ""
    return built_once(f"intake.lock{clocked}{ahead}", build)


_INSERT_SQLITE = sqlite_dialect.insert(E).on_conflict_do_nothing()
# issue 16 (PostgreSQL ingest, pg-ingest): a batch's new events are one INSERT … SELECT of the columns as array
# parameters (``unnest``), not one execution per row (asyncpg's executemany: a Bind and Execute per event, each
# planned again by the server with ``plan_cache_mode = force_custom_plan``); the rows, their order and ON CONFLICT DO
# NOTHING are the same, and the statement text is the same for every batch (one prepared statement)
_INSERT_COLUMNS = ("loop_id", "event_id", "group_id", "topic", "payload", "payload_sha256", "envelope_bytes",
                   "status", "source", "received_ms", "first_delivered_ms", "deadline_ms")


def _insert_pg() -> Any:
    arrays = [sa.bindparam(c, type_=pg_dialect.ARRAY(E.c[c].type)) for c in _INSERT_COLUMNS]
    rows = sa.func.unnest(*arrays).table_valued(*_INSERT_COLUMNS).render_derived(name="r", with_types=False)
    return pg_dialect.insert(E).from_select(list(_INSERT_COLUMNS), sa.select(*rows.c)).on_conflict_do_nothing()


_INSERT_PG = _insert_pg()


async def _batch_reads_pg(tx: Tx, pairs: list[tuple[str, str]], live: list[str], group_ids: list[str],
                          known: dict[tuple[str, str], str], pending: dict[str, list[str]], backlog: dict[str, int],
                          last: dict[str, int], plan: Staged | None = None) -> dict[str, float | None] | None:
    """``_batch_figures`` as one statement on PostgreSQL (issue 16: four round trips were four statements), its
    lists array parameters so that its text (and prepared statement) is the same for every batch; the newest
    acked or discarded event of a Loop is one index probe each (``max`` per Loop, not per batch). ``plan``: the
    limiter's staged bucket checks, whose ``parts`` (the buckets' insert and update) run as CTEs of the same
    statement (one more round trip saved) → what they returned (None without a plan)."""
    params: dict[str, Any] = {"pair_loops": [x[0] for x in pairs], "pair_events": [x[1] for x in pairs],
                              "live": live, "groups": group_ids}
    returned: dict[str, float | None] | None = None
    if plan is not None:
        params.update(plan.params)
        returned = {}
    waiting: dict[str, list[tuple[int, str]]] = {}
    for r in await tx.execute(_reads_stmt_pg(None if plan is None else plan.parts), params):
        if r.kind == 4:
            assert returned is not None
            returned[str(r.a)] = None if r.f is None else float(r.f)
        elif r.kind == 0:
            known[(r.a, r.b)] = r.c
        elif r.kind == 1:
            waiting.setdefault(r.a, []).append((int(r.n), r.b))
        elif r.kind == 2:
            backlog[r.a] = int(r.n)
        elif r.n is not None:
            last[r.a] = max(int(r.n), last.get(r.a, int(r.n)))
    for loop_id, events in waiting.items():
        events.sort()  # (received_ms, event_id): the delivery order
        pending[loop_id].extend(e for _, e in events)
        newest_pending = events[-1][0]
        last[loop_id] = max(newest_pending, last.get(loop_id, newest_pending))
    return returned


def _reads_stmt_pg(parts: tuple[Any, Any] | None) -> Any:
    """``_batch_reads_pg``'s statement (bind parameters ``pair_loops``, ``pair_events``, ``live``, ``groups`` and
    the parts' own), built once per bucket statement (the limiter builds its parts once)."""
    key = "intake.reads" if parts is None else f"intake.reads+parts.{id(parts[0])}.{id(parts[1])}"
    return built_once(key, lambda: (_build_reads_pg(parts), parts))[0]  # (the parts kept: their ids stay theirs)


# issue 16 (pg-ingest): the group's pending bytes join each pending event to its Loop row, whose state is a filter
# (``reads.likely``: ``IS TRUE``). As ``state = 'active'`` with statistics of a smaller store (ANALYZE while ``loop``
# held a few rows; a create burst outgrows them) the join went through ``loop_state_updated``: every active Loop read
# once per pending event of the group, per batch (EXPLAIN ANALYZE in the bench's ingest at N = 1,000: ~27,000 rows,
# 23–38 ms of the server per batch)
def _build_reads_pg(parts: tuple[Any, Any] | None) -> Any:
    live_p = sa.bindparam("live", type_=_TEXTS)
    no_text, no_int = sa.cast(sa.null(), sa.String), sa.cast(sa.null(), sa.BigInteger)
    no_float = sa.cast(sa.null(), sa.Float)
    p = sa.func.unnest(sa.bindparam("pair_loops", type_=_TEXTS),
                       sa.bindparam("pair_events", type_=_TEXTS)).table_valued(
        "l", "e").render_derived(name="p", with_types=False)
    u = sa.func.unnest(live_p).table_valued("l").render_derived(name="u", with_types=False)

    def newest(status: str) -> Any:
        return sa.select(sa.func.max(E.c.received_ms)).where(E.c.loop_id == u.c.l,
                                                              E.c.status == status).scalar_subquery()

    # each pair's stored event by its key, one probe per pair: a LATERAL subquery with a LIMIT is not flattened into
    # a join, so the planner cannot take a hash join over a scan of every stored event (pg-ingest: with statistics of
    # a smaller ``loop_event`` it did, per batch — 2,368 rows read for 30 pairs in the bench's ingest at N = 1,000,
    # a read that grows with the store)
    k = sa.select(E.c.loop_id, E.c.event_id, E.c.payload_sha256).where(
        E.c.loop_id == p.c.l, E.c.event_id == p.c.e).limit(sa.literal_column("1")).lateral("k")
    members: list[Any] = [
        sa.select(sa.literal(0).label("kind"), k.c.loop_id.label("a"), k.c.event_id.label("b"),
                  k.c.payload_sha256.label("c"), no_int.label("n"), no_float.label("f")).select_from(
            p.join(k, sa.true())),
        sa.select(sa.literal(1), E.c.loop_id, E.c.event_id, no_text, E.c.received_ms, no_float).where(
            E.c.loop_id == sa.any_(live_p), E.c.status == "pending"),
        sa.select(sa.literal(2), E.c.group_id, no_text, no_text,
                  sa.cast(sa.func.coalesce(sa.func.sum(E.c.envelope_bytes), 0), sa.BigInteger), no_float).select_from(
            E.join(L, L.c.id == E.c.loop_id)).where(
            E.c.group_id == sa.any_(sa.bindparam("groups", type_=_TEXTS)), E.c.status == "pending",
            likely(L.c.state == lc.ACTIVE)).group_by(E.c.group_id),  # (pg-ingest: a filter on the event's Loop)
        sa.select(sa.literal(3), u.c.l, no_text, no_text, sa.func.greatest(newest("acked"), newest("discarded")),
                  no_float),
    ]
    if parts is not None:
        created, taken = parts[0].cte("bucket_new"), parts[1].cte("buckets")
        members.append(sa.select(sa.literal(4), taken.c.key, no_text, no_text, no_int, taken.c.level))
        members.append(sa.select(sa.literal(4), created.c.key, no_text, no_text, no_int, no_float))
    return sa.union_all(*members)


# the newest received_ms of the Loop's events in any status (one index probe per status)
async def _last_received(tx: Tx, loop_id: str) -> int | None:
    probes = [sa.select(sa.func.max(E.c.received_ms)).where(E.c.loop_id == loop_id, E.c.status == status)
              .scalar_subquery() for status in ("pending", "acked", "discarded")]
    found = [v for v in (await tx.execute(sa.select(*probes))).one() if v is not None]
    return max(int(v) for v in found) if found else None


# §10.2 step 5: pending bytes (as delivered) of the group's active Loops
async def _group_backlog(tx: Tx, group_id: str) -> int:
    stmt = sa.select(sa.func.coalesce(sa.func.sum(E.c.envelope_bytes), 0)).select_from(
        E.join(L, L.c.id == E.c.loop_id)).where(
        E.c.group_id == group_id, E.c.status == "pending", L.c.state == lc.ACTIVE)
    return int((await tx.execute(stmt)).scalar_one())
