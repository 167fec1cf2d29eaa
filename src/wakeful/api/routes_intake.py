"""The two event intake routes (harness.md §10.3, §10.4), each checking in exactly the order of the spec:

route 1 ``POST G/loops/{loop_id}/events``: auth → scope → global bucket → bounded read (64 KiB) → content type →
JSON object → Loop in scope → per-Loop bucket → §10.1 → §10.2;
route 2 ``POST /v1/loop-webhooks/{secret}``: global bucket → secret shape → secret digest → per-Loop bucket →
bounded read (16 KiB; 1 MiB when the Loop's verifier maps fields) → the verifier's signature check (401, issue 19)
→ content type → JSON object → event id → §10.2. Every webhook answer is ``no-store``.
"""

from __future__ import annotations

from typing import Any, cast

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from wakeful.api.auth import authenticate
from wakeful.api.body import read_bounded, require_json
from wakeful.api.context import harness_of
from wakeful.harness import verifiers, webhook_verify
from wakeful.harness.errors import InvalidEvent, NotFound, StoreUnavailable

__all__ = ["router"]

router = APIRouter(tags=["event intake"])
GROUP_LIMIT = 65_536  # §10.3 step 4
WEBHOOK_LIMIT = 16_384  # §10.4 step 5
BODY_KEYS = frozenset({"event_id", "topic", "payload"})
DELIVERY_HEADERS = ("webhook-id", "x-github-delivery")  # §10.1, in this order

_ACCEPTED: dict[str, Any] = {"description": "committed to the store (or already known: `duplicate: true`)", "content": {
    "application/json": {"schema": {"type": "object", "required": ["status", "event_id", "duplicate"], "properties": {
        "status": {"const": "accepted"}, "event_id": {"type": "string"}, "duplicate": {"type": "boolean"},
        "payload_mismatch": {"type": "boolean"}}}}}}
_ERRORS: dict[int | str, dict[str, Any]] = {str(code): {"description": text, "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/Error"}}}} for code, text in (
    (400, "invalid_json / json_object_required / invalid_event (+field)"), (401, "unauthorized"),
    (404, "not_found"), (409, "loop_not_active (+state, pause_reason)"), (413, "payload_too_large"),
    (415, "json_required"), (429, "rate_limited / mailbox_full / group_backlog_full, with Retry-After"),
    (503, "unavailable"))}
_WEBHOOK_ERRORS = {**_ERRORS, "401": {"description": "unauthorized: the Loop's webhook verifier refused the "
                                      "signature or its timestamp (nothing was stored)",
                                      "content": _ERRORS["401"]["content"]}}
_CHALLENGE: dict[str, Any] = {"description": "Slack url_verification (signed): the challenge, nothing stored",
                              "content": {"application/json": {"schema": {"type": "object", "required": ["challenge"],
                                                                          "properties": {"challenge": {"type": "string"}}}}}}
_GROUP_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["topic"], "additionalProperties": False, "properties": {
        "event_id": {"type": "string", "minLength": 1, "maxLength": 128},
        "topic": {"type": "string", "minLength": 1, "maxLength": 128},
        "payload": {}}}}}}}
_WEBHOOK_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}}


def _refuse_while_draining(request: Request) -> None:
    """harness.md §19.4: a draining cluster node stops accepting intake — ``503 unavailable`` before any other
    check (interfaces.md §2.1 "node draining"); the client retries on another node."""
    placement = harness_of(request).node.placement
    if placement is not None and not placement.accepting:
        raise StoreUnavailable("this node is draining; send the event to another node")


def _idempotency_keys(request: Request) -> list[str]:
    return request.headers.getlist("idempotency-key")


@router.post("/v1/agent-groups/{group_id}/loops/{loop_id}/events", status_code=202, response_model=None,
             summary="Hand an event to a Loop (group or agent key); 202 means it is durably kept",
             responses={202: _ACCEPTED, **_ERRORS}, openapi_extra=_GROUP_BODY)
async def post_event(group_id: str, loop_id: str, request: Request) -> JSONResponse:
    _refuse_while_draining(request)
    principal = await authenticate(request)  # 1
    if not principal.covers_group(group_id):  # 2
        raise NotFound("no such Loop")
    intake = harness_of(request).intake
    await intake.take_global()  # 3
    raw = await read_bounded(request, GROUP_LIMIT)  # 4
    require_json(request)  # 5
    body = intake.parse_body(raw, route="group")  # 6
    await intake.loop_in_scope(group_id, loop_id, principal.agent_id)  # 7
    await intake.take_loop(loop_id)  # 8
    extra = sorted(str(key) for key in body if key not in BODY_KEYS)  # 9 (§10.1)
    if extra:
        raise InvalidEvent(f"unknown field {extra[0][:64]!r}; the body is {{event_id?, topic, payload?}}",
                           field=extra[0][:64])
    topic = body.get("topic")  # U+0000 and the other §10.1 rules: the harness's normalisation (every path)
    answer = await intake.admit(loop_id=loop_id, topic=cast(Any, topic), payload=body.get("payload"),
                                event_id=body.get("event_id"), idempotency_keys=_idempotency_keys(request),
                                source="api", group_id=group_id)  # 10
    return JSONResponse(answer, status_code=202)


@router.post("/v1/loop-webhooks/{secret}", status_code=202, response_model=None,
             summary="Secret webhook: any JSON object becomes a `webhook` event of the Loop (no Authorization)",
             responses={202: _ACCEPTED, 200: _CHALLENGE, **_WEBHOOK_ERRORS},
             openapi_extra=_WEBHOOK_BODY)
async def post_webhook(secret: str, request: Request) -> JSONResponse:
    _refuse_while_draining(request)
    intake = harness_of(request).intake
    await intake.take_global()  # 1
    loop_id, digest = await intake.resolve_webhook(secret)  # 2, 3
    await intake.take_loop(loop_id)  # 4
    verifier, now_ms = await verifiers.load(harness_of(request).store, loop_id)  # issue 19: the Loop's verifier
    raw = await read_bounded(request, WEBHOOK_LIMIT if verifier is None else verifier.body_limit(WEBHOOK_LIMIT))  # 5
    if verifier is not None:  # issue 19: a bad signature or a stale timestamp is 401, before anything is stored
        webhook_verify.verify(verifier, request.headers, raw, now_ms)
    require_json(request)  # 6
    body: Any = intake.parse_body(raw, route="webhook")  # 7
    topic, event_id, payload = "webhook", None, body
    if verifier is not None:  # the provider's delivery id, event type and (mapped) payload
        delivery = webhook_verify.describe(verifier, request.headers, body)
        if delivery.challenge is not None:  # Slack's url_verification: answered, never stored
            return JSONResponse({"challenge": delivery.challenge}, status_code=200)
        topic, event_id, payload = delivery.topic, delivery.event_id, delivery.payload
    ids = [v for name in DELIVERY_HEADERS for v in request.headers.getlist(name)]
    answer = await intake.admit(loop_id=loop_id, topic=topic, payload=payload, event_id=event_id,
                                idempotency_keys=_idempotency_keys(request), delivery_ids=ids,
                                source="webhook", secret_sha256=digest)  # 8, 9
    return JSONResponse(answer, status_code=202)
