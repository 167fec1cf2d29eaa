"""Event intake (harness.md §10, §14): rate-limit buckets, webhook secret resolution, scope checks, strict body
parsing, and durable admission of one event in one transaction with the Loop row locked.

The HTTP routes (``wakeful.api``) and ``loop.send`` call these in the order §10.3 / §10.4 prescribe; after a
commit the node holding the Loop is signalled so delivery does not wait for the reconciler (§10.2).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa

from wakeful.harness import eventbody
from wakeful.harness import lifecycle as lc
from wakeful.harness.errors import (
    GroupBacklogFull,
    LoopMailboxFull,
    LoopNotActive,
    NotFound,
    RateLimited,
    StoreUnavailable,
)
from wakeful.harness.ratelimit import Limiter, LocalLimiter, global_bucket, loop_bucket
from wakeful.harness.store import loops, schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.ids import lookup_text

if TYPE_CHECKING:
    from wakeful.harness.node import Node

__all__ = ["MAILBOX_RETRY_S", "BACKLOG_RETRY_S", "SOURCES", "Intake", "secret_digest", "secret_shape_ok"]

log = logging.getLogger("wakeful.harness")

E, L = schema.loop_event, schema.loop
MAILBOX_RETRY_S = 5  # §10.2 step 4
BACKLOG_RETRY_S = 30  # §10.2 step 5
SOURCES = ("api", "webhook", "send", "operator")  # §2.6
_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")  # §10.4 step 2: 43 chars of the URL-safe base64 alphabet


def secret_shape_ok(secret: object) -> bool:
    """§10.4 step 2, decided without any store access."""
    return isinstance(secret, str) and _SECRET.fullmatch(secret) is not None


def secret_digest(secret: str) -> str:
    """Hex SHA-256 of a webhook secret: the only form in which it is stored (§13)."""
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


class Intake:
    """Event intake of one node (``Harness.intake``). ``limiter`` defaults to in-process buckets on the node's
    monotonic clock; a cluster passes a shared one."""

    def __init__(self, node: Node, *, limiter: Limiter | None = None) -> None:
        self.node = node
        self.limiter: Limiter = limiter or LocalLimiter(node.clock)
        self._signalled: set[str] = set()
        # called with the Loop id after each commit of a new event (a cluster NOTIFYs the lease holder, §10.2)
        self.admitted_hooks: list[Callable[[str], Any]] = []

    # ------------------------------------------------------------------ §14 rate limits

    async def take_global(self) -> None:
        """Bucket ``ingress:global`` (6,000 per minute); checked before any secret or Loop lookup.
        Raises ``RateLimited`` (``retry_after_s``) or ``StoreUnavailable`` (a shared limiter that is down)."""
        per_min = self.node.config.limits.ingress_global_per_min
        await self._take(global_bucket(), per_min)

    async def take_loop(self, loop_id: str) -> None:
        """Bucket ``ingress:loop:<id>`` (60 per minute), keyed by Loop id, never by secret; duplicates count."""
        per_min = self.node.config.limits.ingress_per_loop_per_min
        await self._take(loop_bucket(loop_id), per_min)

    async def _take(self, bucket: str, per_min: int) -> None:
        wait = await self.limiter.take(bucket, float(per_min), per_min / 60.0)
        if wait is not None:
            raise RateLimited(f"too many events ({per_min} per minute); retry later", retry_after_s=wait)

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
        async with self.node.store.tx(readonly=True) as tx:
            stmt = sa.select(L.c.group_id, L.c.agent_id).where(L.c.id == loop_id)
            row = (await tx.execute(stmt)).first()
        if row is None or row.group_id != group_id or (agent_id is not None and row.agent_id != agent_id):
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
    ) -> dict[str, Any]:
        """§10.1 normalisation, then §10.2 admission in one transaction with the Loop row locked.

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
        async with self.node.store.tx() as tx:
            answer = await self._admit(tx, loop_id, event, source, secret_sha256, group_id, agent_id)
        if not answer["duplicate"]:
            self.signal(loop_id)
            for hook in list(self.admitted_hooks):
                try:
                    hook(loop_id)
                except Exception:
                    log.exception("admission hook failed for %s", loop_id)
        return answer

    async def _admit(self, tx: Tx, loop_id: str, event: eventbody.NormalEvent, source: str,
                     secret_sha256: str | None, group_id: str | None, agent_id: str | None) -> dict[str, Any]:
        row = await loops.find_loop(tx, loop_id, for_update=True)
        if (row is None or (group_id is not None and row.group_id != group_id)
                or (agent_id is not None and row.agent_id != agent_id)
                or (secret_sha256 is not None and row.webhook_secret_sha256 != secret_sha256)):
            raise NotFound("no such Loop")  # step 1: also a secret rotated or revoked meanwhile
        if row.state != lc.ACTIVE:  # step 2
            raise LoopNotActive(f"Loop {loop_id} is {row.state}", state=row.state, pause_reason=row.pause_reason)
        known = (await tx.execute(sa.select(E.c.payload_sha256).where(
            E.c.loop_id == loop_id, E.c.event_id == event.event_id))).first()
        if known is not None:  # step 3: any status; the stored payload is kept
            return _accepted(event.event_id, True, known.payload_sha256 != event.payload_sha256)
        limits = self.node.config.limits
        pending = (await tx.execute(sa.select(sa.func.count().label("n"))
                                    .where(E.c.loop_id == loop_id, E.c.status == "pending"))).one()
        if int(pending.n) >= limits.pending_events:  # step 4
            raise LoopMailboxFull(f"Loop {loop_id} already holds {limits.pending_events} pending events",
                              retry_after_s=MAILBOX_RETRY_S)
        backlog = await _group_backlog(tx, row.group_id)
        if backlog + event.envelope_bytes > limits.group_backlog_bytes:  # step 5
            raise GroupBacklogFull(f"the group's pending events would exceed {limits.group_backlog_bytes} bytes",
                                   retry_after_s=BACKLOG_RETRY_S)
        now = await tx.now_ms()
        last = await _last_received(tx, loop_id)
        received = now if last is None or now > last else last + 1  # admission order = delivery order
        inserted = await tx.insert_if_absent(E, {
            "loop_id": loop_id, "event_id": event.event_id, "group_id": row.group_id, "topic": event.topic,
            "payload": event.payload_text, "payload_sha256": event.payload_sha256,
            "envelope_bytes": event.envelope_bytes, "status": "pending", "source": source, "received_ms": received,
        })
        return _accepted(event.event_id, not inserted, False)  # step 6

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
        if loop_id not in self.node.residents and self.node.placement is not None:
            self.node.placement.admitted(loop_id)  # cluster: NOTIFY wakeful_events, the lease holder delivers
            return
        if loop_id not in self.node.residents or loop_id in self._signalled:
            return
        self._signalled.add(loop_id)
        self.node.spawn(self._replay(loop_id))

    async def _replay(self, loop_id: str) -> None:
        self._signalled.discard(loop_id)  # admissions from now on are covered by this replay's read or the next
        try:
            await self.node.replay(loop_id)
        except StoreUnavailable as exc:
            log.warning("delivery to %s deferred to the reconciler: %s", loop_id, exc.message)


def _accepted(event_id: str, duplicate: bool, mismatch: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {"status": "accepted", "event_id": event_id, "duplicate": duplicate}
    if mismatch:
        answer["payload_mismatch"] = True
    return answer


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
