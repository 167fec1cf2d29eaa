"""Who calls an operation (interfaces.md §1): the key's role and scope and the agent it acts as, and the checks
every operation applies with it. Faces authenticate (a bearer key, a dashboard cookie, the local operator) and
hand the resulting :class:`Principal` to ``wakeful.harness.ops``; they never check scope themselves.

Resources outside a principal's scope are ``not_found`` (never ``forbidden``); a principal lacking the role for
an operation inside its scope is ``forbidden``.
"""

from __future__ import annotations

from dataclasses import dataclass

from wakeful.harness.errors import Forbidden, NotFound

__all__ = ["OPERATOR", "Principal", "check_agent", "check_group", "require_admin", "require_person"]


@dataclass(frozen=True, slots=True)
class Principal:
    """The key's role and scope, and the agent it acts as (None for a person).

    ``operator`` marks the local command line and embedding programs: admin authority, recorded as
    ``operator`` in transitions and receipts instead of a key id."""

    role: str  # admin | group | agent
    key_id: str
    group_id: str | None  # the key's group (None for admin)
    agent_id: str | None  # the agent principal's agent; None for a person principal
    agent_group_id: str | None = None  # the group of ``agent_id`` (admin keys acting as an agent)
    operator: bool = False

    @property
    def kind(self) -> str:
        """``agent`` or ``person`` (interfaces.md §1)."""
        return "agent" if self.agent_id is not None else "person"

    @property
    def actor(self) -> str:
        """The actor recorded in transitions and receipts."""
        if self.operator:
            return "operator"
        return f"agent:{self.agent_id}" if self.agent_id is not None else f"key:{self.key_id}"

    def covers_group(self, group_id: str) -> bool:
        if self.role == "admin":
            return self.agent_group_id is None or self.agent_group_id == group_id
        return self.group_id == group_id

    def sees_agent(self, agent_id: str) -> bool:
        """An agent principal sees only its own agent; a person principal every agent of its group."""
        return self.agent_id is None or self.agent_id == agent_id

    def acting_as(self, agent_id: str, group_id: str) -> Principal:
        """This principal acting as one agent of ``group_id`` (an admin or group key with ``X-Wakeful-Agent``,
        the operator's ``wakeful mcp --embedded``)."""
        return Principal(self.role, self.key_id, self.group_id, agent_id, group_id, self.operator)


OPERATOR = Principal("admin", "operator", None, None, operator=True)
"""The local operator: the command line on the node's own store, and embedding programs."""


def check_group(principal: Principal, group_id: str) -> None:
    """A group outside the principal's scope is ``not_found``."""
    if not principal.covers_group(group_id):
        raise NotFound(f"group {group_id[:40]} not found")


def check_agent(principal: Principal, agent_id: str) -> None:
    """An agent principal naming another agent: ``not_found`` (the resource is outside its scope)."""
    if not principal.sees_agent(agent_id):
        raise NotFound(f"agent {agent_id[:40]} not found")


def require_admin(principal: Principal) -> None:
    """Admin keys (and the operator) only: others are ``forbidden``."""
    if principal.role != "admin":
        raise Forbidden("this operation needs an admin key")


def require_person(principal: Principal, group_id: str) -> None:
    """A group or admin key of this group ("group" auth): an agent key in the group is ``forbidden``."""
    check_group(principal, group_id)
    if principal.role == "agent":
        raise Forbidden("this operation needs a group or admin key")
