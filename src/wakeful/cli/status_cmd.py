"""``wakeful status`` (interfaces.md §4.2): nodes and leases, Loops by state and reason, pending events and the
oldest deadline, wakes in the last hour — read from the store (local mode), as a table or one JSON document.
Remote mode (``--server`` / ``$WAKEFUL_SERVER`` with an admin key) shows the nodes of ``GET /v1/nodes``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from wakeful.cli import remote
from wakeful.cli.output import EXIT_OK, CliExit, Out, Unavailable, UsageError, escape, out_for
from wakeful.errors import WakefulError

__all__ = ["register", "status_command"]


def register(app: typer.Typer) -> None:
    """Add ``status`` to the root command group."""
    app.command("status")(status)


def status(
    ctx: typer.Context,
    json_: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
    server: Annotated[str | None, typer.Option("--server", help="Server URL (remote mode; $WAKEFUL_SERVER).")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Admin API key (remote mode; $WAKEFUL_API_KEY).")] = None,
) -> None:
    """Nodes and leases, Loops by state and reason, pending events, wakes in the last hour."""
    out = out_for(ctx, json_)
    raise CliExit(status_command(out, server=remote.server_url(server), key=remote.api_key(key)))


def status_command(out: Out, *, server: str | None = None, key: str | None = None) -> int:
    from wakeful.cli.db_cmd import store_url
    from wakeful.harness.config import load_config
    from wakeful.harness.errors import StoreUnavailable  # the harness loads when the command runs

    try:
        if server:
            if not key:
                raise UsageError("remote mode needs --key or $WAKEFUL_API_KEY (an admin key)")
            doc = _remote(server, key)
        else:
            dead_after_ms = load_config().placement.dead_after_s * 1000
            doc = asyncio.run(_read(store_url(), dead_after_ms))
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))
    except UsageError:
        raise
    except WakefulError as exc:
        out.fail(exc)
    if out.json:
        out.document(doc)
    else:
        _print(out, doc)
    return EXIT_OK


async def _read(url: str, dead_after_ms: int) -> dict[str, Any]:
    from wakeful.control import goals_needing_person
    from wakeful.harness import ops

    return await ops.nodes.status(url, dead_after_ms, extend=goals_needing_person)


def _remote(server: str, key: str) -> dict[str, Any]:
    """The nodes part over HTTP (the rest of the status is read from the store in local mode only)."""
    client = remote.Remote(server, key, timeout=10)
    items: list[Any] = client.pages("/v1/nodes")
    try:  # the answering node's 429/503 counts of the last hour
        refusals = client.info().get("recent_refusals")
    except remote.RemoteError:
        refusals = None
    held = sum(int(n["leases_held"]) for n in items)
    return {"nodes": items, "leases": {"held": held, "expired": None, "by_node": {n["id"]: n["leases_held"]
            for n in items}, "agents_without_lease": None}, "loops": None, "pending": None, "wakes_last_hour": None,
            "recent_refusals": refusals}


def _when(ms: int | None) -> str:
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _print(out: Out, doc: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="nodes", title_justify="left")
    for column in ("name", "state", "heartbeat", "objects", "leases", "host", "pid", "id"):
        table.add_column(column)
    for n in doc["nodes"]:
        state = n["state"] if n["alive"] or n["state"] != "alive" else "dead"
        table.add_row(escape(n["name"]), state, f"{n['heartbeat_age_ms'] / 1000:.1f} s ago",
                      f"{n['objects']}/{n['capacity']}", str(n["leases_held"]), escape(n["host"]), str(n["pid"]),
                      n["id"])
    if doc["nodes"] and not out.quiet:
        out.console.print(table)
    elif not doc["nodes"]:
        out.text("nodes: none registered")
    leases = doc["leases"]
    if doc["loops"] is None:  # remote mode: the API shows the nodes and the answering node's refusals
        out.text(f"leases: {leases['held']} held (remote mode shows nodes only; run locally for the rest)")
        refusals = doc.get("recent_refusals") or {}
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(refusals.items()) if k != "window_s") or "none"
        out.text(f"recent refusals on the answering node (last hour): {counts}")
        return
    out.text(f"leases: {leases['held']} held, {leases['expired']} expired, "
             f"{leases['agents_without_lease']} agents with active Loops and no lease")
    loops = ", ".join(f"{k} {v}" for k, v in doc["loops"].items()) or "none"
    out.text(f"loops: {loops}")
    pending = doc["pending"]
    out.text(f"pending events: {pending['total']}, oldest deadline {_when(pending['oldest_deadline_ms'])}")
    out.text(f"wakes in the last hour: {doc['wakes_last_hour']}")
    goals = doc.get("goals_needing_person") or []
    out.text("goals needing a person: " + (", ".join(f"{escape(g['title'])} ({g['goal_id']}, {g['items']})"
                                                       for g in goals) or "none"))
    out.text("recent 429/503 counts: see `wakeful status --server URL --key KEY` (kept in each node's memory)")
