"""``wakeful script run FILE… [--entry F] [--env K=V…] [--agent A]`` (interfaces.md §4.2, harness.md §18).

Local mode: the operator runs the script as ``--agent`` on the store directly, with a script runtime in this
process (no node is started, so no Loop runs here); its ``tool.call`` reaches ``decide``, ``web.http_request``
and the read-only Loop tools. Remote mode (``--server`` / ``$WAKEFUL_SERVER``): ``POST G/scripts/run`` with the
key. Prints the result and the console; ``--json`` prints the outcome. Exit 0 succeeded, 1 failed, 3 unavailable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from wakeful.cli import remote
from wakeful.cli.output import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    CliExit,
    Out,
    UsageError,
    dumps,
    escape,
    out_for,
)
from wakeful.cli.program import bundle_from_paths
from wakeful.errors import WakefulError

__all__ = ["register", "script_app"]

script_app = typer.Typer(help="Scripts: C programs run once while you wait (harness.md §18).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(script_app, name="script")


@script_app.command("run")
def run(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(help="C files of the bundle.", show_default=False)],
    entry: Annotated[str | None, typer.Option("--entry", help="Entry file (default: the first).")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="K=V, repeatable: the script's env.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="The agent the script runs as.")] = None,
    server: Annotated[str | None, typer.Option("--server", help="Server URL (remote mode; $WAKEFUL_SERVER).")] = None,
    key: Annotated[str | None, typer.Option("--key", help="API key (remote mode; $WAKEFUL_API_KEY).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="The outcome as one JSON document.")] = False,
) -> None:
    """Compile and run a script once; print its result and console."""
    out = out_for(ctx, json_)
    bundle, entry_key = bundle_from_paths(files, entry)
    request = {"files": bundle, "entry": entry_key}
    env_map = _env(env or [])
    try:
        if remote.server_url(server):
            client = remote.connect(server, key, timeout=90, agent=agent)
            outcome = dict(client.request("POST", f"{client.prefix()}/scripts/run", json={**request, "env": env_map}))
        else:
            if agent is None:
                raise UsageError("local mode needs --agent AGENT_ID (the operator runs the script as that agent)")
            outcome = asyncio.run(_local(agent, request, env_map))
    except UsageError:
        raise
    except WakefulError as exc:
        out.error(exc)
        raise CliExit(EXIT_UNAVAILABLE if exc.code in ("unavailable", "compiler_unavailable") else EXIT_FAILED) from None
    _print(out, outcome)
    raise CliExit(EXIT_OK if outcome.get("state") == "succeeded" else EXIT_FAILED)


def _env(pairs: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env takes K=V, not {pair!r}")
        found[name] = value
    return found


def _print(out: Out, outcome: dict[str, Any]) -> None:
    if out.json:
        out.document(outcome)
        return
    for line in outcome.get("console") or []:
        out.note(f"[dim]console[/] {escape(str(line))}")
    calls = outcome.get("tool_calls") or []
    if calls:
        failed = sum(1 for call in calls if not call.get("ok"))
        out.note(f"[dim]{len(calls)} tool calls, {failed} failed[/]")
    if outcome.get("state") == "succeeded":
        out.plain(dumps(outcome.get("result")) + "\n")
        return
    error = outcome.get("error") or {}
    out.err.print(f"[bold red]failed[/] [red]{escape(str(error.get('kind')))}[/]: {escape(str(error.get('message')))}")
    if error.get("diagnostics"):
        out.err.print(escape(str(error["diagnostics"])))


async def _local(agent_id: str, request: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    from wakeful.cli.db_cmd import store_url
    from wakeful.harness.config import load_config
    from wakeful.harness.ops import local

    return await local.run_script(load_config(), store_url(), agent_id, request, env)
