"""``wakeful status`` (interfaces.md §4.2): nodes and leases, Loops by state and reason, pending events and the
oldest deadline, wakes in the last hour — read from the store (local mode), as a table or one JSON document.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from wakeful.cli.output import EXIT_OK, CliExit, Out, Unavailable, escape
from wakeful.harness.errors import StoreUnavailable

__all__ = ["register", "status_command"]


def register(app: typer.Typer) -> None:
    """Add ``status`` to the root command group."""
    app.command("status")(status)


def status(
    ctx: typer.Context,
    json_: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Nodes and leases, Loops by state and reason, pending events, wakes in the last hour."""
    base = ctx.find_root().obj
    out = base if isinstance(base, Out) else Out()
    if json_ and not out.json:
        out = Out(json=True, quiet=out.quiet, color=out.color, verbose=out.verbose)
    raise CliExit(status_command(out))


def status_command(out: Out) -> int:
    from wakeful.cli.db_cmd import store_url
    from wakeful.harness.config import load_config

    dead_after_ms = load_config().placement.dead_after_s * 1000
    try:
        doc = asyncio.run(_read(store_url(), dead_after_ms))
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))
    if out.json:
        out.document(doc)
    else:
        _print(out, doc)
    return EXIT_OK


async def _read(url: str, dead_after_ms: int) -> dict[str, Any]:
    from wakeful.harness.placement.overview import status as read_status
    from wakeful.harness.store import Store

    store = await Store.open(url)  # the version rules of every local-mode command (harness.md §3)
    try:
        return await read_status(store, dead_after_ms)
    finally:
        await store.close()


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
    out.text(f"leases: {leases['held']} held, {leases['expired']} expired, "
             f"{leases['agents_without_lease']} agents with active Loops and no lease")
    loops = ", ".join(f"{k} {v}" for k, v in doc["loops"].items()) or "none"
    out.text(f"loops: {loops}")
    pending = doc["pending"]
    out.text(f"pending events: {pending['total']}, oldest deadline {_when(pending['oldest_deadline_ms'])}")
    out.text(f"wakes in the last hour: {doc['wakes_last_hour']}")
