"""`wakeful db upgrade | version | backup | prune`: the store's schema version against the code's, the upgrade path
of harness.md §3 (SQLite: VACUUM INTO backup first; PostgreSQL: under the upgrade advisory lock), retention.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from wakeful.cli.output import EXIT_OK, Out, Unavailable
from wakeful.errors import WakefulError

__all__ = ["backup_command", "prune_command", "store_url", "upgrade_command", "version_command"]

T = TypeVar("T")


# interfaces.md §7: --db (exported as WAKEFUL_DB_URL by the global option), else the data directory's SQLite file
def store_url() -> str:
    from wakeful.cli.remote import refuse_local

    refuse_local()  # every local-mode command opens the store here: in remote mode it refuses (exit 2)
    url = os.environ.get("WAKEFUL_DB_URL")
    if url:
        return url
    from wakeful.cli.which_store import resolve

    # interfaces.md §7: --db / $WAKEFUL_DB_URL, else store.url of the configuration file, else the data dir's
    # SQLite file — the store `wakeful serve` with the same configuration opens; issue 19: a running node's own
    # store first (<data>/node.json), said on stderr, as is an empty store being created
    return resolve()


def _run(out: Out, body: Callable[[], Awaitable[T]]) -> T:
    """Run the command's coroutine; a store that cannot be reached exits 3 (interfaces.md §4.1)."""
    from wakeful.harness.errors import StoreUnavailable

    try:
        return asyncio.run(_as_coroutine(body))
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))


async def _as_coroutine(body: Callable[[], Awaitable[T]]) -> T:
    return await body()


def _head() -> int:
    from wakeful.harness.ops import store_admin  # the harness (and SQLAlchemy) load when a command runs

    return store_admin.SCHEMA_HEAD


def _status(stored: int | None) -> str:
    HEAD = _head()
    if stored is None:
        return "empty"
    return "equal" if stored == HEAD else ("older" if stored < HEAD else "newer")


def version_command(out: Out) -> int:
    """Print the stored and the code's schema versions without changing anything."""
    from wakeful.harness.config import redacted_url

    url = store_url()

    async def body() -> int | None:
        from wakeful.harness.ops import store_admin

        return await store_admin.stored_version(url)

    stored = _run(out, body)
    HEAD = _head()
    report: dict[str, Any] = {
        "store": redacted_url(url),
        "stored": stored,
        "code": HEAD,
        "status": _status(stored),
    }
    if out.json:
        out.document(report)
    else:
        out.text(f"store   {report['store']}\nstored  {stored}\ncode    {HEAD}\nstatus  {report['status']}")
    return EXIT_OK


def upgrade_command(out: Out) -> int:
    """Bring the store to the code's version (creating it when empty); refuses a newer store."""
    from wakeful.harness.config import redacted_url

    url = store_url()

    async def body() -> dict[str, Any]:
        from wakeful.harness.ops import store_admin

        # node_lock: a running node on the same SQLite file refuses the upgrade (harness.md §3)
        return await store_admin.upgrade(url, node_lock=True)

    try:
        report = {"store": redacted_url(url), **_run(out, body)}
    except WakefulError as exc:
        out.fail(exc)
    if out.json:
        out.document(report)
    elif report["from"] == report["to"]:
        out.text(f"schema already at version {report['to']}")
    else:
        where = f" (backup: {report['backup']})" if report["backup"] else ""
        out.text(f"schema upgraded from {report['from'] or 'empty'} to {report['to']}{where}")
    return EXIT_OK


def prune_command(out: Out, *, retention_s: int, messages_older_than_days: int | None) -> int:
    """harness.md §3 retention: settled events, idle rate buckets, unreferenced artifacts (30 days), and
    messages older than the given age only when asked."""
    url = store_url()

    async def body() -> dict[str, int]:
        from wakeful.harness.ops import store_admin

        return await store_admin.prune(url, retention_s=retention_s, messages_older_than_days=messages_older_than_days)

    try:
        removed = _run(out, body)
    except WakefulError as exc:
        out.fail(exc)
    if out.json:
        out.document({"removed": removed, "retention_s": retention_s})
    else:
        out.text("removed " + ", ".join(f"{n} {what}" for what, n in removed.items())
                 + f" (settled events kept {retention_s} s)")
    return EXIT_OK


def backup_command(out: Out, target: Path) -> int:
    """A consistent copy of the SQLite store at ``target`` (``VACUUM INTO``; never overwrites)."""
    url = store_url()

    async def body() -> Path:
        from wakeful.harness.ops import store_admin

        return await store_admin.backup(url, target)

    try:
        written = _run(out, body)
    except WakefulError as exc:
        out.fail(exc)
    if out.json:
        out.document({"backup": str(written)})
    else:
        out.text(f"backup written to {written}")
    return EXIT_OK
