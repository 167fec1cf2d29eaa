"""``wakeful mcp`` over stdio (interfaces.md §3.1): a thin client of a running server, or ``--embedded``.

Thin client: every tool call is one HTTP request to the server's API with ``WAKEFUL_API_KEY`` (an agent key);
the agent and group come from ``GET /v1/info``. Embedded: a harness runs in this process and the operator acts
as ``--agent``; its Loops run while the server runs and continue on the next node that starts.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx
from mcp.server.stdio import stdio_server

from wakeful.harness import ops
from wakeful.harness.ops import OPERATOR
from wakeful.mcp.server import build_table, make_server
from wakeful.mcp.table import McpContext, ToolRefusal

if TYPE_CHECKING:
    from wakeful.harness import Harness

__all__ = ["ApiClient", "run_embedded", "run_thin_client", "serve_stdio"]

TIMEOUT_S = 90.0  # above a script's 60 s of wall time


class ApiClient:
    """The HTTP API of a running server, as the thin client's tools use it (``McpContext.api``)."""

    def __init__(self, base_url: str, key: str, *, client: httpx.AsyncClient | None = None) -> None:
        self._client = client or httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=TIMEOUT_S, trust_env=False,
                                                   headers={"Authorization": f"Bearer {key}"})

    async def close(self) -> None:
        await self._client.aclose()

    async def request(self, method: str, path: str, *, json: Any = None,
                      params: Mapping[str, Any] | None = None) -> Any:
        try:
            response = await self._client.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise ToolRefusal("unavailable", f"the wakeful server is unreachable: {type(exc).__name__}") from None
        if response.status_code == 204:
            return {}
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                details = {k: v for k, v in body.items() if k not in ("error", "message")}
                raise ToolRefusal(body["error"], str(body.get("message", "")), **details)
            raise ToolRefusal("unavailable", f"the server answered HTTP {response.status_code}")
        return body


async def serve_stdio(server: Any) -> None:
    """Serve one MCP connection on this process's stdin and stdout."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def run_embedded(harness: Harness, *, agent_id: str, session_id: str | None, tool_names: str) -> None:
    """A started harness, the operator acting as ``agent_id`` (interfaces.md §3.1)."""
    agent = await ops.agents.find(harness, OPERATOR, agent_id)
    if session_id is not None:
        session = await ops.sessions.find(harness, OPERATOR, session_id)
        if session["agent_id"] != agent["id"]:
            raise ToolRefusal("session_not_found", f"session {session_id} is not the agent's")
    ctx = McpContext(agent_id=agent["id"], group_id=agent["group_id"], principal="operator", session_id=session_id,
                     mcp_session=f"stdio-{os.getpid()}", harness=harness,
                     who=OPERATOR.acting_as(agent["id"], agent["group_id"]))

    async def resolve(_: Any) -> McpContext:
        return ctx

    await serve_stdio(make_server(build_table(harness), resolve, tool_names=tool_names))


async def run_thin_client(server_url: str, key: str, *, session_id: str | None, tool_names: str) -> None:
    """Tools through the HTTP API of ``server_url``; the agent is the key's (``GET /v1/info``)."""
    api = ApiClient(server_url, key)
    try:
        info = await api.request("GET", "/v1/info")
        principal = info.get("principal", {}) if isinstance(info, dict) else {}
        agent_id, group_id = principal.get("agent_id"), principal.get("group_id")
        if not agent_id or not group_id:
            raise ToolRefusal("forbidden", "WAKEFUL_API_KEY must be an agent key")
        ctx = McpContext(agent_id=agent_id, group_id=group_id, principal=f"agent:{agent_id}", session_id=session_id,
                         mcp_session=f"stdio-{os.getpid()}", api=api)

        async def resolve(_: Any) -> McpContext:
            return ctx

        await serve_stdio(make_server(build_table(None), resolve, tool_names=tool_names))
    finally:
        with contextlib.suppress(Exception):
            await api.close()
