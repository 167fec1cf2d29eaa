"""``next`` with ``claim: true`` from several agents at once (SQLite and PostgreSQL): each agent gets a different
item, a lost race is decided again rather than surfaced, and once the work is all claimed the rest wait on it."""

from __future__ import annotations

import asyncio
from typing import Any

from support.control_next_support import Ctl

from wakeful.control import Control

AGENTS = 6
ITEMS = 4


async def test_concurrent_next_claims(store: Any) -> None:
    control = Control(store)
    ctl = await Ctl.open(store, submitter=control, name="race")
    goal = (await ctl.submit(ctl.person, {"operation_id": "g", "command": {
        "type": "goal.create", "title": "race", "objective": "o"}}))["goal_id"]
    g = ctl.on(goal)
    agents = [ctl.agent] + [await ctl.new_agent(f"r{i}") for i in range(1, AGENTS)]
    for agent in agents:
        await g.cmd(ctl.person, "agent.register", agent_id=agent)
    items = {await g.add(ctl.person, "advancement", f"job {i}", priority=i % 3) for i in range(ITEMS)}

    answers = await asyncio.gather(*(control.next(agent, goal, claim=True) for agent in agents))
    starts = [a for a in answers if a.get("action") == "start"]
    claimed = [a["claim"]["claim"]["item"] for a in starts]
    assert len(starts) == ITEMS and set(claimed) == items  # every item once, never twice
    for answer, agent in zip(answers, agents):
        if answer.get("action") == "start":
            assert answer["claim"]["claim"]["holder"] == agent
        else:  # nothing left: wait on the peers' items (or their claims' expiry)
            assert answer["decision"] == "wait" and answer["wait_kind"] == "no_new_facts"
            assert {w.split(":", 1)[1] for w in answer["wake_when"] if w.startswith("work_done:")} == items
    # the holders are told to continue; the state is consistent in the store
    for answer, agent in zip(answers, agents):
        if answer.get("action") == "start":
            assert (await control.next(agent, goal))["action"] == "continue"
    status = await control.status(goal)
    assert sorted(c["item_id"] for c in status["claims"]) == sorted(items)
