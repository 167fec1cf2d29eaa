"""control-plane.md §10 "next": metamorphic checks over random goals (hypothesis) — an unrelated gate or a
peer's claim on another item never changes a ``deliver`` decision, and every answer is well formed."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from wakeful.control.next import ClaimView, CriterionView, EffectView, GoalView, ItemView, decide

NOW = 1_767_225_600_000
A, B = "agt_a", "agt_b"
DECISIONS = {"deliver", "ask_person", "wait", "replan", "stop"}
WAITS = {None, "no_new_facts", "independent_work_elsewhere", "invalid_route", "needs_person"}


@st.composite
def goals(draw: Any) -> GoalView:
    n = draw(st.integers(1, 7))
    ids = [f"w_{i}" for i in range(n)]
    items = []
    for i, iid in enumerate(ids):
        status = draw(st.sampled_from(["open", "open", "open", "blocked", "deferred", "done"]))
        cls = draw(st.sampled_from(["advancement", "advancement", "blocker", "monitor", "user_action"]))
        items.append(ItemView(
            id=iid, cls=cls, status=status, title=iid, priority=draw(st.integers(0, 4)), created_ms=i,
            done_kind=draw(st.sampled_from(["completed", "cancelled"])) if status == "done" else None,
            depends_on=tuple(draw(st.lists(st.sampled_from(ids[:i]), max_size=2, unique=True))) if i else (),
            required_scopes=("production:action:x",) if draw(st.integers(0, 5)) == 0 else (),
            blocked_reason="r" if status == "blocked" else None,
            resume_when=("time:5",) if status == "deferred" or (status == "blocked" and draw(st.booleans())) else (),
            loop_id="lp_1" if cls == "monitor" and draw(st.booleans()) else None,
            loop_state=draw(st.sampled_from(["active", "paused"])),
            bound_agent=draw(st.sampled_from([None, None, A, B])),
        ))
    claims = [ClaimView(it.id, draw(st.sampled_from([A, B])), 1, "k", NOW + draw(st.integers(-5, 5)))
              for it in items if it.status == "open" and it.cls != "user_action" and draw(st.integers(0, 3)) == 0]
    effects = [EffectView("ef_1", "k1", draw(st.sampled_from(["intended", "unknown", "succeeded"])),
                          draw(st.sampled_from([A, B])), NOW - draw(st.integers(0, 120_000)))] \
        if draw(st.booleans()) else []
    criteria = [CriterionView("c", draw(st.sampled_from(["pass", "fail", "stale", "missing"])),
                              (draw(st.sampled_from(ids)),))] if draw(st.booleans()) else []
    return GoalView(id="goal_1", status="active", revision=3, agents={A: "active", B: "active"}, items=items,
                    claims=claims, effects=effects, criteria=criteria,
                    acceptance_status="accepted" if not criteria else "partial")


def check_shape(answer: dict[str, Any]) -> None:
    assert answer["decision"] in DECISIONS
    assert answer.get("wait_kind") in WAITS
    assert isinstance(answer["reasons"], list) and answer["reasons"]
    if answer["decision"] == "wait":
        assert answer.get("wake_when") or answer.get("elsewhere") or answer["wait_kind"] == "needs_person"
    if answer.get("action") in ("start", "continue"):
        assert answer["item"]["class"] in ("advancement", "blocker", "monitor")


@settings(max_examples=300, deadline=None)
@given(g=goals(), data=st.data())
def test_unrelated_facts_never_change_a_delivery(g: GoalView, data: Any) -> None:
    base = decide(A, [g], goal_id=g.id, now_ms=NOW)
    check_shape(base)
    if base["decision"] != "deliver":
        return
    chosen = (base.get("item") or {}).get("id")
    key = (base["decision"], base.get("action"), chosen)
    # a gate whose only target is done blocks nothing
    done = [it.id for it in g.items if it.status == "done"]
    if done:
        gate = ItemView(id="w_gate", cls="user_gate", status="open", title="g", scope="production:goal:*",
                        targets=(done[0],), question="?", created_ms=99)
        with_gate = decide(A, [dataclasses.replace(g, items=[*g.items, gate])], goal_id=g.id, now_ms=NOW)
        assert (with_gate["decision"], with_gate.get("action"), (with_gate.get("item") or {}).get("id")) == key
    # a peer's live claim on another open item
    others = [it.id for it in g.items if it.id != chosen and it.status == "open"
              and all(c.item_id != it.id for c in g.claims)]
    if others:
        other = data.draw(st.sampled_from(others))
        claimed = dataclasses.replace(g, claims=[*g.claims, ClaimView(other, B, 9, "p", NOW + 1000)])
        again = decide(A, [claimed], goal_id=g.id, now_ms=NOW)
        assert (again["decision"], again.get("action"), (again.get("item") or {}).get("id")) == key


@settings(max_examples=200, deadline=None)
@given(g=goals())
def test_every_answer_is_well_formed_for_both_agents(g: GoalView) -> None:
    for agent in (A, B):
        check_shape(decide(agent, [g], goal_id=g.id, now_ms=NOW))
        check_shape(decide(agent, [g], goal_id=None, now_ms=NOW))
