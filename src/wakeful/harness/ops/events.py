"""Event operations (interfaces.md §2.2 "Loops", harness.md §10, §12): the page of a Loop's events, retry and
discard of pending events, and handing an event to a Loop.

``events.send`` in process is the third intake path of harness.md §10.5 (``loop.send``: source ``send`` for an
agent, ``operator`` for the operator's command line; no buckets); over HTTP it is intake route 1, whose route
runs the §10.3 steps in their order with :func:`open_intake`, :func:`parse_body` and :func:`admit_body`. Both
answer ``{status: "accepted", event_id, duplicate[, payload_mismatch]}``.

The webhook intake (route 2, unauthenticated) is :func:`open_webhook` and :func:`deliver_webhook`: the route reads
the body between them (its bound depends on the Loop's verifier).

The operator's command line names a Loop by id alone: ``group_id=None`` is accepted from an unscoped admin
principal (the operator) in process, never over HTTP (a path parameter is always a group).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from wakeful.harness.errors import InvalidEvent, NotFound, StoreUnavailable
from wakeful.harness.ops.scope import loop_in_scope
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import require_admin
from wakeful.harness.views import loop_objects

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal
    from wakeful.harness.ratelimit import Deferred
    from wakeful.harness.webhook_verify import Headers, Verifier

__all__ = [
    "BODY_KEYS", "DELIVERY_HEADERS", "WEBHOOK_LIMIT", "WebhookTarget", "admit_body", "deliver_webhook", "discard",
    "list_events", "open_intake", "open_webhook", "parse_body", "refuse_while_draining", "retry", "send",
]

BODY_KEYS = frozenset({"event_id", "topic", "payload"})  # §10.1: the body of route 1
DELIVERY_HEADERS = ("webhook-id", "x-github-delivery")  # §10.1, in this order
WEBHOOK_LIMIT = 16_384  # §10.4 step 5


async def _scoped(harness: Harness, principal: Principal, group_id: str | None, loop_id: str) -> None:
    """The Loop is in scope: in ``group_id`` (and the agent's own), or — ``group_id=None`` — any Loop for the
    operator (the owning lookup then happens inside the harness call, in its usual order)."""
    if group_id is None:
        require_admin(principal)
        if principal.agent_id is not None or principal.group_id is not None:
            raise NotFound(f"Loop {loop_id[:40]} not found")
        return
    await loop_in_scope(harness, principal, group_id, loop_id)


@operation("events.list")
async def list_events(harness: Harness, principal: Principal, *, group_id: str | None, loop_id: str,
                      limit: int = 50, cursor: str | None = None, status: str | None = None,
                      payloads: bool = False) -> dict[str, Any]:
    """A page of the Loop's events (pending and recently settled), in delivery order, with the pending count."""
    await _scoped(harness, principal, group_id, loop_id)
    listed = await harness.events(loop_id, "list", include_payloads=bool(payloads), status=status, limit=limit,
                                  cursor=cursor or None)
    return {"items": listed.get("events", []), "next_cursor": listed.get("next_cursor"),
            "pending_count": listed.get("pending_count")}


@operation("events.retry")
async def retry(harness: Harness, principal: Principal, *, group_id: str | None, loop_id: str,
                event_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """``{retried, loop}``: the named (or every) pending event gets a fresh incarnation; ``loop`` is the Loop."""
    await _scoped(harness, principal, group_id, loop_id)
    out = await harness.events(loop_id, "retry", event_ids=event_ids, actor=principal.actor)
    if isinstance(out.get("loop"), dict):
        out["loop"] = (await loop_objects(harness, [out["loop"]]))[0]
    return out


@operation("events.discard")
async def discard(harness: Harness, principal: Principal, *, group_id: str | None, loop_id: str,
                  event_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """``{discarded}``: the named (or every) pending event is discarded; its id stays known for dedup."""
    await _scoped(harness, principal, group_id, loop_id)
    return await harness.events(loop_id, "discard", event_ids=event_ids, actor=principal.actor)


@operation("events.send")
async def send(harness: Harness, principal: Principal, *, group_id: str | None, loop_id: str, topic: Any,
               payload: Any = None, event_id: Any = None) -> dict[str, Any]:
    """§10.5: admit one event as the caller (the normalisation and admission of the intake routes)."""
    if group_id is not None and not principal.covers_group(group_id):
        raise NotFound("no such Loop")
    if group_id is None:
        await _scoped(harness, principal, None, loop_id)
    source = "send" if principal.agent_id is not None or not principal.operator else "operator"
    return await harness.intake.admit(loop_id=loop_id, topic=topic, payload=payload, event_id=event_id,
                                      source=source, group_id=group_id, agent_id=principal.agent_id)


# ---------------------------------------------------------------------- intake route 1, step by step (§10.3)


def refuse_while_draining(harness: Harness) -> None:
    """harness.md §19.4: a draining cluster node stops accepting intake — ``503 unavailable`` before any other
    check (interfaces.md §2.1 "node draining"); the client retries on another node."""
    placement = harness.node.placement
    if placement is not None and not placement.accepting:
        raise StoreUnavailable("this node is draining; send the event to another node")


async def open_intake(harness: Harness, principal: Principal, group_id: str, deferred: Deferred | None = None) -> None:
    """Steps 2–3: the key's scope covers the group; the global bucket (noted in ``deferred`` when given: taken by
    the admission's transaction, or by ``Intake.settle`` when the request is answered before it)."""
    if not principal.covers_group(group_id):
        raise NotFound("no such Loop")
    await harness.intake.take_global(deferred)


def parse_body(harness: Harness, raw: bytes, *, route: Literal["group", "webhook"]) -> dict[str, Any]:
    """Steps 6 / 7: the body as one JSON object."""
    return harness.intake.parse_body(raw, route=route)


async def admit_body(harness: Harness, principal: Principal, *, group_id: str, loop_id: str,
                     body: Mapping[str, Any], idempotency_keys: Sequence[str] = (),
                     deferred: Deferred | None = None) -> dict[str, Any]:
    """Steps 7–10: the Loop in scope, its bucket, the body's fields (§10.1), admission (§10.2)."""
    intake = harness.intake
    await intake.loop_in_scope(group_id, loop_id, principal.agent_id)  # 7
    await intake.take_loop(loop_id, deferred)  # 8
    extra = sorted(str(key) for key in body if key not in BODY_KEYS)  # 9 (§10.1)
    if extra:
        raise InvalidEvent(f"unknown field {extra[0][:64]!r}; the body is {{event_id?, topic, payload?}}",
                           field=extra[0][:64])
    topic: Any = body.get("topic")  # U+0000 and the other §10.1 rules: the harness's normalisation (every path)
    return await intake.admit(loop_id=loop_id, topic=topic, payload=body.get("payload"),
                              event_id=body.get("event_id"), idempotency_keys=list(idempotency_keys),
                              source="api", group_id=group_id, deferred=deferred)  # 10


# ---------------------------------------------------------------------- intake route 2 (§10.4, issue 19)


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    """The Loop a webhook secret names, its digest, and the Loop's verifier (None: unsigned JSON)."""

    loop_id: str
    digest: str
    verifier: Verifier | None
    now_ms: int
    deferred: Deferred | None = None  # its bucket checks, for the admission's transaction (open_webhook)

    @property
    def body_limit(self) -> int:
        """Step 5's bound: 16 KiB, or 1 MiB when the verifier maps fields."""
        return WEBHOOK_LIMIT if self.verifier is None else self.verifier.body_limit(WEBHOOK_LIMIT)


async def open_webhook(harness: Harness, secret: str, deferred: Deferred | None = None) -> WebhookTarget:
    """Steps 1–4: the global bucket, the secret's shape and digest, the Loop's bucket; then its verifier.
    ``deferred``: the buckets are noted there (as ``open_intake``)."""
    from wakeful.harness import verifiers

    intake = harness.intake
    await intake.take_global(deferred)  # 1
    loop_id, digest = await intake.resolve_webhook(secret)  # 2, 3
    await intake.take_loop(loop_id, deferred)  # 4
    verifier, now_ms = await verifiers.load(harness.store, loop_id)
    return WebhookTarget(loop_id, digest, verifier, now_ms, deferred)


async def deliver_webhook(harness: Harness, target: WebhookTarget, *, raw: bytes,
                          headers: Headers, json_checked: Callable[[], None]) -> tuple[int, dict[str, Any]]:
    """Steps 5½–9 after the bounded read: the signature (401, before anything is stored), the content type
    (``json_checked()`` raises ``json_required``), the JSON object, the delivery id, admission.

    Answers ``(status, body)``: ``200 {challenge}`` for Slack's url_verification, else ``202`` and the admission's answer."""
    from wakeful.harness import webhook_verify

    verifier = target.verifier
    if verifier is not None:
        webhook_verify.verify(verifier, headers, raw, target.now_ms)
    json_checked()  # 6
    body: Any = harness.intake.parse_body(raw, route="webhook")  # 7
    topic, event_id, payload = "webhook", None, body
    if verifier is not None:  # the provider's delivery id, event type and (mapped) payload
        delivery = webhook_verify.describe(verifier, headers, body)
        if delivery.challenge is not None:  # Slack's url_verification: answered, never stored
            return 200, {"challenge": delivery.challenge}
        topic, event_id, payload = delivery.topic, delivery.event_id, delivery.payload
    ids = [v for name in DELIVERY_HEADERS for v in headers.getlist(name)]
    answer = await harness.intake.admit(loop_id=target.loop_id, topic=topic, payload=payload, event_id=event_id,
                                        idempotency_keys=headers.getlist("idempotency-key"),
                                        delivery_ids=ids, source="webhook", secret_sha256=target.digest,
                                        deferred=target.deferred)  # 8, 9
    return 202, answer
