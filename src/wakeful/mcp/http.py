"""MCP over streamable HTTP, mounted at ``/mcp`` on ``wakeful serve`` (interfaces.md §3.1).

Identity: the bearer key (an agent key, or a group/admin key with ``X-Wakeful-Agent``), checked on every POST
with the harness's key cache; the default session comes from ``X-Wakeful-Session``. Stateless JSON responses: each
request stands alone, so any node can answer it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from wakeful.errors import status_for
from wakeful.harness import ops
from wakeful.harness.errors import HarnessError
from wakeful.mcp.server import build_table, make_server
from wakeful.mcp.table import McpContext, ToolRefusal

if TYPE_CHECKING:
    from wakeful.harness import Harness

__all__ = ["McpHttpApp"]

log = logging.getLogger("wakeful.mcp")

IDENTITY = "wakeful.mcp.identity"
MAX_BODY = 262_144


class McpHttpApp:
    """An ASGI app: authenticate, then hand the request to the mcp package's streamable-HTTP manager."""

    def __init__(self, harness: Harness, *, tool_names: str | None = None) -> None:
        self.harness = harness
        names = tool_names or harness.config.mcp.tool_names  # interfaces.md §7 mcp.tool_names; a flag wins
        self.server = make_server(build_table(harness), self._resolve, tool_names=names)
        self.manager = StreamableHTTPSessionManager(app=self.server, json_response=True, stateless=True,
                                                    max_request_body_size=MAX_BODY)
        self._running: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        try:
            scope[IDENTITY] = await self._authenticate(scope)
        except ToolRefusal as refusal:
            await _answer(send, status_for(refusal.code), refusal.face_body())
            return
        await self._start()
        await self.manager.handle_request(scope, receive, send)

    async def close(self) -> None:
        """Stop the manager's task group (call before the harness stops)."""
        if self._running is not None and self._stop is not None:
            self._stop.set()
            with contextlib.suppress(Exception):
                await self._running
        self._running = None

    # the manager's task group lives in a task of its own, started by the first request
    async def _start(self) -> None:
        if self._running is None:
            self._ready, self._stop = asyncio.Event(), asyncio.Event()
            self._running = asyncio.get_running_loop().create_task(self._run_manager(self._ready, self._stop))
        assert self._ready is not None
        await self._ready.wait()

    async def _run_manager(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        async with self.manager.run():
            ready.set()
            await stop.wait()

    # interfaces.md §1 principals: an agent key, or a group/admin key acting as X-Wakeful-Agent
    async def _authenticate(self, scope: dict[str, Any]) -> McpContext:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ToolRefusal("unauthorized", "an Authorization: Bearer wk_… agent key is required")
        if not self.harness.started:
            raise ToolRefusal("unavailable", "the node is starting or stopping")
        try:
            principal = await ops.keys.authenticate(self.harness, token.strip(), headers.get("x-wakeful-agent"))
        except HarnessError as exc:  # unauthorized, forbidden (another agent), not_found (outside the key's group)
            raise ToolRefusal(exc.code, exc.message) from None
        if principal.agent_id is None or principal.agent_group_id is None:
            raise ToolRefusal("forbidden", "MCP needs an agent principal: an agent key, or X-Wakeful-Agent")
        agent_id, group_id = principal.agent_id, principal.agent_group_id
        return McpContext(agent_id=agent_id, group_id=group_id, principal=f"agent:{agent_id}",
                          session_id=headers.get("x-wakeful-session") or None,
                          mcp_session=headers.get("mcp-session-id") or f"{principal.key_id}:{agent_id}",
                          harness=self.harness, who=principal)

    async def _resolve(self, ctx: Any) -> McpContext:
        request = getattr(ctx, "request", None)
        identity = request.scope.get(IDENTITY) if request is not None else None
        if not isinstance(identity, McpContext):
            raise ToolRefusal("unauthorized", "no authenticated caller for this request")
        return identity


async def _answer(send: Any, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": data})
