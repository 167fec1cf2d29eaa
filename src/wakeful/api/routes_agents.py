"""Agents, sessions and wake messages (interfaces.md §2.2 "Agents, sessions and wakes"), including the SSE stream
of a session's new messages and marking messages handled — adapters over ``wakeful.harness.ops`` (``agents``,
``sessions``, ``messages``): parse, call the operation as the key's principal, render.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import ConfigDict, Field

from wakeful.api.auth import GroupPrincipal, MemberPrincipal, Principal
from wakeful.api.context import harness_of
from wakeful.api.models import Body
from wakeful.api.pages import Cursor, Limit
from wakeful.harness import ops

__all__ = ["agent_in_group", "router", "session_in_group"]

router = APIRouter(tags=["agents"])
G = "/v1/agent-groups/{group_id}"
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


# the scope checks other routers still call inside their own transactions (thin wrappers over the operations')
async def agent_in_group(tx: Any, group_id: str, agent_id: str, principal: Principal) -> Any:
    return await ops.agents.agent_in_scope(tx, principal, group_id, agent_id)


async def session_in_group(tx: Any, group_id: str, session_id: str, principal: Principal) -> Any:
    return await ops.sessions.session_in_scope(tx, principal, group_id, session_id)


@router.post(G + "/agents", status_code=201, summary="Create an agent (group key)")
async def create_agent(group_id: str, body: AgentIn, request: Request, principal: GroupPrincipal) -> dict[str, Any]:
    return await ops.agents.create(harness_of(request), principal, group_id=group_id, name=body.name,
                                   metadata=body.metadata)


@router.get(G + "/agents", summary="List the group's agents (an agent principal sees itself)")
async def list_agents(group_id: str, request: Request, principal: MemberPrincipal, limit: Limit = 50,
                      cursor: Cursor = None) -> dict[str, Any]:
    return await ops.agents.list_agents(harness_of(request), principal, group_id=group_id, limit=limit,
                                        cursor=cursor)


@router.get(G + "/agents/{agent_id}", summary="One agent")
async def get_agent(group_id: str, agent_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.agents.get(harness_of(request), principal, group_id=group_id, agent_id=agent_id)


@router.post(G + "/agents/{agent_id}/archive", summary="Archive an agent: its active Loops pause (archive)")
async def archive_agent(group_id: str, agent_id: str, request: Request, principal: GroupPrincipal) -> dict[str, Any]:
    return await ops.agents.archive(harness_of(request), principal, group_id=group_id, agent_id=agent_id)


@router.post(G + "/agents/{agent_id}/unarchive", summary="Unarchive an agent: its archived Loops resume")
async def unarchive_agent(group_id: str, agent_id: str, request: Request,
                          principal: GroupPrincipal) -> dict[str, Any]:
    return await ops.agents.unarchive(harness_of(request), principal, group_id=group_id, agent_id=agent_id)


@router.post(G + "/agents/{agent_id}/sessions", status_code=201, summary="Create a session (an agent's inbox)")
async def create_session(group_id: str, agent_id: str, request: Request, principal: MemberPrincipal,
                         body: SessionIn | None = None) -> dict[str, Any]:
    return await ops.sessions.create(harness_of(request), principal, group_id=group_id, agent_id=agent_id,
                                     title=body.title if body else "")


@router.get(G + "/agents/{agent_id}/sessions", summary="List an agent's sessions")
async def list_sessions(group_id: str, agent_id: str, request: Request, principal: MemberPrincipal,
                        limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    return await ops.sessions.list_sessions(harness_of(request), principal, group_id=group_id, agent_id=agent_id,
                                            limit=limit, cursor=cursor)


@router.delete(G + "/sessions/{session_id}", status_code=204, summary="Delete a session; 409 while a Loop targets it")
async def delete_session(group_id: str, session_id: str, request: Request, principal: MemberPrincipal) -> Response:
    await ops.sessions.delete(harness_of(request), principal, group_id=group_id, session_id=session_id)
    return Response(status_code=204)


@router.get(G + "/sessions/{session_id}/messages", summary="A page of a session's messages, oldest first")
async def list_messages(
    group_id: str, session_id: str, request: Request, principal: MemberPrincipal, limit: Limit = 50,
    after: Annotated[str | None, Query(max_length=512, description="message cursor")] = None,
    unhandled: bool = False, cursor: Cursor = None,
) -> dict[str, Any]:
    return await ops.messages.list_messages(harness_of(request), principal, group_id=group_id,
                                            session_id=session_id, limit=limit, after=after, unhandled=unhandled,
                                            cursor=cursor)


@router.get(G + "/sessions/{session_id}/stream", summary="Server-sent events: one `message` event per new message",
            response_class=StreamingResponse, responses={200: {"content": {"text/event-stream": {}}}})
async def stream(
    group_id: str, session_id: str, request: Request, principal: MemberPrincipal,
    last_event_id: Annotated[str | None, Header(max_length=512)] = None,
    after: Annotated[str | None, Query(max_length=512, description="message cursor to start after")] = None,
) -> StreamingResponse:
    start = await ops.messages.open_stream(harness_of(request), principal, group_id=group_id,
                                           session_id=session_id, after=last_event_id or after,
                                           field="last-event-id" if last_event_id else "after")
    return StreamingResponse(_events(request, session_id, start), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def _events(request: Request, session_id: str, start: tuple[int, str] | None) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    last_sent = loop.time()
    yield b": stream open\n\n"
    if await request.is_disconnected():
        return
    async with contextlib.aclosing(ops.messages.follow(harness_of(request), session_id, start)) as messages:
        async for found in messages:
            if found is not None:
                cursor, view = found
                data = json.dumps(view, separators=(",", ":"))
                yield f"id: {cursor}\nevent: message\ndata: {data}\n\n".encode()
                last_sent = loop.time()
                continue
            if await request.is_disconnected():
                return
            if loop.time() - last_sent >= KEEPALIVE_S:
                yield b": keepalive\n\n"
                last_sent = loop.time()


@router.post(G + "/sessions/{session_id}/messages/handled", summary="Mark messages handled (ids, or up to a cursor)")
async def mark_handled(group_id: str, session_id: str, body: HandledIn, request: Request,
                       principal: MemberPrincipal) -> dict[str, Any]:
    return await ops.messages.handled(harness_of(request), principal, group_id=group_id, session_id=session_id,
                                      message_ids=body.message_ids, up_to=body.up_to)
