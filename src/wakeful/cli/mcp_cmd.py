"""``wakeful mcp`` (interfaces.md §3.1, §4.2): the MCP server on stdio — a thin client of a running server
(``--server``, ``WAKEFUL_API_KEY``) or ``--embedded`` (a harness in this process, the operator acting as
``--agent``). Also ``mount_mcp``, which puts the streamable-HTTP transport at ``/mcp`` on a ``wakeful serve`` app.

stdout carries the MCP protocol only; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from wakeful.cli.output import EXIT_UNAVAILABLE, CliExit, UsageError

__all__ = ["LazyMcpApp", "mount_mcp", "register", "tool_names_setting"]

DEFAULT_SERVER = "http://127.0.0.1:8470"  # server.host / server.port defaults (interfaces.md §7)


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to the root command group."""
    app.command("mcp")(mcp)


def mcp(
    embedded: Annotated[bool, typer.Option("--embedded", help="Run a harness in this process (operator as --agent).")] = False,
    agent: Annotated[str | None, typer.Option("--agent", help="The agent to act as (--embedded).")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Default session for loop.create.")] = None,
    tool_names: Annotated[str | None, typer.Option("--tool-names", help="dotted (loop.sdk) or underscore (loop_sdk); config mcp.tool_names.")] = None,
    server: Annotated[str | None, typer.Option("--server", help="Server URL of the thin client ($WAKEFUL_SERVER).")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Agent key of the thin client ($WAKEFUL_API_KEY).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Configuration file (TOML).")] = None,
) -> None:
    """Serve MCP on stdio: Loop, script and embedder tools for any agent host."""
    names = tool_names_setting(tool_names, config)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if embedded:
        if agent is None:
            raise UsageError("--embedded needs --agent AGENT_ID (the operator acts as that agent)")
        raise CliExit(_ended(asyncio.run(_embedded(agent, session, names, config))))
    url = server or os.environ.get("WAKEFUL_SERVER") or _configured_server(config)
    token = key or os.environ.get("WAKEFUL_API_KEY")
    if not token:
        raise UsageError("the thin client needs an agent key: --key or $WAKEFUL_API_KEY (or use --embedded)")
    raise CliExit(_ended(asyncio.run(_thin(url, token, session, names))))


# The MCP host waits for this process to exit after closing its stdin. The server has stopped and closed what
# it opened; what is left is the interpreter's last cyclic collection over every imported module (the mcp
# package, the harness: about a second). Freezing skips it; reference counting still frees what it can.
def _ended(code: int) -> int:
    import gc

    gc.freeze()
    return code


# interfaces.md §3.1: the thin client's default is the configured local URL (server.host, server.port)
def _configured_server(config: Path | None) -> str:
    from wakeful.harness.config import load_config

    try:
        cfg = load_config(config)
    except Exception:  # an unreadable config: the documented default address
        return DEFAULT_SERVER
    host = getattr(cfg, "server_host", "127.0.0.1")
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{host}:{getattr(cfg, 'server_port', 8470)}"


async def _embedded(agent_id: str, session_id: str | None, names: str, config: Path | None) -> int:
    from wakeful.control import Harness  # the node with h.control (goal and work tools)
    from wakeful.harness.config import load_config
    from wakeful.mcp.stdio import run_embedded

    cfg = load_config(config)
    cfg.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    async with Harness(cfg) as harness:
        await run_embedded(harness, agent_id=agent_id, session_id=session_id, tool_names=names)
    return 0


async def _thin(url: str, key: str, session_id: str | None, names: str) -> int:
    from wakeful.mcp.stdio import run_thin_client
    from wakeful.mcp.table import ToolRefusal

    try:
        await run_thin_client(url, key, session_id=session_id, tool_names=names)
    except ToolRefusal as refusal:
        print(f"wakeful mcp: {refusal.code}: {refusal.message}", file=sys.stderr)
        return EXIT_UNAVAILABLE if refusal.code == "unavailable" else 1
    return 0


# interfaces.md §7: flag > $WAKEFUL_MCP__TOOL_NAMES > [mcp] tool_names in the config file > dotted
def tool_names_setting(flag: str | None, config: Path | None = None) -> str:
    if flag is None:
        from wakeful.harness.config import load_config

        return load_config(config).mcp.tool_names  # checked there: a bad value names its key and source
    if flag not in ("dotted", "underscore"):
        raise UsageError(f"--tool-names must be dotted or underscore, not {flag!r}")
    return flag


def mount_mcp(app: Any, harness: Any, *, tool_names: str | None = None) -> Any:
    """Mount MCP over streamable HTTP at ``/mcp`` on a ``wakeful serve`` app; returns the ASGI app (close it
    before the harness stops). ``tool_names`` None: the harness's ``mcp.tool_names``. The MCP machinery (the mcp
    package: ~0.4 s of imports on a quiet machine) is made by the first request to ``/mcp``, not before the node
    serves (issue 16: a restarted node serves its Loops sooner)."""
    from starlette.routing import Route

    mcp_app = LazyMcpApp(harness, tool_names=tool_names)
    app.router.routes.append(Route("/mcp", endpoint=mcp_app))  # /mcp itself, without a redirect to /mcp/
    app.mount("/mcp", mcp_app)
    return mcp_app


class LazyMcpApp:
    """The ASGI app at ``/mcp``: ``wakeful.mcp.http.McpHttpApp``, made when first called."""

    def __init__(self, harness: Any, *, tool_names: str | None = None) -> None:
        self.harness, self.tool_names = harness, tool_names
        self.app: Any = None  # the McpHttpApp once made

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.app is None:
            from wakeful.mcp.http import McpHttpApp

            self.app = McpHttpApp(self.harness, tool_names=self.tool_names)
        await self.app(scope, receive, send)

    async def close(self) -> None:
        """Stop the MCP app's manager, if a request made it."""
        if self.app is not None:
            await self.app.close()
