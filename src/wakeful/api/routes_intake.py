"""The two event intake routes (harness.md §10.3, §10.4), each checking in exactly the order of the spec:

route 1 ``POST G/loops/{loop_id}/events``: auth → scope → global bucket → bounded read (64 KiB) → content type →
JSON object → Loop in scope → per-Loop bucket → §10.1 → §10.2;
route 2 ``POST /v1/loop-webhooks/{secret}``: global bucket → secret shape → secret digest → per-Loop bucket →
bounded read (16 KiB; 1 MiB when the Loop's verifier maps fields) → the verifier's signature check (401, issue 19)
→ content type → JSON object → event id → §10.2. Every webhook answer is ``no-store``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers

from wakeful.api.auth import authenticate
from wakeful.api.body import read_bounded, require_json
from wakeful.api.context import harness_of
from wakeful.api.errors import send_json, wakeful_error_response
from wakeful.api.middleware import Receive, Scope, Send
from wakeful.errors import WakefulError
from wakeful.harness.ops import events

__all__ = ["IndexedHeaders", "router", "serve_group_event"]

router = APIRouter(tags=["event intake"])
GROUP_LIMIT = 65_536  # §10.3 step 4
WEBHOOK_LIMIT = events.WEBHOOK_LIMIT  # §10.4 step 5

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


@router.post("/v1/agent-groups/{group_id}/loops/{loop_id}/events", status_code=202, response_model=None,
             summary="Hand an event to a Loop (group or agent key); 202 means it is durably kept",
             responses={202: _ACCEPTED, **_ERRORS}, openapi_extra=_GROUP_BODY)
async def post_event(group_id: str, loop_id: str, request: Request) -> JSONResponse:
    """The route as FastAPI serves it (the OpenAPI document, and apps built without ``RequestGuard``); the node
    serves it through :func:`serve_group_event`, the same steps without FastAPI's routing (issue 16)."""
    return JSONResponse(await _group_event(request, group_id, loop_id), status_code=202)


async def _group_event(request: Request, group_id: str, loop_id: str) -> dict[str, Any]:
    harness = harness_of(request)
    events.refuse_while_draining(harness)
    principal = await authenticate(request)  # 1
    # issue 16: on PostgreSQL the buckets (steps 3, 8) are taken by the admission's group-commit transaction;
    # an answer before it takes them first (``settle``), so it is the answer of the checks in their order
    deferred = harness.intake.deferred()
    try:
        await events.open_intake(harness, principal, group_id, deferred)  # 2, 3
        raw = await read_bounded(request, GROUP_LIMIT)  # 4
        require_json(request)  # 5
        body = events.parse_body(harness, raw, route="group")  # 6
        return await events.admit_body(harness, principal, group_id=group_id, loop_id=loop_id, body=body,
                                       idempotency_keys=request.headers.getlist("idempotency-key"),
                                       deferred=deferred)  # 7-10
    except WakefulError:
        await harness.intake.settle(deferred)  # (raises the 429 of an empty bucket instead)
        raise


class IndexedHeaders(Headers):
    """Starlette's ``Headers`` over the same list, with every lookup answered from one index made in a single pass
    (issue 16): the route looks up five headers (``Authorization``, ``X-Wakeful-Agent``, ``Content-Length``,
    ``Content-Type``, every ``Idempotency-Key``), and each lookup of ``Headers`` walks the whole list in Python —
    a full walk for each header that is absent. The answers are those of ``Headers`` (the first value; all of them,
    in order, for ``getlist``)."""

    def __init__(self, scope: Scope) -> None:
        super().__init__(scope=scope)
        index: dict[str, list[str]] = {}
        for key, value in self._list:
            index.setdefault(key.decode("latin-1"), []).append(value.decode("latin-1"))
        self._index = index

    def __getitem__(self, key: str) -> str:
        values = self._index.get(key.lower())
        if values is None:
            raise KeyError(key)
        return values[0]

    def get(self, key: str, default: Any = None) -> Any:
        values = self._index.get(key.lower())
        return default if values is None else values[0]

    def getlist(self, key: str) -> list[str]:
        return list(self._index.get(key.lower(), ()))

    def __contains__(self, key: Any) -> bool:
        return isinstance(key, str) and key.lower() in self._index


class _IntakeRequest(Request):
    """The request of intake route 1's direct path: its headers are ``IndexedHeaders``."""

    @property
    def headers(self) -> Headers:
        headers: Headers | None = getattr(self, "_indexed", None)
        if headers is None:
            headers = self._indexed = IndexedHeaders(self.scope)
        return headers


async def serve_group_event(scope: Scope, receive: Receive, send: Send, group_id: str, loop_id: str) -> None:
    """Intake route 1 as a plain ASGI endpoint, called by ``RequestGuard`` for ``POST …/loops/{loop}/events``
    (issue 16: FastAPI's route matching over every router, its dependency solving and exception middleware were
    a fifth of the node's time under the ingest benchmark). The steps, their order and every answer are those of
    :func:`post_event`: a ``WakefulError`` gets the app's error body (``api/errors.py``), anything else goes up
    to ``RequestGuard``'s 500."""
    request = _IntakeRequest(scope, receive)
    try:
        answer = await _group_event(request, group_id, loop_id)
    except WakefulError as exc:
        await wakeful_error_response(exc, request)(scope, receive, send)
        return
    await send_json(send, 202, answer)


@router.post("/v1/loop-webhooks/{secret}", status_code=202, response_model=None,
             summary="Secret webhook: any JSON object becomes a `webhook` event of the Loop (no Authorization)",
             responses={202: _ACCEPTED, 200: _CHALLENGE, **_WEBHOOK_ERRORS},
             openapi_extra=_WEBHOOK_BODY)
async def post_webhook(secret: str, request: Request) -> JSONResponse:
    harness = harness_of(request)
    events.refuse_while_draining(harness)
    deferred = harness.intake.deferred()  # (as _group_event)
    try:
        target = await events.open_webhook(harness, secret, deferred)  # 1-4, and the Loop's verifier (issue 19)
        raw = await read_bounded(request, target.body_limit)  # 5
        status, answer = await events.deliver_webhook(harness, target, raw=raw, headers=request.headers,
                                                      json_checked=lambda: require_json(request))  # 6-9
    except WakefulError:
        await harness.intake.settle(deferred)
        raise
    if deferred is not None and not deferred.done:  # Slack's challenge: answered, never admitted
        await harness.intake.settle(deferred)
    return JSONResponse(answer, status_code=status)
