"""Random command sequences from several agents and a person (hypothesis), on SQLite and PostgreSQL:

- the cached projection, a recomputation after dropping every cache row, and a rebuild from the commit log alone
  are byte-identical (control-plane.md §8, §10 "projections");
- a stale cache row is never served;
- ``next`` never offers what the kernel then refuses: a ``start`` is always claimable (§7.1 ``claim: true``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.control_next_support import Ctl, GoalOps

from wakeful.control import projections
from wakeful.control import schema as S
from wakeful.control.canonical import canonical
from wakeful.control.errors import ControlRefused

N_AGENTS = 3
OPS = st.tuples(
    st.sampled_from(["add", "add_dep", "add_scoped", "add_ws", "gate", "claim", "evidence", "complete", "block", "defer",
                     "reopen", "cancel", "ask", "resolve", "subject", "accept", "intend", "settle", "release"]),
    st.integers(0, N_AGENTS - 1), st.integers(0, 7), st.integers(0, 3),
)


class World:
    """Interprets abstract ops against one goal; refusals are expected and leave nothing behind."""

    def __init__(self, ctl: Ctl, g: GoalOps, agents: list[str]) -> None:
        self.ctl, self.g, self.agents = ctl, g, agents
        self.items: list[str] = []
        self.claims: dict[str, tuple[str, int, str]] = {}  # item → (holder, epoch, key)
        self.acceptance = 0
        self.subject = 0
        self.effects: list[str] = []

    def actor(self, i: int) -> Any:
        return self.ctl.agent_actor.__class__("agent", self.agents[i], self.ctl.group_id)

    def pick(self, n: int) -> str | None:
        return self.items[n % len(self.items)] if self.items else None

    async def fenced(self, item: str) -> dict[str, Any]:
        expected: dict[str, Any] = {"item_revision": await self.g.revision(item)}
        if item in self.claims:
            _, epoch, key = self.claims[item]
            expected["claim"] = {"epoch": epoch, "key": key}
        return expected

    async def apply(self, op: str, a: int, n: int, k: int) -> None:
        person, agent, item = self.ctl.person, self.actor(a), self.pick(n)
        g = self.g
        if op.startswith("add") or item is None:
            fields: dict[str, Any] = {"priority": k}
            if op == "add_dep" and item is not None:
                fields["depends_on"] = [item]
            if op == "add_scoped":
                fields["required_scopes"] = [f"production:action:s{k}"]
            if op == "add_ws":
                fields["write_scopes"] = [("src/", "src/api/", "docs/", "src/api/x.py")[k]]
            self.items.append(await g.add(agent if k % 2 else person, "advancement", f"t{len(self.items)}",
                                          **fields))
        elif op == "gate":
            self.items.append(await g.add(person, "user_gate", "decide", scope=f"production:goal:s{k}",
                                          targets=[item], question="go?"))
        elif op == "claim":
            receipt = await g.cmd(agent, "claim.acquire", item=item, key=f"k-{a}-{n}")
            c = receipt["claim"]
            self.claims[item] = (c["holder"], c["epoch"], c["key"])
        elif op == "evidence":
            await g.cmd(agent, "evidence.add", item=item, criterion_ids=["c0"], kind="test", subject="repo",
                        artifact_revision=f"git:{self.subject}", verdict="pass" if k else "fail")
        elif op == "complete":
            holder = self.claims.get(item, (self.agents[a],))[0]
            actor = self.ctl.agent_actor.__class__("agent", holder, self.ctl.group_id)
            await g.cmd(actor, "work.complete", item=item, expected=await self.fenced(item))
        elif op == "block":
            await g.cmd(person, "work.block", item=item, reason="r", expected=await self.fenced(item),
                        **({"resume_when": [f"time:{k}"]} if k % 2 else {}))
        elif op == "defer":
            await g.cmd(person, "work.defer", item=item, resume_when=[f"work_done:{self.pick(n + 1)}"],
                        expected=await self.fenced(item))
        elif op == "reopen":
            await g.cmd(person, "work.reopen", item=item, expected=await self.fenced(item))
        elif op == "cancel":
            await g.cmd(person, "work.cancel", item=item, expected=await self.fenced(item))
        elif op == "ask":
            await g.cmd(agent, "gate.ask", item=item, expected=await self.fenced(item))
        elif op == "resolve":
            await g.cmd(person, "gate.resolve", item=item, outcome=("approve", "reject", "cancel", "approve")[k],
                        expected=await self.fenced(item))
        elif op == "subject":
            self.subject += 1
            await g.cmd(agent, "subject.set", name="repo", revision=f"git:{self.subject}")
        elif op == "accept":
            doc = {"criteria": [{"id": "c0", "text": f"v{k}", "subject": "repo"}]}
            await g.cmd(person, "acceptance.set", document=doc, bindings={item: ["c0"]},
                        expected={"acceptance_revision": self.acceptance})
            self.acceptance += 1
        elif op == "intend":
            key = f"fx-{len(self.effects)}"
            await g.cmd(agent, "effect.intend", request_key=key, kind="http.post", target="t", payload_digest="d",
                        item=item)
            self.effects.append(key)
        elif op == "settle" and self.effects:
            await g.cmd(agent, "effect.settle", request_key=self.effects[n % len(self.effects)], attempt=1,
                        state=("succeeded", "failed", "unknown", "succeeded")[k])
        elif op == "release" and item in self.claims:
            _, epoch, key = self.claims[item]
            await g.cmd(person, "claim.release", item=item, expected={"claim": {"epoch": epoch, "key": key}})


async def run_sequence(ctl: Ctl, ops: list[tuple[str, int, int, int]]) -> None:
    person = ctl.person
    goal = (await ctl.submit(person, {"operation_id": f"goal-{id(ops)}-{len(ops)}-{asyncio.get_running_loop().time()}",
                                      "command": {"type": "goal.create", "title": "g", "objective": "o",
                                                  "subjects": {"repo": "git:0"}}}))["goal_id"]
    g = ctl.on(goal)
    agents = [ctl.agent] + [await ctl.new_agent(f"peer{i}") for i in range(1, N_AGENTS)]
    for agent in agents:
        await g.cmd(person, "agent.register", agent_id=agent)
    world = World(ctl, g, agents)
    for step, op in enumerate(ops):
        with contextlib.suppress(ControlRefused):
            await world.apply(*op)
        if step % 4 == 3:  # serve (and cache) mid-sequence, so later reads must notice the stale rows
            await projections.read(ctl.store, goal, "board")
    await check_projections(ctl.store, goal)
    await check_next_is_claimable(ctl, goal, agents)


def body(served: dict[str, Any]) -> str:
    return canonical({k: v for k, v in served.items() if k not in ("generated_ms", "cached")})


async def check_projections(store: Any, goal: str) -> None:
    for kind in projections.KINDS:
        served = await projections.read(store, goal, kind)
        async with store.tx(readonly=True) as tx:
            revision = (await tx.execute(sa.select(S.goal.c.revision).where(S.goal.c.id == goal))).scalar()
        assert served["source_revision"] == revision  # never a stale cache row
        assert body(served) == canonical(await projections.from_log(store, goal, kind)), kind
        await projections.rebuild(store, goal)
        rebuilt = await projections.read(store, goal, kind)
        assert rebuilt["cached"] is True and body(rebuilt) == body(served)


async def check_next_is_claimable(ctl: Ctl, goal: str, agents: list[str]) -> None:
    for agent in agents:
        decision = await ctl.next(goal, agent=agent)
        assert decision["decision"] in ("deliver", "ask_person", "wait", "replan", "stop"), decision
        if decision.get("action") == "start":
            claimed = await ctl.next(goal, agent=agent, claim=True)  # must not raise
            assert claimed["claim"]["claim"]["item"] == claimed["item"]["id"]
            assert claimed["claim"]["claim"]["holder"] == agent


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=30))
def test_projections_rebuild_and_next_claimable(store: Any, harness_runner: asyncio.Runner,
                                                ops: list[tuple[str, int, int, int]]) -> None:
    ctl = harness_runner.run(Ctl.open(store, name="prop"))
    harness_runner.run(run_sequence(ctl, ops))
