"""The public view of a Loop: its row without budget internals, pending payloads or secret digests,
plus ``pending_count``, ``webhook_enabled`` and a ``runtime`` view (harness.md §2.5); and the Loop object every
face answers (interfaces.md §2.2), built here once because the faces may not import each other.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.harness.store import schema
from wakeful.harness.store.core import Store
from wakeful.harness.store.loops import Loop, loops_from_rows

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness

__all__ = ["loop_object", "loop_objects", "loop_rows", "loop_view", "runtime_view"]

_PUBLIC = (
    "id", "group_id", "agent_id", "session_id", "name", "state", "pause_reason", "failure", "exit_code",
    "incarnation", "node_id", "object_id", "artifact_sha256", "artifact_path", "creator", "checkpoint_bytes",
    "checkpoint_ms", "dropped_logs", "activated_ms", "created_ms", "updated_ms",
)


# §2.5 runtime view: resident, loading, waiting_capacity, remote (another node), none
def runtime_view(row: Loop, node_id: str | None, resident: bool, waiting: bool) -> str:
    if resident:
        return "resident"
    if waiting:
        return "waiting_capacity"
    if row.state != "active":
        return "none"
    if row.node_id is not None and row.node_id != node_id:
        return "remote"
    return "loading"


_PUBLIC_VALUES = operator.attrgetter(*_PUBLIC)  # issue 16: a listing's 10,000 views, each row read in one call


def loop_view(row: Loop, *, pending_count: int, runtime: str) -> dict[str, Any]:
    """The dict every face returns for a Loop."""
    view = dict(zip(_PUBLIC, _PUBLIC_VALUES(row), strict=True))
    view["loop_id"] = row.id
    view["config"] = row.config
    view["capabilities"] = row.capabilities
    view["pending_count"] = pending_count
    view["webhook_enabled"] = row.webhook_secret_sha256 is not None
    view["runtime"] = runtime
    return view


async def loop_rows(store: Store, ids: Sequence[str]) -> dict[str, Loop]:
    """The Loop rows of one page, in one query."""
    if not ids:
        return {}
    async with store.tx(readonly=True) as tx:
        found = await tx.execute(sa.select(schema.loop).where(schema.loop.c.id.in_(list(ids))))
        return {row.id: row for row in loops_from_rows(found)}


def loop_object(harness: Harness | None, view: Mapping[str, Any], row: Loop | None) -> dict[str, Any]:
    """interfaces.md §2.2: a Loop object as every face answers it (HTTP, /mcp, the MCP thin client): the harness
    view plus ``id``, ``node``, ``artifact`` and — given the row and the harness — ``wakes``, ``reloads`` and
    ``runtime`` as objects (the runtime's object state read from this node's residents)."""
    out = dict(view)
    out.setdefault("id", view.get("loop_id"))
    out.setdefault("node", view.get("node_id"))
    sha = view.get("artifact_sha256")
    out.setdefault("artifact", f"sha256:{sha}" if sha else None)
    if row is None or harness is None:
        return out
    limits = harness.config.limits
    start = row.notify_window_start_ms
    out["wakes"] = {"window_used": row.notify_window_count if start is not None else 0,
                    "window_limit": limits.notify_per_window,
                    "window_resets_ms": start + limits.notify_window_s * 1000 if start is not None else None,
                    "limited_since_ms": row.notify_limited_since_ms, "last_ms": row.last_notified_ms}
    out["reloads"] = {"count": row.reload_count, "window_start_ms": row.reload_window_start_ms}
    runtime: dict[str, Any] = {"state": view.get("runtime"), "node": row.node_id, "object_state": None, "wait": None}
    resident = harness.node.resident(row.id)
    if resident is not None and resident.incarnation == row.incarnation:
        try:  # noqa: SIM105 - a try, not contextlib.suppress: once per Loop of a listing
            runtime["object_state"], runtime["wait"] = harness.node.runtime.state_of(resident.object_id)
        except Exception:  # the object ended between the two reads: no object state to show
            pass
    out["runtime"] = runtime
    return out


async def loop_objects(harness: Harness, views: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``loop_object`` for a page of harness views, reading their rows in one query."""
    ids = [str(view.get("loop_id") or view.get("id")) for view in views]
    rows = await loop_rows(harness.store, ids)
    return [loop_object(harness, view, rows.get(loop_id)) for view, loop_id in zip(views, ids, strict=True)]
