"""`wakeful loop …` in local mode: the command opens the store as the operator (and the command groups
`group | agent | session | key`, whose commands are `admin_cmd`'s).

interfaces.md §4.1–4.2. Rows written here (a Loop created or resumed) are adopted by the running node on its
next placement tick, or by the next `wakeful serve`; this process never runs a Loop itself. In remote mode
(`--server` / `$WAKEFUL_SERVER`) the `loop` commands call the HTTP API (`loop_remote`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from wakeful.cli import loop_remote, remote
from wakeful.cli.db_cmd import store_url
from wakeful.cli.output import CliExit, Out, Unavailable, UsageError, escape, out_for
from wakeful.cli.tables import cell, record_lines
from wakeful.errors import WakefulError

if TYPE_CHECKING:  # the harness (and SQLAlchemy) load when a command runs, not when the CLI starts
    from wakeful.cli.remote import Remote
    from wakeful.harness.tools import LoopTools

__all__ = ["agent_app", "apps", "group_app", "key_app", "loop_app", "session_app"]

T = TypeVar("T")
OPERATOR = "operator"

loop_app = typer.Typer(help="Durable Loops: create, inspect and steer (harness.md §4).", no_args_is_help=True)
group_app = typer.Typer(help="Tenants (groups).", no_args_is_help=True)
agent_app = typer.Typer(help="Agents: create, list, archive, unarchive.", no_args_is_help=True)
session_app = typer.Typer(help="Sessions (agent inboxes) and their messages.", no_args_is_help=True)
key_app = typer.Typer(help="API keys (the key text is printed once).", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]


def apps() -> dict[str, typer.Typer]:
    """The command groups this module adds to `wakeful` (interfaces.md §4.2)."""
    return {"loop": loop_app, "group": group_app, "agent": agent_app, "session": session_app, "key": key_app}


# ---- running one command against the store ----


def _run(out: Out, body: Callable[[LoopTools], Awaitable[T]]) -> T:
    """Open the store, run ``body`` with the operator's Loop tools, close; typed errors exit 1 or 3."""
    from wakeful.harness.errors import StoreUnavailable

    try:
        return asyncio.run(_with_tools(body))
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))
    except WakefulError as exc:
        out.fail(exc)


def _either(out: Out, body: Callable[[LoopTools], Awaitable[T]], remote_body: Callable[[Remote], T]) -> T:
    """Remote mode: ``remote_body`` against the server with the key; local mode: ``body`` on the store."""
    if remote.server_url() is None:
        return _run(out, body)
    return remote.call(out, lambda: remote_body(remote.connect()))


async def _with_tools(body: Callable[[LoopTools], Awaitable[T]]) -> T:
    from wakeful.harness.config import load_config
    from wakeful.harness.node import Node
    from wakeful.harness.store import Store
    from wakeful.harness.tools import LoopTools

    store = await Store.open(store_url())
    try:
        node = Node(store, load_config())
        return await body(LoopTools(node, adopt=False))
    finally:
        await store.close()


def _show(out: Out, value: Any, lines: Callable[[Any], list[str]]) -> None:
    if out.json:
        out.document(value)
        return
    for line in lines(value):
        out.text(escape(line))  # names, log lines and records are data (a guest's, a server's), never markup


def _loop_line(view: dict[str, Any]) -> str:
    state = view["state"] + (f"({view['pause_reason']})" if view.get("pause_reason") else "")
    return f"{view['id']}  {view['name']}  {state}  incarnation {view['incarnation']}  agent {view['agent_id']}"


def _loop_lines(view: dict[str, Any]) -> list[str]:
    keys = ("id", "name", "state", "pause_reason", "failure", "exit_code", "incarnation", "agent_id",
            "session_id", "artifact_sha256", "pending_count", "runtime", "created_ms", "updated_ms")
    return [f"{k}: {cell(k, view.get(k))}" for k in keys]


def _read_json(path: Path | None, what: str) -> Any:
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{what} file {path}: {exc}") from None


def _done(code: int = 0) -> None:
    raise CliExit(code)


# ---- wakeful loop … ----


@loop_app.command("create", epilog="\b\nExamples:\n  wakeful loop create --agent AGT --session SES --source ex/heartbeat.c"
                 "\n  wakeful loop create --agent AGT --session SES --elf heartbeat.o --config-file cfg.json")
