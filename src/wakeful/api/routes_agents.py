"""Agents, sessions and wake messages (interfaces.md §2.2 "Agents, sessions and wakes"), including the SSE stream
of a session's new messages and marking messages handled.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import ConfigDict, Field

from wakeful.api.auth import GroupPrincipal, MemberPrincipal, Principal
from wakeful.api.context import harness_of
from wakeful.api.models import Body
from wakeful.api.pages import Cursor, Limit, page
from wakeful.api.views import agent_view, message_cursor, message_view, parse_message_cursor, session_view
from wakeful.harness.errors import AgentNotFound, SessionNotFound
from wakeful.harness.inbox import mark_handled as mark_handled_in
from wakeful.harness.inbox import messages_after
from wakeful.harness.store import agents, schema, sessions
from wakeful.harness.store.core import Tx

__all__ = ["router"]

router = APIRouter(tags=["agents"])
G = "/v1/agent-groups/{group_id}"
M = schema.message
STREAM_POLL_S = 0.5  # the backup poll: a commit on this node rings the store's message bell at once
KEEPALIVE_S = 15.0  # interfaces.md §2.2: a comment every 15 s


class AgentIn(Body):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=80)
    metadata: dict[str, Any] | None = None


class SessionIn(Body):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(default="", max_length=200)


class HandledIn(Body):
    model_config = ConfigDict(extra="forbid")
    message_ids: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(default=None, max_length=1000)
    up_to: str | None = Field(default=None, min_length=1, max_length=512)


async def agent_in_group(tx: Tx, group_id: str, agent_id: str, principal: Principal) -> agents.Agent:
    found = await agents.find_agent(tx, agent_id) if 1 <= len(agent_id) <= 40 else None
    if found is None or found.group_id != group_id or not principal.sees_agent(found.id):
        raise AgentNotFound(f"agent {agent_id[:40]} not found")
    return found


async def session_in_group(tx: Tx, group_id: str, session_id: str, principal: Principal) -> sessions.Session:
    try:
        found = await sessions.get_session(tx, session_id[:200])
    except SessionNotFound:
        found = None
    if found is None or found.group_id != group_id or not principal.sees_agent(found.agent_id):
        raise SessionNotFound(f"session {session_id[:40]} not found")
    return found


@router.post(G + "/agents", status_code=201, summary="Create an agent (group key)")
async def create_agent(group_id: str, body: AgentIn, request: Request, principal: GroupPrincipal) -> dict[str, Any]:
    async with harness_of(request).store.tx() as tx:
        agent = await agents.create_agent(tx, group_id=group_id, name=body.name, metadata=body.metadata)
    return agent_view(agent)


@router.get(G + "/agents", summary="List the group's agents (an agent principal sees itself)")
async def list_agents(group_id: str, request: Request, principal: MemberPrincipal, limit: Limit = 50,
                      cursor: Cursor = None) -> dict[str, Any]:
    async with harness_of(request).store.tx(readonly=True) as tx:
        found = [a for a in await agents.list_agents(tx, group_id=group_id) if principal.sees_agent(a.id)]
    found.sort(key=lambda a: a.id)
    return page(found, limit=limit, cursor=cursor, key=lambda a: a.id, render=agent_view)


@router.get(G + "/agents/{agent_id}", summary="One agent")
async def get_agent(group_id: str, agent_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    async with harness_of(request).store.tx(readonly=True) as tx:
        return agent_view(await agent_in_group(tx, group_id, agent_id, principal))


@router.post(G + "/agents/{agent_id}/archive", summary="Archive an agent: its active Loops pause (archive)")
async def archive_agent(group_id: str, agent_id: str, request: Request, principal: GroupPrincipal) -> dict[str, Any]:
    harness = harness_of(request)
    async with harness.store.tx(readonly=True) as tx:
        await agent_in_group(tx, group_id, agent_id, principal)
    result = await harness.loops.archive_agent(agent_id, actor=principal.actor)
    async with harness.store.tx(readonly=True) as tx:
        agent = await agents.get_agent(tx, agent_id)
    return {"agent": agent_view(agent), "paused_loops": result.get("paused", [])}


@router.post(G + "/agents/{agent_id}/unarchive", summary="Unarchive an agent: its archived Loops resume")
async def unarchive_agent(group_id: str, agent_id: str, request: Request,
                          principal: GroupPrincipal) -> dict[str, Any]:
    harness = harness_of(request)
    async with harness.store.tx(readonly=True) as tx:
        await agent_in_group(tx, group_id, agent_id, principal)
    result = await harness.loops.unarchive_agent(agent_id, actor=principal.actor)
    async with harness.store.tx(readonly=True) as tx:
        agent = await agents.get_agent(tx, agent_id)
    return {"agent": agent_view(agent), "resumed": result.get("resumed", []),
            "quota_paused": result.get("quota", [])}


@router.post(G + "/agents/{agent_id}/sessions", status_code=201, summary="Create a session (an agent's inbox)")
async def create_session(group_id: str, agent_id: str, request: Request, principal: MemberPrincipal,
                         body: SessionIn | None = None) -> dict[str, Any]:
    async with harness_of(request).store.tx() as tx:
        await agent_in_group(tx, group_id, agent_id, principal)
        session = await sessions.create_session(tx, agent_id=agent_id, title=body.title if body else "")
    return session_view(session)


@router.get(G + "/agents/{agent_id}/sessions", summary="List an agent's sessions")
async def list_sessions(group_id: str, agent_id: str, request: Request, principal: MemberPrincipal,
                        limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    async with harness_of(request).store.tx(readonly=True) as tx:
        await agent_in_group(tx, group_id, agent_id, principal)
        found = sorted(await sessions.list_sessions(tx, agent_id=agent_id), key=lambda s: s.id)
    return page(found, limit=limit, cursor=cursor, key=lambda s: s.id, render=session_view)


@router.delete(G + "/sessions/{session_id}", status_code=204, summary="Delete a session; 409 while a Loop targets it")
async def delete_session(group_id: str, session_id: str, request: Request, principal: MemberPrincipal) -> Response:
    async with harness_of(request).store.tx() as tx:
        await session_in_group(tx, group_id, session_id, principal)
        await sessions.delete_session(tx, session_id)
    return Response(status_code=204)


@router.get(G + "/sessions/{session_id}/messages", summary="A page of a session's messages, oldest first")
async def list_messages(
    group_id: str, session_id: str, request: Request, principal: MemberPrincipal, limit: Limit = 50,
    after: Annotated[str | None, Query(max_length=512, description="message cursor")] = None,
    unhandled: bool = False, cursor: Cursor = None,
) -> dict[str, Any]:
    start = parse_message_cursor(cursor if cursor else after, field="cursor" if cursor else "after")
    async with harness_of(request).store.tx(readonly=True) as tx:
        await session_in_group(tx, group_id, session_id, principal)
        found = await messages_after(tx, session_id, start, unhandled=unhandled, limit=limit + 1)
    items = found[:limit]
    return {"items": [message_view(m) for m in items],
            "next_cursor": message_cursor(items[-1]) if len(found) > limit else None}


@router.get(G + "/sessions/{session_id}/stream", summary="Server-sent events: one `message` event per new message",
            response_class=StreamingResponse, responses={200: {"content": {"text/event-stream": {}}}})
async def stream(
    group_id: str, session_id: str, request: Request, principal: MemberPrincipal,
    last_event_id: Annotated[str | None, Header(max_length=512)] = None,
    after: Annotated[str | None, Query(max_length=512, description="message cursor to start after")] = None,
) -> StreamingResponse:
    harness = harness_of(request)
    start = parse_message_cursor(last_event_id or after, field="last-event-id" if last_event_id else "after")
    async with harness.store.tx(readonly=True) as tx:
        await session_in_group(tx, group_id, session_id, principal)
    return StreamingResponse(_events(request, session_id, start), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def _events(request: Request, session_id: str, start: tuple[int, str] | None) -> AsyncIterator[bytes]:
    harness = request.app.state.harness
    after = start
    loop = asyncio.get_running_loop()
    last_sent = loop.time()
    yield b": stream open\n\n"
    while True:
        if await request.is_disconnected():
            return
        try:
            async with harness.store.tx(readonly=True) as tx:
                found = await messages_after(tx, session_id, after, unhandled=False, limit=100)
        except Exception:  # the store is away: keep the stream, try again (the cursor keeps the place)
            found = []
        for message in found:
            cursor = message_cursor(message)
            data = json.dumps(message_view(message), separators=(",", ":"))
            yield f"id: {cursor}\nevent: message\ndata: {data}\n\n".encode()
            after = (message.created_ms, message.id)
            last_sent = loop.time()
        if not found:
            if loop.time() - last_sent >= KEEPALIVE_S:
                yield b": keepalive\n\n"
                last_sent = loop.time()
            await harness.store.bell.wait(session_id, STREAM_POLL_S)  # rung by a commit on this node


@router.post(G + "/sessions/{session_id}/messages/handled", summary="Mark messages handled (ids, or up to a cursor)")
async def mark_handled(group_id: str, session_id: str, body: HandledIn, request: Request,
                       principal: MemberPrincipal) -> dict[str, Any]:
    async with harness_of(request).store.tx() as tx:
        await session_in_group(tx, group_id, session_id, principal)
        handled = await mark_handled_in(tx, session_id, message_ids=body.message_ids, up_to=body.up_to,
                                        handled_by=principal.actor)
    return {"handled": handled}
