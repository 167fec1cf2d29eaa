"""Helpers for the MCP tests: a fake OpenAI-compatible decision provider (a real HTTP server on loopback — the
one stand-in the issue allows), a live node (harness + uvicorn with /mcp mounted, as ``wakeful serve`` does),
and MCP clients over streamable HTTP and stdio.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from wakeful.harness.config import Config
from wakeful.harness.decide.settings import DecideSettings
from wakeful.harness.embed import Harness
from wakeful.sdk import example

LOOP_SOURCE = example("classify_decide").source  # the shipped example: decide, then agent.notify, then ack

# interfaces.md §3.2: every Loop and script tool (control tools are added by their own module)
LOOP_AND_SCRIPT_TOOLS = [
    "loop.sdk", "loop.build", "loop.create", "loop.list", "loop.get", "loop.pause", "loop.resume", "loop.delete",
    "loop.webhook", "loop.events", "loop.send", "loop.test", "session.messages", "script.sdk", "script.run",
]


class FakeProvider:
    """OpenAI-compatible ``/v1/chat/completions``: a message about an outage is important (p = 0.92),
    anything else is not (p = 0.04). Counts the requests it answered."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider.requests.append(body)
                request = json.loads(body["messages"][-1]["content"])
                state = json.dumps(request.get("state"))
                p = 0.92 if "down" in state else 0.04
                answer = {"model": "fake-1", "answers": {key: {"noul": p} for key in request["questions"]}}
                reply = json.dumps({"model": "fake-1", "choices": [{"message": {"content": json.dumps(answer)}}],
                                    "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def settings(self) -> DecideSettings:
        return DecideSettings(provider="openai", endpoint=self.endpoint, model="fake-1")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self) -> dict[str, str]:
        return {"WAKEFUL_DECIDE__PROVIDER": "openai", "WAKEFUL_DECIDE__ENDPOINT": self.endpoint,
                "WAKEFUL_DECIDE__MODEL": "fake-1"}


@contextmanager
def fake_provider() -> Iterator[FakeProvider]:
    provider = FakeProvider()
    provider.thread.start()
    try:
        yield provider
    finally:
        provider.server.shutdown()
        provider.server.server_close()


@dataclass
class Tenant:
    group_id: str
    agent_id: str
    session_id: str
    agent_key: str


async def tenant(h: Harness, name: str = "a1") -> Tenant:
    group = await h.create_group(f"g-{name}")
    agent = await h.create_agent(group.id, name)
    session = await h.create_session(agent.id, "inbox")
    _, key = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
    return Tenant(group.id, agent.id, session.id, key)


@dataclass
class Live:
    harness: Harness
    url: str
    wakes: list[str]


@asynccontextmanager
async def live_node(data_dir: Path, decide: DecideSettings, store_url: str | None = None,
                    setup: Callable[[Harness], None] | None = None, on_wake: bool = True) -> AsyncIterator[Live]:
    """A started harness serving the HTTP API with /mcp mounted, on a free loopback port (as wakeful serve);
    ``setup(h)`` runs before the start (e.g. to register embedder tools). With ``on_wake`` an embedder wake
    handler counts wakes (and so handles them); without it, wakes stay unhandled until the agent marks them."""
    from wakeful.api.server import make_server
    from wakeful.cli.mcp_cmd import mount_mcp

    h = Harness(Config(data_dir=data_dir, store_url=store_url, decide=decide), sweeps=False)
    if setup is not None:
        setup(h)
    wakes: list[str] = []
    if on_wake:
        h.on_wake(lambda message: wakes.append(message.id))
    await h.start()
    server = make_server(h, "127.0.0.1", 0, access_log=False)
    mcp_app = mount_mcp(server.config.app, h)
    task = asyncio.get_running_loop().create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                await task
                raise AssertionError("uvicorn did not start")
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield Live(h, f"http://127.0.0.1:{port}", wakes)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        await mcp_app.close()
        await h.stop()


@asynccontextmanager
async def mcp_http(url: str, key: str, session_id: str | None = None, agent_id: str | None = None,
                   ) -> AsyncIterator[Any]:
    """An MCP ``Client`` over streamable HTTP with the bearer key and default session headers."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"}
    if session_id is not None:
        headers["X-Wakeful-Session"] = session_id
    if agent_id is not None:
        headers["X-Wakeful-Agent"] = agent_id
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0), trust_env=False)
    async with http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client:
        yield client


def mcp_stdio(args: list[str], env: dict[str, str]) -> Any:
    """An MCP ``Client`` talking to ``wakeful mcp ARGS`` as a subprocess over stdio."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable,
                                   args=["-c", "from wakeful.cli.main import main; raise SystemExit(main())", "mcp",
                                         *args], env={**os.environ, **env})
    return Client(params, read_timeout_seconds=120)


def structured(result: Any) -> Any:
    """A tool result's structured JSON (asserting it is not a tool error)."""
    assert not result.is_error, result.structured_content or result.content
    return result.structured_content


async def until(predicate: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not await predicate():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)
