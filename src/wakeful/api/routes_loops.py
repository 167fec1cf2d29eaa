"""Loop routes (interfaces.md §2.2 "Loops"): create, list, get, pause, resume, delete, webhook, events, pending
retry/discard, logs, transitions. Intake (``POST …/events``) lives in ``routes_intake``.

Scope: the Loop must be in the path's group and, for an agent principal, belong to that agent — else 404.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import ConfigDict, Field

from wakeful.api.auth import MemberPrincipal, Principal, authenticate, require_member
from wakeful.api.context import harness_of
from wakeful.api.errors import send_json, wakeful_error_response
from wakeful.api.middleware import ASGIApp, Message, Receive, Scope, Send
from wakeful.api.models import Body
from wakeful.api.pages import Cursor, Limit
from wakeful.errors import WakefulError
from wakeful.harness import ops

__all__ = ["router", "serve_create"]

router = APIRouter(tags=["loops"])
G = "/v1/agent-groups/{group_id}"
LoopState = Literal["active", "paused", "failed"]
PauseReason = Literal["manual", "exited", "budget", "archive", "quota", "fault"]
EventId = Annotated[str, Field(min_length=1, max_length=128)]


class LoopIn(Body):
    model_config = ConfigDict(extra="forbid")
    agent_id: str = Field(min_length=1, max_length=40)
    session_id: str = Field(min_length=1, max_length=40)
    artifact: str = Field(min_length=1, max_length=512, description="`sha256:<hex>` or an artifact path")
    name: str | None = Field(default=None, min_length=1, max_length=80)
    config: Any = None
    capabilities: list[Any] | None = None


class WebhookIn(Body):
    model_config = ConfigDict(extra="forbid")
    action: Literal["enable", "rotate", "revoke"]


class VerifierIn(Body):
    """A webhook verifier (issue 19); the harness checks the combination and never echoes ``secret``."""

    model_config = ConfigDict(extra="forbid")
    scheme: Literal["github", "stripe", "slack", "standard-webhooks", "hmac-sha256"]
    secret: str = Field(description="the provider's signing secret; stored, never shown again")
    tolerance_s: int | None = Field(default=None, description="stripe, slack, standard-webhooks (default 300)")
    fields: list[str] | None = Field(default=None, description="dotted paths to keep of each payload")
    header: str | None = Field(default=None, description="hmac-sha256: the signature header")
    encoding: Literal["hex", "base64"] | None = Field(default=None, description="hmac-sha256 (default hex)")
    prefix: str | None = Field(default=None, description="hmac-sha256: text before the signature, e.g. sha256=")
    id_header: str | None = Field(default=None, description="hmac-sha256: header holding the delivery id")
    topic_header: str | None = Field(default=None, description="hmac-sha256: header holding the event type")


class EventIdsIn(Body):
    model_config = ConfigDict(extra="forbid")
    event_ids: list[EventId] | None = Field(default=None, max_length=1000)


async def full_loop(harness: Any, view: dict[str, Any]) -> dict[str, Any]:
    """The Loop object of one harness view (``ops.loops.full_loop``; the event routes use it)."""
    return await ops.loops.full_loop(harness, view)


async def loop_in_scope(request: Request, group_id: str, loop_id: str, principal: Principal) -> None:
    """The scope check of the event routes (``ops.scope.loop_in_scope``): a Loop outside it is ``not_found``."""
    await ops.scope.loop_in_scope(harness_of(request), principal, group_id, loop_id)


@router.post(G + "/loops", status_code=201, summary="Create a Loop from a built artifact")
async def create_loop(group_id: str, body: LoopIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.loops.create(harness_of(request), principal, group_id=group_id, agent_id=body.agent_id,
                                  session_id=body.session_id, artifact=body.artifact, name=body.name,
                                  config=body.config, capabilities=body.capabilities)


async def serve_create(scope: Scope, receive: Receive, send: Send, group_id: str, app: ASGIApp) -> None:
    """``POST G/loops`` as a plain ASGI endpoint, called by ``RequestGuard`` (issue 16: FastAPI's route matching,
    dependency solving and exception middleware were a seventh of the node's time in a burst of creates). It
    answers the requests :func:`create_loop` would run — a JSON object that ``LoopIn`` accepts, from a principal
    whose scope covers the group — with that route's operation and answers; every other request (bad JSON, an
    invalid body, no or a wrong key…) goes on to the FastAPI app with its body, which answers it as before."""
    request = Request(scope, receive)
    chunks: list[bytes] = []
    more = True
    while more:  # RequestGuard's receive bounds the body (a 413 ends it with a disconnect)
        message = await receive()
        if message["type"] != "http.request":
            return  # the client went away (or the bound answered): nothing to do
        chunks.append(message.get("body", b""))
        more = bool(message.get("more_body", False))
    raw = b"".join(chunks)
    try:
        harness = harness_of(request)
        body = LoopIn.model_validate(json.loads(raw))
        principal = await require_member(group_id, await authenticate(request))
    except Exception:  # FastAPI's route answers it (its order of checks, its error bodies)
        await app(scope, _replayed(raw, receive), send)
        return
    try:
        answer = await ops.loops.create(harness, principal, group_id=group_id, agent_id=body.agent_id,
                                        session_id=body.session_id, artifact=body.artifact, name=body.name,
                                        config=body.config, capabilities=body.capabilities)
    except WakefulError as exc:
        await wakeful_error_response(exc, request)(scope, receive, send)
        return
    await send_json(send, 201, answer)


def _replayed(raw: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already once, then waits on the connection's own."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return again


@router.get(G + "/loops", summary="A page of Loops (an agent principal sees its own)")
async def list_loops(
    group_id: str, request: Request, principal: MemberPrincipal, limit: Limit = 50, cursor: Cursor = None,
    agent_id: Annotated[str | None, Query(min_length=1, max_length=40)] = None,
    state: LoopState | None = None, pause_reason: PauseReason | None = None,
) -> dict[str, Any]:
    return await ops.loops.list_loops(harness_of(request), principal, group_id=group_id, limit=limit,
                                      cursor=cursor, agent_id=agent_id, state=state, pause_reason=pause_reason)


@router.get(G + "/loops/{loop_id}", summary="Loop detail (?include=checkpoint,logs,pending)")
async def get_loop(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal,
                   include: Annotated[str | None, Query(max_length=64, pattern=r"^[a-z,]*$")] = None) -> dict[str, Any]:
    return await ops.loops.get(harness_of(request), principal, group_id=group_id, loop_id=loop_id, include=include)


@router.post(G + "/loops/{loop_id}/pause", summary="Pause a Loop (idempotent)")
async def pause_loop(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.loops.pause(harness_of(request), principal, group_id=group_id, loop_id=loop_id)


@router.post(G + "/loops/{loop_id}/resume", summary="Resume a paused or failed Loop")
async def resume_loop(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.loops.resume(harness_of(request), principal, group_id=group_id, loop_id=loop_id)


@router.delete(G + "/loops/{loop_id}", status_code=204, summary="Delete a Loop (its webhook stops at once)")
async def delete_loop(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal) -> Response:
    await ops.loops.delete(harness_of(request), principal, group_id=group_id, loop_id=loop_id)
    return Response(status_code=204)


@router.post(G + "/loops/{loop_id}/webhook", summary="Enable, rotate or revoke the Loop's secret webhook URL")
async def webhook(group_id: str, loop_id: str, body: WebhookIn, request: Request,
                  principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.webhooks.webhook(harness_of(request), principal, group_id=group_id, loop_id=loop_id,
                                      action=body.action)


@router.put(G + "/loops/{loop_id}/webhook/verifier",
            summary="Give the Loop's webhook a signature verifier (github, stripe, slack, standard-webhooks, hmac-sha256)")
async def set_webhook_verifier(group_id: str, loop_id: str, body: VerifierIn, request: Request,
                               principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.webhooks.set_verifier(harness_of(request), principal, group_id=group_id, loop_id=loop_id,
                                           **body.model_dump(exclude_none=True))


@router.get(G + "/loops/{loop_id}/webhook/verifier", summary="The Loop's webhook verifier (never its secret)")
async def get_webhook_verifier(group_id: str, loop_id: str, request: Request,
                               principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.webhooks.get_verifier(harness_of(request), principal, group_id=group_id, loop_id=loop_id)


@router.delete(G + "/loops/{loop_id}/webhook/verifier", status_code=204,
               summary="Remove the Loop's webhook verifier (the webhook takes unsigned JSON again)")
async def clear_webhook_verifier(group_id: str, loop_id: str, request: Request,
                                 principal: MemberPrincipal) -> Response:
    await ops.webhooks.clear_verifier(harness_of(request), principal, group_id=group_id, loop_id=loop_id)
    return Response(status_code=204)


@router.get(G + "/loops/{loop_id}/events", summary="A page of the Loop's events (pending and recently settled)")
async def list_events(
    group_id: str, loop_id: str, request: Request, principal: MemberPrincipal, limit: Limit = 50,
    cursor: Cursor = None, status: Literal["pending", "acked", "discarded"] | None = None, payloads: bool = False,
) -> dict[str, Any]:
    return await ops.events.list_events(harness_of(request), principal, group_id=group_id, loop_id=loop_id,
                                        limit=limit, cursor=cursor, status=status, payloads=payloads)


@router.post(G + "/loops/{loop_id}/pending/retry", summary="Retry pending events in a fresh incarnation")
async def retry_pending(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal,
                        body: EventIdsIn | None = None) -> dict[str, Any]:
    return await ops.events.retry(harness_of(request), principal, group_id=group_id, loop_id=loop_id,
                                  event_ids=body.event_ids if body else None)


@router.post(G + "/loops/{loop_id}/pending/discard", summary="Discard pending events (ids stay known for dedup)")
async def discard_pending(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal,
                          body: EventIdsIn | None = None) -> dict[str, Any]:
    return await ops.events.discard(harness_of(request), principal, group_id=group_id, loop_id=loop_id,
                                    event_ids=body.event_ids if body else None)


@router.get(G + "/loops/{loop_id}/logs", summary="Stored log lines, oldest first")
async def list_logs(
    group_id: str, loop_id: str, request: Request, principal: MemberPrincipal,
    after_seq: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 200,
) -> dict[str, Any]:
    return await ops.loops.logs(harness_of(request), principal, group_id=group_id, loop_id=loop_id,
                                after_seq=after_seq, limit=limit)


@router.get(G + "/loops/{loop_id}/transitions", summary="The newest state transitions")
async def list_transitions(group_id: str, loop_id: str, request: Request,
                           principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.loops.transitions(harness_of(request), principal, group_id=group_id, loop_id=loop_id)
