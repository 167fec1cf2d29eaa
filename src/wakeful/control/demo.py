"""The demo goal of ``wakeful serve --demo`` (interfaces.md §8): a goal whose monitor item is backed by the demo's
webhook Loop, with a follow-up item deferred until that Loop wakes and a release gate for a person.

``seed_demo_goal`` is idempotent: fixed operation ids (per Loop) replay on every later start.
"""

from __future__ import annotations

from typing import Any

from wakeful.control.actor import Actor
from wakeful.control.core import Control

__all__ = ["seed_demo_goal"]


def _changed(receipt: dict[str, Any], entity: str) -> str:
    return str(next(c["id"] for c in receipt["changed"] if c["entity"] == entity))


async def seed_demo_goal(h: Any, group_id: str, agent_id: str, loop_id: str) -> dict[str, Any]:
    """Seed (or find again) the demo goal on ``h.control``: returns ``{goal_id, monitor, follow_up, gate,
    release}``. The Loop must be the agent's, in ``group_id``."""
    control: Control = h.control
    operator, agent = Actor("operator", "operator", group_id), Actor("agent", agent_id, group_id)
    created = await control.submit(operator, {"operation_id": "demo:goal", "command": {
        "type": "goal.create", "title": "Demo: react to webhook events",
        "objective": "Watch the demo webhook Loop; when an event arrives, look at it and decide whether to ship.",
        "subjects": {"demo": "v1"}}})
    goal_id = str(created["goal_id"])

    async def run(actor: Actor, op: str, command: dict[str, Any], **expected: Any) -> dict[str, Any]:
        envelope: dict[str, Any] = {"operation_id": f"demo:{op}:{loop_id}", "goal_id": goal_id, "command": command}
        if expected:
            envelope["expected"] = expected
        return await control.submit(actor, envelope)

    await run(operator, "register", {"type": "agent.register", "agent_id": agent_id})
    monitor = _changed(await run(agent, "monitor", {
        "type": "work.add", "class": "monitor", "title": "Watch the demo webhook", "loop_id": loop_id,
        "target": "the demo webhook URL", "priority": 1}), "item")
    follow_up = _changed(await run(agent, "follow-up", {
        "type": "work.add", "class": "advancement", "title": "Look at the first webhook event",
        "detail": "Read the wake in the demo inbox and record what arrived as evidence.", "priority": 1}), "item")
    release = _changed(await run(operator, "release", {
        "type": "work.add", "class": "advancement", "title": "Ship the demo", "priority": 2,
        "depends_on": [follow_up], "required_scopes": ["production:action:demo"]}), "item")
    gate = _changed(await run(operator, "gate", {
        "type": "work.add", "class": "user_gate", "title": "Ship the demo?", "scope": "production:goal:demo",
        "targets": [release], "question": "The webhook fired and was looked at. Ship the demo?",
        "options": ["ship", "hold"]}), "item")
    await run(agent, "defer", {"type": "work.defer", "item": follow_up, "resume_when": [f"loop_wake:{loop_id}"],
                               "reason": "waiting for the first webhook event"}, item_revision=1)
    bridge = getattr(h, "loop_bridge", None)
    if bridge is not None:  # record the Loop's state in the monitor now rather than at the next sweep
        await bridge.on_transition(loop_id)
    return {"goal_id": goal_id, "monitor": monitor, "follow_up": follow_up, "gate": gate, "release": release}
