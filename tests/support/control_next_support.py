"""Helpers for the control-plane ``next``/projection/Loop/face tests: a tenant on a store, actors, and terse
command calls (unique operation ids, item ids out of receipts)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from wakeful.control import rows
from wakeful.control.actor import Actor
from wakeful.control.next import next_decision
from wakeful.harness.store import agents, groups

_ops = itertools.count(1)


def changed_id(receipt: dict[str, Any], entity: str) -> str:
    return str(next(c["id"] for c in receipt["changed"] if c["entity"] == entity))


async def kernel_submit(store: Any, actor: Actor, envelope: dict[str, Any]) -> dict[str, Any]:
    from wakeful.control.kernel import commit_command

    return await commit_command(store, actor, envelope, claim_ttl_s=1800, intent_grace_s=60)


@dataclass
class Ctl:
    """One group with one person and one registered-to-be agent on ``store``."""

    store: Any
    group_id: str
    agent: str
    submitter: Any = None
    person: Actor = field(init=False)
    agent_actor: Actor = field(init=False)

    def __post_init__(self) -> None:
        self.person = Actor("person", "key_person", self.group_id)
        self.agent_actor = Actor("agent", self.agent, self.group_id)

    @classmethod
    async def open(cls, store: Any, submitter: Any = None, name: str = "seed") -> Ctl:
        async with store.tx() as tx:
            group = await groups.create_group(tx, name=f"g-{name}-{next(_ops)}")
            agent = await agents.create_agent(tx, group_id=group.id, name=f"{name}-agent")
        return cls(store, group.id, agent.id, submitter)

    async def new_agent(self, name: str) -> str:
        async with self.store.tx() as tx:
            return (await agents.create_agent(tx, group_id=self.group_id, name=name)).id

    async def submit(self, actor: Actor, envelope: dict[str, Any]) -> dict[str, Any]:
        if self.submitter is not None:
            return dict(await self.submitter.submit(actor, envelope))
        return await kernel_submit(self.store, actor, envelope)

    async def next(self, goal_id: str | None = None, *, claim: bool = False, agent: str | None = None) -> dict[str, Any]:
        return await next_decision(self.store, self.submit, agent or self.agent, goal_id, claim=claim)

    def on(self, goal_id: str) -> GoalOps:
        return GoalOps(self, goal_id)

    async def ctl_reads_evidence(self, goal_id: str) -> list[dict[str, Any]]:
        async with self.store.tx(readonly=True) as tx:
            return await rows.load_evidence(tx, goal_id)


@dataclass
class GoalOps:
    ctl: Ctl
    goal_id: str

    async def cmd(self, actor: Actor, type_: str, *, expected: dict[str, Any] | None = None,
                  operation_id: str | None = None, **fields: Any) -> dict[str, Any]:
        envelope: dict[str, Any] = {"operation_id": operation_id or f"op-{next(_ops)}", "goal_id": self.goal_id,
                                    "command": {"type": type_, **fields}}
        if expected:
            envelope["expected"] = expected
        return await self.ctl.submit(actor, envelope)

    async def add(self, actor: Actor, cls: str, title: str, **fields: Any) -> str:
        return changed_id(await self.cmd(actor, "work.add", title=title, **{"class": cls}, **fields), "item")

    async def item(self, item_id: str) -> dict[str, Any]:
        async with self.ctl.store.tx(readonly=True) as tx:
            found = await rows.load_item(tx, self.goal_id, item_id)
        assert found is not None
        return found

    async def revision(self, item_id: str) -> int:
        return int((await self.item(item_id))["revision"])
