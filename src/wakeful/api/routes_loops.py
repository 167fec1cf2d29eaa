"""Loop routes (interfaces.md §2.2 "Loops"): create, list, get, pause, resume, delete, webhook, events, pending
retry/discard, logs, transitions. Intake (``POST …/events``) lives in ``routes_intake``.

Scope: the Loop must be in the path's group and, for an agent principal, belong to that agent — else 404.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import ConfigDict, Field

from wakeful.api.auth import MemberPrincipal, Principal
from wakeful.api.context import harness_of
from wakeful.api.models import Body
from wakeful.api.pages import Cursor, Limit, page
from wakeful.api.routes_agents import agent_in_group, session_in_group
from wakeful.harness import ops
from wakeful.harness.errors import NotFound, SessionNotFound
from wakeful.harness.store import loops
from wakeful.harness.store.ids import lookup_text
from wakeful.harness.views import loop_object, loop_objects, loop_rows

__all__ = ["api_loop", "router"]

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


def api_loop(view: dict[str, Any], row: loops.Loop | None = None, harness: Any = None) -> dict[str, Any]:
    """The harness's Loop object (interfaces.md §2.2, ``wakeful.harness.views.loop_object``)."""
    return loop_object(harness, view, row)


async def rows_of(harness: Any, ids: list[str]) -> dict[str, loops.Loop]:
    """The Loop rows of one page, in one query."""
    return await loop_rows(harness.store, ids)


async def full_loop(harness: Any, view: dict[str, Any]) -> dict[str, Any]:
    return (await loop_objects(harness, [view]))[0]


async def loop_in_scope(request: Request, group_id: str, loop_id: str, principal: Principal) -> loops.Loop:
    if lookup_text(loop_id) is None or len(loop_id) > 40:
        raise NotFound(f"Loop {loop_id[:40]} not found")
    async with harness_of(request).store.tx(readonly=True) as tx:
        row = await loops.find_loop(tx, loop_id)
    if row is None or row.group_id != group_id or not principal.sees_agent(row.agent_id):
        raise NotFound(f"Loop {loop_id[:40]} not found")
    return row


