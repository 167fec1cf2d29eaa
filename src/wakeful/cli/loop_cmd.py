"""`wakeful loop …` in local mode: the command opens the store as the operator (and the command groups
`group | agent | session | key`, whose commands are `admin_cmd`'s).

interfaces.md §4.1–4.2. Rows written here (a Loop created or resumed) are adopted by the running node on its
next placement tick, or by the next `wakeful serve`; this process never runs a Loop itself. In remote mode
(`--server` / `$WAKEFUL_SERVER`) the `loop` commands call the HTTP API (`loop_remote`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer

from wakeful.cli import backend, remote
from wakeful.cli.backend import Site
from wakeful.cli.output import CliExit, Out, UsageError, escape, out_for
from wakeful.cli.tables import cell, record_lines

__all__ = ["agent_app", "apps", "group_app", "key_app", "loop_app", "session_app"]

T = TypeVar("T")
OPERATOR = "operator"
MAX_PAGES = 500  # of one listing (200 items a page): a store or server naming pages forever is not followed

loop_app = typer.Typer(help="Durable Loops: create, inspect and steer (harness.md §4).", no_args_is_help=True)
group_app = typer.Typer(help="Tenants (groups).", no_args_is_help=True)
agent_app = typer.Typer(help="Agents: create, list, archive, unarchive.", no_args_is_help=True)
session_app = typer.Typer(help="Sessions (agent inboxes) and their messages.", no_args_is_help=True)
key_app = typer.Typer(help="API keys (the key text is printed once).", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]


def apps() -> dict[str, typer.Typer]:
    """The command groups this module adds to `wakeful` (interfaces.md §4.2)."""
    return {"loop": loop_app, "group": group_app, "agent": agent_app, "session": session_app, "key": key_app}


def _show(out: Out, value: Any, lines: Callable[[Any], list[str]]) -> None:
    if out.json:
        out.document(value)
        return
    for line in lines(value):
        out.text(escape(line))  # names, log lines and records are data (a guest's, a server's), never markup


def _loop_line(view: dict[str, Any]) -> str:
    state = view["state"] + (f"({view['pause_reason']})" if view.get("pause_reason") else "")
    return f"{view['id']}  {view['name']}  {state}  incarnation {view['incarnation']}  agent {view['agent_id']}"


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


# one code path per command: the harness operations through a Backend, locally as the operator or over
# --server with the key (wakeful.cli.backend, issue 15)


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

    Locally a node running on the store adopts it (at once on PostgreSQL, else at its next reconcile); over
    --server the node adopts it at once.
    """
    from wakeful.cli import loop_input

    out = out_for(ctx, json_)
    if sum(x is not None for x in (artifact, elf, source or None)) != 1:
        raise UsageError("give exactly one of --source, --elf or --artifact")
    if artifact is not None:
        loop_input.check_artifact(artifact)
    cfg, caps = _read_json(config, "config"), _read_json(capabilities, "capabilities")
    elf_bytes = loop_input.read_elf(elf) if elf is not None else None
    lines = None
    if source:
        elf_bytes, lines = loop_input.elf_from_source(out, source, None)

    async def body(site: Site) -> tuple[dict[str, Any], bool]:
        group = await site.group(agent=agent)
        ref = artifact
        if elf_bytes is not None:
            ref = await _upload(site, group, agent, elf_bytes, lines)
        view = await site.backend.call("loops.create", group_id=group, agent_id=agent, session_id=session,
                                       artifact=ref, name=name, config=cfg, capabilities=caps)
        signalled = site.harness is not None and site.harness.signals_nodes
        return view, signalled

    view, signalled = backend.run(out, body)
    _show(out, backend.shown_loop(view), backend.loop_lines)
    if remote.server_url() is None:
        loop_input.adoption_note(out, view, signalled=signalled)


async def _upload(site: Site, group: str, agent: str, elf: bytes, lines: Any) -> str:
    """The ELF stored as an artifact of the agent (with ``--source``, its line table beside it locally, so the
    Loop's faults name ``main.c:N``); the artifact reference."""
    if site.harness is not None:
        stored = await site.harness.loops.upload(agent_id=agent, elf=elf, creator=OPERATOR, lines=lines)
        return str(stored["artifact"])
    server = site.server
    assert server is not None
    uploaded = await asyncio.to_thread(lambda: server.request(
        "POST", f"/v1/agent-groups/{group}/artifacts", params={"agent_id": agent}, content=elf,
        headers={"Content-Type": "application/octet-stream"}))
    return str(uploaded["artifact"])


@loop_app.command("list")
def loop_list(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's Loops.")] = None,
    state: Annotated[Literal["active", "paused", "failed"] | None, typer.Option("--state", help="Only Loops in this state.")] = None,
    json_: JsonOpt = False,
) -> None:
    """List Loops, oldest first."""
    out = out_for(ctx, json_)

    async def body(site: Site) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for group in await site.groups(agent=agent):
            items = await backend.every_item(site.backend, "loops.list", group_id=group, agent_id=agent, state=state)
            found.extend(backend.shown_loop(v) for v in items)
        return sorted(found, key=lambda v: (v.get("created_ms") or 0, str(v["id"])))

    views = backend.run(out, body)
    _show(out, views, lambda vs: [_loop_line(v) for v in vs] or ["no Loops"])


def _steer(ctx: typer.Context, loop_id: str, json_: bool, op: str) -> None:
    out = out_for(ctx, json_)

    async def body(site: Site) -> dict[str, Any]:
        group = await site.group(loop=loop_id)
        answer = await site.backend.call(f"loops.{op}", group_id=group, loop_id=loop_id)
        return {"loop_id": loop_id, "deleted": True} if op == "delete" else backend.shown_loop(answer)

    result = backend.run(out, body)
    _show(out, result, backend.loop_lines if "state" in result else record_lines)


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

    async def body(site: Site) -> list[dict[str, Any]]:
        group = await site.group(loop=loop_id)
        lines: list[dict[str, Any]] = []
        after = 0
        for _ in range(MAX_PAGES):
            page = await site.backend.call("loops.logs", group_id=group, loop_id=loop_id, after_seq=after,
                                           limit=200)
            lines.extend(page["items"])
            following = page.get("next_after_seq")
            if len(page["items"]) < 200 or not isinstance(following, int) or following == after:
                break
            after = following
        return lines

    found = backend.run(out, body)
    _show(out, found, lambda ls: [f"{cell('at_ms', x['at_ms'])} #{x['incarnation']} {x['source']}: {x['text']}"
                                  for x in ls])
