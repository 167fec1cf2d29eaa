"""Loop operations (interfaces.md §2.2 "Loops"): detail, logs, transitions.

Each answers exactly what its HTTP route answers; see ``wakeful.harness.ops.table``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import InvalidRequest
from wakeful.harness.ops.scope import loop_in_scope
from wakeful.harness.ops.table import operation
from wakeful.harness.store import loops
from wakeful.harness.views import loop_object

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = ["get", "log_line", "logs", "transitions"]

G = "/v1/agent-groups/{group_id}"
INCLUDES = ("checkpoint", "logs", "pending")


def log_line(line: loops.LogLine) -> dict[str, Any]:
    return {"seq": line.seq, "at_ms": line.at_ms, "incarnation": line.incarnation, "source": line.source,
            "text": line.text}


@operation("loops.get", "GET", G + "/loops/{loop_id}")
async def get(harness: Harness, principal: Principal, *, group_id: str, loop_id: str,
              include: str | None = None) -> dict[str, Any]:
    """The Loop object, with ``include`` (comma-separated ``checkpoint,logs,pending``) parts added."""
    row = await loop_in_scope(harness, principal, group_id, loop_id)
    wanted = {part for part in (include or "").split(",") if part}
    unknown = wanted - set(INCLUDES)
    if unknown:
        raise InvalidRequest(f"include takes checkpoint, logs, pending (not {sorted(unknown)[0]})", field="include")
    out = loop_object(harness, await harness.loops.get(loop_id), row)
    if "checkpoint" in wanted:
        out["checkpoint"] = row.checkpoint
    if "logs" in wanted:
        await harness.node.flush_logs()
        async with harness.store.tx(readonly=True) as tx:
            out["logs"] = [log_line(line) for line in await loops.list_logs(tx, loop_id, limit=50)]
    if "pending" in wanted:
        listed = await harness.events(loop_id, "list", status="pending", limit=200)
        out["pending"] = listed.get("events", [])
    return out


@operation("loops.logs", "GET", G + "/loops/{loop_id}/logs")
async def logs(harness: Harness, principal: Principal, *, group_id: str, loop_id: str,
               after_seq: int | None = None, limit: int = 200) -> dict[str, Any]:
    """Stored log lines, oldest first, after the node's buffer is flushed."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    await harness.node.flush_logs()
    async with harness.store.tx(readonly=True) as tx:
        lines = await loops.list_logs(tx, loop_id, limit=limit, after_seq=after_seq)
    return {"items": [log_line(line) for line in lines], "next_after_seq": lines[-1].seq if lines else after_seq}


@operation("loops.transitions", "GET", G + "/loops/{loop_id}/transitions")
async def transitions(harness: Harness, principal: Principal, *, group_id: str, loop_id: str) -> dict[str, Any]:
    """The newest state transitions."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    async with harness.store.tx(readonly=True) as tx:
        found = await loops.list_transitions(tx, loop_id)
    return {"items": [{"seq": t.seq, "at_ms": t.at_ms, "from_state": t.from_state, "from_reason": t.from_reason,
                       "to_state": t.to_state, "to_reason": t.to_reason, "incarnation": t.incarnation,
                       "actor": t.actor, "detail": t.detail} for t in found]}
