"""`wakeful goal | work | gate | evidence | effect | next` in remote mode: the control-plane routes of
interfaces.md §2.2 behind the same methods the local commands call on ``Control``.

``RemoteControl`` answers each read and command with one API call (pages followed into one list), so every
command body runs unchanged; the actor is the key's principal, or ``--agent`` sent as ``X-Wakeful-Agent``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from wakeful.cli.goal_cmd import GoalCli
from wakeful.cli.output import UsageError
from wakeful.cli.remote import AGENT_HEADER, Remote, RemoteError, connect, refuse_local, segment

if TYPE_CHECKING:
    from wakeful.control import Actor, Control

__all__ = ["RemoteControl", "RemoteGoalCli", "run"]

T = TypeVar("T")
COMMIT_LIMIT = 200  # GET …/commits answers at most this many a call


def run(agent: str | None, body: Callable[[GoalCli], Awaitable[T]]) -> T:
    """Run one control command body against the server (``--server``/``--key``)."""
    cli = RemoteGoalCli(RemoteControl(connect()), agent)

    async def go() -> T:
        return await body(cli)

    return asyncio.run(go())


def _acting(agent: str | None) -> dict[str, str]:
    return {AGENT_HEADER: agent} if agent else {}


class RemoteControl:
    """The ``Control`` methods the CLI calls, over HTTP (sync calls inside ``async`` methods: one at a time)."""

    def __init__(self, r: Remote) -> None:
        self.r = r

    def group_path(self, group_id: str | None = None) -> str:
        """``G`` of the named group, else of the key's group (an admin key names none: ``forbidden``)."""
        return f"/v1/agent-groups/{segment(group_id, 'group')}" if group_id else self.r.prefix()

    def goal_path(self, goal_id: str, tail: str = "") -> str:
        return f"{self.group_path()}/goals/{segment(goal_id, 'goal')}{tail}"

    def _dict(self, value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise RemoteError("invalid_response", f"{what} did not answer a JSON object", status=200)
        return value

    # ---- reads

    async def goal(self, goal_id: str) -> dict[str, Any]:
        found = self._dict(self.r.get(self.goal_path(goal_id)), "GET G/goals/{id}")
        return self._dict(found.get("goal"), "GET G/goals/{id}")

    async def goals(self, group_id: str, *, status: str | None = None,
                    agent_id: str | None = None) -> list[dict[str, Any]]:
        # an agent principal sees the goals it is registered on (the route filters by the caller)
        return self.r.pages(f"{self.group_path(group_id)}/goals", headers=_acting(agent_id), status=status)

    async def status(self, goal_id: str) -> dict[str, Any]:
        return self._dict(self.r.get(self.goal_path(goal_id, "/status")), "GET …/status")

    async def board(self, goal_id: str) -> dict[str, Any]:
        return self._dict(self.r.get(self.goal_path(goal_id, "/board")), "GET …/board")

    async def items(self, goal_id: str, *, status: str | None = None, cls: str | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"status": status, "class": cls}  # `class` is a Python keyword
        return self.r.pages(self.goal_path(goal_id, "/work"), **params)

    async def item(self, goal_id: str, item_id: str) -> dict[str, Any]:
        return self._dict(self.r.get(self.goal_path(goal_id, f"/work/{segment(item_id, 'item')}")), "GET …/work/{id}")

    async def acceptance(self, goal_id: str, *, revision: int | None = None) -> dict[str, Any]:
        return self._dict(self.r.get(self.goal_path(goal_id, "/acceptance"), revision=revision), "GET …/acceptance")

    async def evidence(self, goal_id: str, *, item: str | None = None,
                       criterion: str | None = None) -> list[dict[str, Any]]:
        return self.r.pages(self.goal_path(goal_id, "/evidence"), item=item, criterion=criterion)

    async def effects(self, goal_id: str, *, state: str | None = None) -> list[dict[str, Any]]:
        return self.r.pages(self.goal_path(goal_id, "/effects"), state=state)

    async def commits(self, goal_id: str, *, after_seq: int = 0, limit: int = 50) -> list[dict[str, Any]]:
        page = self._dict(self.r.get(self.goal_path(goal_id, "/commits"), after_seq=after_seq,
                                     limit=max(1, min(limit, COMMIT_LIMIT))), "GET …/commits")
        items = page.get("items")
        if not isinstance(items, list):
            raise RemoteError("invalid_response", "GET …/commits did not answer {items}", status=200)
        return items

    async def receipt(self, goal_id: str, operation_id: str) -> dict[str, Any]:
        return self._dict(self.r.get(self.goal_path(goal_id, f"/receipts/{segment(operation_id, 'operation')}")),
                          "GET …/receipts/{id}")

    async def next(self, agent_id: str, goal_id: str | None = None, *, claim: bool = False,
                   key: str | None = None, ttl_s: int | None = None) -> dict[str, Any]:
        """``GET G/next`` (read-only), or ``POST G/next`` to claim — as the agent itself (``X-Wakeful-Agent``)."""
        path = f"{self.group_path()}/next"
        if not claim:
            return self._dict(self.r.get(path, agent_id=agent_id, goal_id=goal_id), "GET G/next")
        body = {k: v for k, v in (("agent_id", agent_id), ("goal_id", goal_id), ("claim", True), ("key", key),
                                  ("ttl_s", ttl_s)) if v is not None}
        return self._dict(self.r.request("POST", path, json=body, headers=_acting(agent_id)), "POST G/next")

    # ---- commands

    async def validate(self, goal_id: str, criterion_id: str, agent_id: str | None) -> dict[str, Any]:
        path = self.goal_path(goal_id, f"/criteria/{segment(criterion_id, 'criterion')}/validate")
        return self._dict(self.r.request("POST", path, headers=_acting(agent_id)), "POST …/validate")

    async def submit(self, actor: Actor, envelope: dict[str, Any]) -> dict[str, Any]:
        """``POST G/goals`` for ``goal.create`` (no goal yet), else ``POST G/goals/{id}/commands``; an agent actor
        is sent as ``X-Wakeful-Agent`` (the server takes the actor from the key, never from the body)."""
        headers = _acting(actor.id if actor.kind == "agent" else None)
        command = dict(envelope.get("command") or {})
        goal_id = envelope.get("goal_id")
        if goal_id is None and command.get("type") == "goal.create":
            command.pop("type")
            body = {"operation_id": envelope.get("operation_id"), **command}
            made = self._dict(self.r.request("POST", f"{self.group_path(actor.group_id)}/goals", json=body,
                                             headers=headers), "POST G/goals")
            return self._dict(made.get("receipt"), "POST G/goals")
        if not isinstance(goal_id, str):
            raise UsageError("a control command needs a goal id")
        return self._dict(self.r.request("POST", self.goal_path(goal_id, "/commands"), json=dict(envelope),
                                         headers=headers), "POST …/commands")

    async def rebuild(self, goal_id: str | None = None, *, check_log: bool = False) -> dict[str, Any]:
        refuse_local("wakeful goal rebuild")  # the projection cache is the node's own: no route (interfaces.md §2.2)
        raise AssertionError("unreachable: remote mode refuses")


class RemoteGoalCli(GoalCli):
    """``GoalCli`` over ``RemoteControl``: the actor's group is the one named, else the key's."""

    def __init__(self, control: RemoteControl, agent: str | None) -> None:
        super().__init__(cast("Control", control), agent)  # duck-typed: the methods the commands call
        self.remote = control

    async def actor(self, goal_id: str | None = None, group_id: str | None = None) -> Actor:
        from wakeful.control import Actor

        group = group_id or self.remote.r.group()
        if self.agent is not None:
            return Actor("agent", self.agent, group)
        return Actor("person", "cli", group)  # the server records the key's own principal
