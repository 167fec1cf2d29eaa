"""The HTTP route of every operation (interfaces.md §2.2), as data alone: what a remote client
(:class:`~.backend.HttpBackend`: the CLI's ``--server`` mode, the MCP thin client) needs to send an operation,
without importing the operations — and with them the store and SQLAlchemy (docs/decisions-cli-start.md). The
control plane's routes are here too: data, not an import of the layer above.

The operation modules register their functions with :func:`~.table.operation`, which refuses a route that is not
this table's, so the two cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ROUTES", "Route", "route_named"]

_PATH_PARAM = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class Route:
    """``method path`` offering the operation ``name``; ``query`` names the arguments of a POST/PUT that travel
    in the query string (GET and DELETE send all of them there); ``status`` is the success status."""

    name: str
    method: str
    path: str
    query: tuple[str, ...] = ()
    status: int = 200

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(_PATH_PARAM.findall(self.path))


ROUTES: dict[str, Route] = {route.name: route for route in (
    Route("agents.create", "POST", "/v1/agent-groups/{group_id}/agents", status=201),
    Route("agents.list", "GET", "/v1/agent-groups/{group_id}/agents"),
    Route("agents.get", "GET", "/v1/agent-groups/{group_id}/agents/{agent_id}"),
    Route("agents.archive", "POST", "/v1/agent-groups/{group_id}/agents/{agent_id}/archive"),
    Route("agents.unarchive", "POST", "/v1/agent-groups/{group_id}/agents/{agent_id}/unarchive"),
    Route("sdk.get", "GET", "/v1/agent-groups/{group_id}/sdk"),
    Route("builds.create", "POST", "/v1/agent-groups/{group_id}/builds"),
    Route("builds.test", "POST", "/v1/agent-groups/{group_id}/loops/test"),
    Route("artifacts.upload", "POST",
          "/v1/agent-groups/{group_id}/artifacts", query=("path", "agent_id"), status=201),
    Route("artifacts.get", "GET", "/v1/agent-groups/{group_id}/artifacts/{sha256}"),
    Route("events.list", "GET", "/v1/agent-groups/{group_id}/loops/{loop_id}/events"),
    Route("events.retry", "POST", "/v1/agent-groups/{group_id}/loops/{loop_id}/pending/retry"),
    Route("events.discard", "POST", "/v1/agent-groups/{group_id}/loops/{loop_id}/pending/discard"),
    Route("events.send", "POST", "/v1/agent-groups/{group_id}/loops/{loop_id}/events", status=202),
    Route("groups.create", "POST", "/v1/groups", status=201),
    Route("groups.list", "GET", "/v1/groups"),
    Route("keys.create", "POST", "/v1/groups/{group_id}/keys", status=201),
    Route("keys.list", "GET", "/v1/groups/{group_id}/keys"),
    Route("keys.revoke", "DELETE", "/v1/groups/{group_id}/keys/{key_id}", status=204),
    Route("loops.create", "POST", "/v1/agent-groups/{group_id}/loops", status=201),
    Route("loops.list", "GET", "/v1/agent-groups/{group_id}/loops"),
    Route("loops.get", "GET", "/v1/agent-groups/{group_id}/loops/{loop_id}"),
    Route("loops.pause", "POST", "/v1/agent-groups/{group_id}/loops/{loop_id}/pause"),
    Route("loops.resume", "POST", "/v1/agent-groups/{group_id}/loops/{loop_id}/resume"),
    Route("loops.delete", "DELETE", "/v1/agent-groups/{group_id}/loops/{loop_id}", status=204),
    Route("loops.logs", "GET", "/v1/agent-groups/{group_id}/loops/{loop_id}/logs"),
    Route("loops.transitions", "GET", "/v1/agent-groups/{group_id}/loops/{loop_id}/transitions"),
    Route("sessions.create", "POST", "/v1/agent-groups/{group_id}/agents/{agent_id}/sessions", status=201),
    Route("sessions.list", "GET", "/v1/agent-groups/{group_id}/agents/{agent_id}/sessions"),
    Route("sessions.delete", "DELETE", "/v1/agent-groups/{group_id}/sessions/{session_id}", status=204),
    Route("messages.list", "GET", "/v1/agent-groups/{group_id}/sessions/{session_id}/messages"),
    Route("messages.handled", "POST", "/v1/agent-groups/{group_id}/sessions/{session_id}/messages/handled"),
    Route("nodes.list", "GET", "/v1/nodes"),
    Route("scripts.run", "POST", "/v1/agent-groups/{group_id}/scripts/run"),
    Route("webhooks.webhook", "POST", "/v1/agent-groups/{group_id}/loops/{loop_id}/webhook"),
    Route("webhooks.set_verifier", "PUT", "/v1/agent-groups/{group_id}/loops/{loop_id}/webhook/verifier"),
    Route("webhooks.get_verifier", "GET", "/v1/agent-groups/{group_id}/loops/{loop_id}/webhook/verifier"),
    Route("webhooks.clear_verifier", "DELETE",
          "/v1/agent-groups/{group_id}/loops/{loop_id}/webhook/verifier", status=204),
    # the control plane's operations (wakeful.control.ops registers them; a remote `wakeful goal …` sends them
    # without loading the control plane)
    Route("goals.create", "POST", "/v1/agent-groups/{group_id}/goals", status=201),
    Route("goals.list", "GET", "/v1/agent-groups/{group_id}/goals"),
    Route("goals.get", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}"),
    Route("goals.submit", "POST", "/v1/agent-groups/{group_id}/goals/{goal_id}/commands"),
    Route("goals.validate", "POST",
          "/v1/agent-groups/{group_id}/goals/{goal_id}/criteria/{criterion_id}/validate"),
    Route("goals.status", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/status"),
    Route("goals.board", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/board"),
    Route("work.list", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/work"),
    Route("work.get", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/work/{item_id}"),
    Route("goals.acceptance", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/acceptance"),
    Route("goals.evidence", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/evidence"),
    Route("goals.effects", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/effects"),
    Route("goals.commits", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/commits"),
    Route("goals.receipt", "GET", "/v1/agent-groups/{group_id}/goals/{goal_id}/receipts/{operation_id}"),
    Route("next.get", "GET", "/v1/agent-groups/{group_id}/next"),
    Route("next.claim", "POST", "/v1/agent-groups/{group_id}/next"),
)}


def route_named(name: str) -> Route:
    found = ROUTES.get(name)
    if found is None:
        raise KeyError(f"no operation named {name}")
    return found
