"""The public view of a Loop: its row without budget internals, pending payloads or secret digests,
plus ``pending_count``, ``webhook_enabled`` and a ``runtime`` view (harness.md §2.5).
"""

from __future__ import annotations

from typing import Any

from wakeful.harness.store.loops import Loop

__all__ = ["loop_view", "runtime_view"]

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


def loop_view(row: Loop, *, pending_count: int, runtime: str) -> dict[str, Any]:
    """The dict every face returns for a Loop."""
    view = {name: getattr(row, name) for name in _PUBLIC}
    view["loop_id"] = row.id
    view["config"] = row.config
    view["capabilities"] = row.capabilities
    view["pending_count"] = pending_count
    view["webhook_enabled"] = row.webhook_secret_sha256 is not None
    view["runtime"] = runtime
    return view