def loop_create(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option("--agent", help="Owning agent id.")],
    session: Annotated[str, typer.Option("--session", help="Session that receives the wakes.")],
    artifact: Annotated[str | None, typer.Option("--artifact", help="sha256:<hex> or a path of the agent.")] = None,
    elf: Annotated[Path | None, typer.Option("--elf", help="Upload this prebuilt ELF and use it.")] = None,
    source: Annotated[list[Path] | None, typer.Option(
        "--source", help="Build these C files (repeatable; the first is the entry) and use the result.")] = None,
    config: Annotated[Path | None, typer.Option("--config-file", help="Config JSON object file.")] = None,
    capabilities: Annotated[Path | None, typer.Option("--capabilities", help="Capabilities JSON file.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Loop name.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Create a Loop from C source (--source), a built ELF (--elf) or a stored artifact (--artifact).

    Locally the running node loads it on its next reconcile; over --server the node adopts it at once.
    """
    from wakeful.cli import loop_input

    out = out_for(ctx, json_)
    if sum(x is not None for x in (artifact, elf, source or None)) != 1:
        raise UsageError("give exactly one of --source, --elf or --artifact")
    if artifact is not None:
        loop_input.check_artifact(artifact)
    cfg, caps = _read_json(config, "config"), _read_json(capabilities, "capabilities")
    elf_bytes = loop_input.read_elf(elf) if elf is not None else None
    if source:
        elf_bytes = loop_input.elf_from_source(out, source, None)

    async def body(tools: LoopTools) -> dict[str, Any]:
        ref = artifact
        if elf_bytes is not None:
            ref = (await tools.upload(agent_id=agent, elf=elf_bytes, creator=OPERATOR))["artifact"]
        assert ref is not None
        return await tools.create(agent_id=agent, session_id=session, artifact=ref, config=cfg,
                                  capabilities=caps, name=name, creator=OPERATOR)

    view = _either(out, body, lambda r: loop_remote.create(
        r, agent=agent, session=session, artifact=artifact, elf=elf_bytes, config=cfg, capabilities=caps,
        name=name))
    _show(out, view, _loop_lines)
    if remote.server_url() is None:
        loop_input.adoption_note(out, view)


@loop_app.command("list")
def loop_list(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's Loops.")] = None,
    state: Annotated[Literal["active", "paused", "failed"] | None, typer.Option("--state", help="Only Loops in this state.")] = None,
    json_: JsonOpt = False,
) -> None:
    """List Loops, oldest first."""
    out = out_for(ctx, json_)
    views = _either(out, lambda tools: tools.list(agent_id=agent, state=state),
                    lambda r: loop_remote.list_loops(r, agent=agent, state=state))
    _show(out, views, lambda vs: [_loop_line(v) for v in vs] or ["no Loops"])


def _steer(ctx: typer.Context, loop_id: str, json_: bool, op: str) -> None:
    out = out_for(ctx, json_)

    async def body(tools: LoopTools) -> dict[str, Any]:
        if op == "get":
            return await tools.get(loop_id)
        method: Callable[..., Awaitable[dict[str, Any]]] = getattr(tools, op)
        return await method(loop_id, actor=OPERATOR)

    result = _either(out, body, lambda r: loop_remote.steer(r, loop_id, op))
    _show(out, result, _loop_lines if "state" in result else record_lines)


@loop_app.command("get")
def loop_get(ctx: typer.Context, loop_id: str, json_: JsonOpt = False) -> None:
    """Show one Loop."""
    _steer(ctx, loop_id, json_, "get")


@loop_app.command("pause")
def loop_pause(ctx: typer.Context, loop_id: str, json_: JsonOpt = False) -> None:
    """Pause a Loop (a no-op for a Loop that is not active)."""
    _steer(ctx, loop_id, json_, "pause")


@loop_app.command("resume")
def loop_resume(ctx: typer.Context, loop_id: str, json_: JsonOpt = False) -> None:
    """Resume a paused or failed Loop from its checkpoint."""
    _steer(ctx, loop_id, json_, "resume")


@loop_app.command("delete")
def loop_delete(ctx: typer.Context, loop_id: str, json_: JsonOpt = False) -> None:
    """Delete a Loop and everything hanging off it."""
    _steer(ctx, loop_id, json_, "delete")


@loop_app.command("logs")
def loop_logs(ctx: typer.Context, loop_id: str, json_: JsonOpt = False) -> None:
    """Stored log lines of a Loop, oldest first."""
    out = out_for(ctx, json_)

    async def body(tools: LoopTools) -> list[dict[str, Any]]:
        from wakeful.harness.store import loops

        async with tools.store.tx(readonly=True) as tx:
            await loops.get_loop(tx, loop_id)
            return [line.__dict__ for line in await loops.list_logs(tx, loop_id)]

    found = _either(out, body, lambda r: loop_remote.logs(r, loop_id))
    _show(out, found, lambda ls: [f"{cell('at_ms', x['at_ms'])} #{x['incarnation']} {x['source']}: {x['text']}"
                                  for x in ls])
