"""Helpers for the control kernel's tests: a group with agents on a ``store``, actors, and a ``Kit`` that builds
envelopes with fresh operation ids."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from wakeful.control import Actor, Control
from wakeful.harness.store import Store, agents, groups


@dataclass
class Kit:
    """A group with ``n`` agents (``a[0]`` … registered by ``setup``), a person, an operator, and ``Control``."""

    control: Control
    group_id: str
    agents: list[Actor]
    person: Actor
    goal_id: str = ""
    _ops: itertools.count[int] = field(default_factory=itertools.count)

    def op(self) -> str:
        return f"op-{next(self._ops)}"

    async def run(self, actor: Actor, command: dict[str, Any], *, expected: dict[str, Any] | None = None,
                  op: str | None = None, goal_id: str | None = None) -> dict[str, Any]:
        envelope: dict[str, Any] = {"operation_id": op or self.op(), "command": command}
        if command["type"] != "goal.create":
            envelope["goal_id"] = goal_id or self.goal_id
        if expected is not None:
            envelope["expected"] = expected
        return await self.control.submit(actor, envelope)

    async def item_rev(self, item_id: str) -> int:
        return int((await self.control.item(self.goal_id, item_id))["revision"])

    async def add(self, actor: Actor | None = None, **fields: Any) -> str:
        fields.setdefault("class", "advancement")
        fields.setdefault("title", "work")
        receipt = await self.run(actor or self.person, {"type": "work.add", **fields})
        return str(next(c["id"] for c in receipt["changed"] if c["entity"] == "item" and c["revision"] == 1))


async def make_kit(store: Store, *, n_agents: int = 3, claim_mode: str = "soft", register: bool = True,
                   **control_kw: Any) -> Kit:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        made = [await agents.create_agent(tx, group_id=group.id, name=f"a{i}") for i in range(n_agents)]
    control = Control(store, **control_kw)
    await control.open()
    kit = Kit(control, group.id, [Actor("agent", a.id, group.id) for a in made], Actor("person", "key_p", group.id))
    receipt = await kit.run(kit.person, {"type": "goal.create", "title": "goal", "objective": "ship it",
                                         "claim_mode": claim_mode, "subjects": {"code": "git:r1"}})
    kit.goal_id = receipt["goal_id"]
    if register:
        for a in kit.agents:
            await kit.run(a, {"type": "agent.register", "agent_id": a.id})
    return kit