@router.post(G + "/loops", status_code=201, summary="Create a Loop from a built artifact")
async def create_loop(group_id: str, body: LoopIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    harness = harness_of(request)
    async with harness.store.tx(readonly=True) as tx:
        await agent_in_group(tx, group_id, body.agent_id, principal)
        session = await session_in_group(tx, group_id, body.session_id, principal)
    if session.agent_id != body.agent_id:  # interfaces.md §2.2: 404 session_not_found, not a 400
        raise SessionNotFound(f"session {body.session_id} is not a session of agent {body.agent_id}")
    view = await harness.loops.create(agent_id=body.agent_id, session_id=body.session_id, artifact=body.artifact,
                                      config=body.config, capabilities=body.capabilities, name=body.name,
                                      creator=principal.actor)
    return await full_loop(harness, view)


@router.get(G + "/loops", summary="A page of Loops (an agent principal sees its own)")
async def list_loops(
    group_id: str, request: Request, principal: MemberPrincipal, limit: Limit = 50, cursor: Cursor = None,
    agent_id: Annotated[str | None, Query(min_length=1, max_length=40)] = None,
    state: LoopState | None = None, pause_reason: PauseReason | None = None,
) -> dict[str, Any]:
    if principal.agent_id is not None:
        if agent_id is not None and agent_id != principal.agent_id:
            return {"items": [], "next_cursor": None}
        agent_id = principal.agent_id
    views = await harness_of(request).loops.list(agent_id=agent_id, group_id=group_id, state=state)
    if pause_reason is not None:
        views = [v for v in views if v.get("pause_reason") == pause_reason]
    views.sort(key=lambda v: str(v["loop_id"]))
    out = page(views, limit=limit, cursor=cursor, key=lambda v: str(v["loop_id"]), render=lambda v: v)
    harness = harness_of(request)
    rows = await rows_of(harness, [str(v["loop_id"]) for v in out["items"]])
    out["items"] = [api_loop(v, rows.get(str(v["loop_id"])), harness) for v in out["items"]]
    return out


@router.get(G + "/loops/{loop_id}", summary="Loop detail (?include=checkpoint,logs,pending)")
async def get_loop(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal,
                   include: Annotated[str | None, Query(max_length=64, pattern=r"^[a-z,]*$")] = None) -> dict[str, Any]:
    return await ops.loops.get(harness_of(request), principal, group_id=group_id, loop_id=loop_id, include=include)


@router.post(G + "/loops/{loop_id}/pause", summary="Pause a Loop (idempotent)")
async def pause_loop(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    await loop_in_scope(request, group_id, loop_id, principal)
    harness = harness_of(request)
    return await full_loop(harness, await harness.loops.pause(loop_id, actor=principal.actor))


@router.post(G + "/loops/{loop_id}/resume", summary="Resume a paused or failed Loop")
async def resume_loop(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    await loop_in_scope(request, group_id, loop_id, principal)
    harness = harness_of(request)
    return await full_loop(harness, await harness.loops.resume(loop_id, actor=principal.actor))


@router.delete(G + "/loops/{loop_id}", status_code=204, summary="Delete a Loop (its webhook stops at once)")
async def delete_loop(group_id: str, loop_id: str, request: Request, principal: MemberPrincipal) -> Response:
    await loop_in_scope(request, group_id, loop_id, principal)
    await harness_of(request).loops.delete(loop_id, actor=principal.actor)
    return Response(status_code=204)


@router.post(G + "/loops/{loop_id}/webhook", summary="Enable, rotate or revoke the Loop's secret webhook URL")
async def webhook(group_id: str, loop_id: str, body: WebhookIn, request: Request,
                  principal: MemberPrincipal) -> dict[str, Any]:
    await loop_in_scope(request, group_id, loop_id, principal)
    from wakeful.harness.webhooks import webhook as loop_webhook

    harness = harness_of(request)  # the harness's loop.webhook, with the caller recorded in the Loop log
    return await loop_webhook(harness.store, loop_id, body.action, public_base_url=harness.config.public_base_url,
                              actor=principal.actor)


@router.put(G + "/loops/{loop_id}/webhook/verifier",
            summary="Give the Loop's webhook a signature verifier (github, stripe, slack, standard-webhooks, hmac-sha256)")
async def set_webhook_verifier(group_id: str, loop_id: str, body: VerifierIn, request: Request,
                               principal: MemberPrincipal) -> dict[str, Any]:
    await loop_in_scope(request, group_id, loop_id, principal)
    from wakeful.harness.verifiers import set_verifier

    spec = body.model_dump(exclude_none=True)
    return await set_verifier(harness_of(request).store, loop_id, spec, actor=principal.actor)


@router.get(G + "/loops/{loop_id}/webhook/verifier", summary="The Loop's webhook verifier (never its secret)")
async def get_webhook_verifier(group_id: str, loop_id: str, request: Request,
                               principal: MemberPrincipal) -> dict[str, Any]:
    await loop_in_scope(request, group_id, loop_id, principal)
    from wakeful.harness.verifiers import show_verifier

    return await show_verifier(harness_of(request).store, loop_id)


@router.delete(G + "/loops/{loop_id}/webhook/verifier", status_code=204,
               summary="Remove the Loop's webhook verifier (the webhook takes unsigned JSON again)")
async def clear_webhook_verifier(group_id: str, loop_id: str, request: Request,
                                 principal: MemberPrincipal) -> Response:
    await loop_in_scope(request, group_id, loop_id, principal)
    from wakeful.harness.verifiers import clear_verifier

    await clear_verifier(harness_of(request).store, loop_id, actor=principal.actor)
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
