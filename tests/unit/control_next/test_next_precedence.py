"""control-plane.md §7.2 row by row and the four waits of §7.3, over plain snapshot views (no store)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from wakeful.control.next import (
    ClaimView,
    CriterionView,
    EffectView,
    GoalView,
    ItemView,
    covers,
    day_window,
    decide,
)

NOW = 1_767_225_600_000 + 5 * 3_600_000  # 05:00 UTC
A, B = "agt_a", "agt_b"


def goal(*items: ItemView, gid: str = "goal_1", **kw: Any) -> GoalView:
    base: dict[str, Any] = {"id": gid, "status": "active", "revision": 7, "agents": {A: "active", B: "active"},
                            "items": items}
    base.update(kw)
    return GoalView(**base)


def adv(iid: str, **kw: Any) -> ItemView:
    base: dict[str, Any] = {"id": iid, "cls": "advancement", "status": "open", "title": iid, "created_ms": 10}
    base.update(kw)
    return ItemView(**base)


def gate(iid: str, targets: tuple[str, ...], scope: str = "production:goal:*", **kw: Any) -> ItemView:
    return adv(iid, cls="user_gate", targets=targets, scope=scope, question="ship it?", options=("yes", "no"), **kw)


def done(iid: str, kind: str = "completed", **kw: Any) -> ItemView:
    return adv(iid, status="done", done_kind=kind, **kw)


def run(*goals: GoalView, goal_id: str | None = "goal_1", agent: str = A) -> dict[str, Any]:
    return decide(agent, goals, goal_id=goal_id, now_ms=NOW, intent_grace_ms=60_000)


# ---- one minimal fixture per row: (row, goal views, expected decision, action/wait_kind, reason) ----

ROWS: list[tuple[str, list[GoalView], str, str | None, str]] = [
    ("1 not registered", [goal(adv("w_1"), agents={B: "active"})], "stop", None, "not_registered"),
    ("1 excluded", [goal(adv("w_1"), agents={A: "excluded"})], "stop", None, "excluded"),
    ("1 paused", [goal(adv("w_1"), status="paused")], "stop", None, "goal_paused"),
    ("1 closed", [goal(status="closed")], "stop", None, "goal_closed"),
    ("2 budget", [goal(adv("w_1"), units_per_day=10, spent_today=10)], "stop", None, "budget_exhausted"),
    ("3 unknown effect", [goal(adv("w_1"), effects=[EffectView("ef_1", "k1", "unknown", A, NOW)])],
     "deliver", "readback_effect", "effect_unknown"),
    ("3 intended past grace", [goal(adv("w_1"), effects=[EffectView("ef_1", "k1", "intended", A, NOW - 61_000)])],
     "deliver", "readback_effect", "intent_grace_passed"),
    ("4 own claim", [goal(adv("w_1", priority=0), adv("w_2", priority=4),
                          claims=[ClaimView("w_2", A, 1, "k", NOW + 1000)])], "deliver", "continue", "claim_held"),
    ("5 stale criterion", [goal(done("w_1"), criteria=[CriterionView("lat", "stale", ("w_1",))],
                                acceptance_revision=2, acceptance_status="stale")],
     "deliver", "revalidate", "criterion_stale"),
    ("6 runnable", [goal(adv("w_1"))], "deliver", "start", "runnable"),
    ("7 unasked gate", [goal(adv("w_1", required_scopes=("production:action:deploy",)), gate("w_g", ("w_1",)))],
     "ask_person", "needs_person", "gate_unasked"),
    ("8 elsewhere", [goal(adv("w_1"), claims=[ClaimView("w_1", B, 1, "k", NOW + 1000)]),
                     goal(adv("w_9"), gid="goal_2")], "wait", "independent_work_elsewhere",
     "independent_work_elsewhere"),
    ("9 asked gate", [goal(adv("w_1", required_scopes=("production:action:deploy",)),
                           gate("w_g", ("w_1",), asked_ms=NOW - 5))], "wait", "needs_person", "gate_asked"),
    ("10 deferred", [goal(adv("w_1", status="deferred", resume_when=("time:99",)))], "wait", "no_new_facts",
     "no_new_facts"),
    ("11 uncovered scope", [goal(adv("w_1", required_scopes=("production:action:deploy",)))], "replan",
     "invalid_route", "scope_uncovered:w_1:production:action:deploy"),
    ("12 complete", [goal(done("w_1"), acceptance_revision=1, acceptance_status="accepted",
                          criteria=[CriterionView("lat", "pass", ("w_1",))])], "stop", None, "goal_complete"),
    ("13 acceptance unmet", [goal(done("w_1"), acceptance_revision=1, acceptance_status="partial",
                                  criteria=[CriterionView("lat", "missing", ())])], "replan", "invalid_route",
     "acceptance_unmet"),
]


@pytest.mark.parametrize(("row", "goals", "decision", "kind", "reason"), ROWS, ids=[r[0] for r in ROWS])
def test_precedence_row(row: str, goals: list[GoalView], decision: str, kind: str | None, reason: str) -> None:
    got = run(*goals)
    assert got["decision"] == decision, got
    if kind is not None:
        assert kind in (got.get("action"), got.get("wait_kind")), got
    assert reason in got["reasons"], got
    assert got["goal_id"] == "goal_1" and got["goal_revision"] == 7


def test_first_match_wins_down_the_table() -> None:
    """Stack the fixtures of rows 3..13 into one goal: removing the winning row's fact exposes the next row."""
    eff = EffectView("ef_1", "k1", "unknown", A, NOW, work_item_id="w_own")
    own = ClaimView("w_own", A, 3, "k", NOW + 10_000)
    items = [adv("w_own", priority=3), done("w_old"), adv("w_new", priority=1),
             adv("w_scoped", required_scopes=("production:action:x",)), gate("w_g", ("w_scoped",))]
    g = goal(*items, effects=[eff], claims=[own], criteria=[CriterionView("lat", "stale", ("w_old",))])
    assert run(g)["action"] == "readback_effect"
    assert run(g)["item"]["id"] == "w_own"
    g = dataclasses.replace(g, effects=[dataclasses.replace(eff, state="succeeded")])
    assert run(g)["action"] == "continue"
    g = dataclasses.replace(g, claims=[])
    assert run(g)["action"] == "revalidate"
    assert run(g)["item"]["id"] == "w_old" and run(g)["criterion_ids"] == ["lat"]
    g = dataclasses.replace(g, criteria=[])
    got = run(g)
    assert (got["action"], got["item"]["id"]) == ("start", "w_new")  # priority 1 before w_own's 3
    assert got["ask"]["gate_id"] == "w_g"  # row 6 adds the unasked gate that blocks other items
    g = dataclasses.replace(g, items=[i for i in g.items if i.id not in ("w_own", "w_new")])
    assert run(g)["decision"] == "ask_person"


def test_runnable_rules() -> None:
    peer = [ClaimView("w_1", B, 1, "k", NOW + 1)]
    assert run(goal(adv("w_1"), claims=peer))["decision"] == "wait"
    expired = [ClaimView("w_1", B, 1, "k", NOW)]  # an expired claim only allows a takeover
    assert run(goal(adv("w_1"), claims=expired))["action"] == "start"
    assert run(goal(adv("w_1", bound_agent=B)))["decision"] == "wait"
    assert run(goal(adv("w_1", bound_agent=A)))["action"] == "start"
    assert run(goal(adv("w_1", excluded_agents=(A,))))["decision"] == "wait"
    assert run(goal(adv("w_1", cls="user_action")))["decision"] == "stop"  # reminders never route agents
    assert run(goal(adv("w_1", cls="blocker")))["action"] == "start"
    assert run(goal(adv("w_1", required_scopes=("resource:goal:db",), satisfied_scopes=("resource:goal:db",))))[
        "action"] == "start"


def test_write_scope_overlap_with_a_peers_claim_is_not_runnable() -> None:
    """claim.acquire refuses overlapping write scopes (§2.4), so next never offers such an item."""
    peer = [ClaimView("w_1", B, 1, "k", NOW + 700)]
    g = goal(adv("w_1", write_scopes=("src/api/",)), adv("w_2", write_scopes=("src/api/routes.py",)), claims=peer)
    got = run(g)
    assert got["decision"] == "wait" and got["wake_when"] == ["work_done:w_1", f"time:{NOW + 700}"]
    apart = goal(adv("w_1", write_scopes=("src/api/",)), adv("w_2", write_scopes=("docs/",)), claims=peer)
    assert run(apart)["item"]["id"] == "w_2"
    mine = goal(adv("w_1", write_scopes=("src/",)), adv("w_2", write_scopes=("src/x",), priority=0),
                claims=[ClaimView("w_1", A, 1, "k", NOW + 5)])
    assert run(mine)["action"] == "continue"  # one's own claims never conflict with oneself


def test_dependencies() -> None:
    waiting = run(goal(adv("w_2", depends_on=("w_1",)), adv("w_1", status="deferred", resume_when=("time:5",))))
    assert waiting["decision"] == "wait" and "work_done:w_1" in waiting["wake_when"]
    assert run(goal(adv("w_2", depends_on=("w_1",)), done("w_1")))["item"]["id"] == "w_2"
    assert run(goal(adv("w_2", depends_on=("w_1",)), done("w_1", "resolved")))["item"]["id"] == "w_2"
    for dead in ("cancelled", "superseded"):
        got = run(goal(adv("w_2", depends_on=("w_1",)), done("w_1", dead)))
        assert got["decision"] == "replan" and "dependency_dead:w_2:w_1" in got["reasons"]


def test_monitor_backed_by_a_loop() -> None:
    watching = adv("w_m", cls="monitor", loop_id="lp_1", loop_state="active")
    got = run(goal(watching))
    assert (got["decision"], got["wait_kind"], got["wake_when"]) == ("wait", "no_new_facts", ["loop_wake:lp_1"])
    for state in ("failed", "exited", "paused", "deleted"):
        left = dataclasses.replace(watching, loop_state=state)
        assert run(goal(left))["item"]["id"] == "w_m"  # the Loop left active: an agent decides
    assert run(goal(dataclasses.replace(watching, loop_id=None, loop_state=None)))["action"] == "start"


# ---- §7.3: the four kinds of wait, each with what wakes it ----


def test_wait_no_new_facts_collects_every_condition() -> None:
    g = goal(adv("w_1", status="deferred", resume_when=("loop_wake:lp_9", "time:123")),
             adv("w_2", status="blocked", resume_when=("effect_settled:pr-1",)),
             adv("w_3", cls="monitor", loop_id="lp_5", loop_state="active"),
             adv("w_4"), claims=[ClaimView("w_4", B, 2, "k", NOW + 500)])
    got = run(g)
    assert got["wait_kind"] == "no_new_facts"
    assert got["wake_when"] == ["loop_wake:lp_9", "time:123", "effect_settled:pr-1", "loop_wake:lp_5",
                                "work_done:w_4", f"time:{NOW + 500}"]


def test_an_unasked_gate_that_blocks_nothing_is_still_asked() -> None:
    g = goal(done("w_1"), gate("w_g", ("w_1",)), acceptance_status="none")
    got = run(g)
    assert (got["decision"], got["ask"]["gate_id"]) == ("ask_person", "w_g")
    asked = run(dataclasses.replace(g, items=[g.items[0], dataclasses.replace(g.items[1], asked_ms=4)]))
    assert (asked["decision"], asked["wake_when"]) == ("wait", ["gate_resolved:w_g"])


def test_wait_needs_person_wakes_on_the_gate() -> None:
    g = goal(adv("w_1", required_scopes=("production:action:deploy",)), gate("w_g", ("w_1",), asked_ms=1))
    got = run(g)
    assert (got["wait_kind"], got["wake_when"]) == ("needs_person", ["gate_resolved:w_g"])
    ask = run(dataclasses.replace(g, items=[g.items[0], dataclasses.replace(g.items[1], asked_ms=None)]))
    assert ask["ask"] == {"gate_id": "w_g", "question": "ship it?", "options": ["yes", "no"],
                          "scope": "production:goal:*"}
    assert ask["wake_when"] == ["gate_resolved:w_g"]


def test_wait_elsewhere_names_the_other_goals_items() -> None:
    here = goal(adv("w_1", status="deferred", resume_when=("time:1",)))
    there = goal(adv("w_8", priority=3), adv("w_9", priority=0), gid="goal_2")
    paused = goal(adv("w_7"), gid="goal_3", status="paused")
    got = run(here, there, paused)
    assert got["elsewhere"] == [{"goal_id": "goal_2", "item_id": "w_9"}, {"goal_id": "goal_2", "item_id": "w_8"}]
    got_all = run(here, there, paused, goal_id=None)  # without goal_id, step 6 picks them directly
    assert (got_all["decision"], got_all["goal_id"], got_all["item"]["id"]) == ("deliver", "goal_2", "w_9")


def test_wait_invalid_route_lists_reasons() -> None:
    g = goal(adv("w_1", status="blocked", blocked_reason="gate_rejected:w_g"),
             done("w_2"), criteria=[CriterionView("c1", "fail", ("w_2",))], acceptance_status="failed")
    got = run(g)
    assert got["decision"] == "replan" and got["wait_kind"] == "invalid_route"
    assert got["reasons"] == ["blocked_without_condition:w_1", "criterion_failed:c1"]


def test_blocked_by_open_blocker_or_gate_waits() -> None:
    g = goal(adv("w_1", status="blocked", blocked_reason="blocker:w_b"),
             adv("w_b", cls="blocker", status="deferred", resume_when=("time:9",)))
    assert run(g)["wake_when"] == ["work_done:w_b", "time:9"]
    g = goal(adv("w_1", status="blocked", blocked_reason="gate:w_g"), gate("w_g", ("w_1",), asked_ms=3))
    assert (run(g)["wait_kind"], run(g)["wake_when"]) == ("needs_person", ["gate_resolved:w_g"])


# ---- metamorphic: unrelated facts never change the decision ----


def test_unrelated_gate_and_peer_claim_elsewhere_do_not_change_the_decision() -> None:
    base = goal(adv("w_1", priority=1), adv("w_2", priority=2))
    want = run(base)
    noise = goal(adv("w_1", priority=1), adv("w_2", priority=2), adv("w_x", priority=4),
                 done("w_y"), gate("w_g", ("w_y",)), claims=[ClaimView("w_x", B, 1, "k", NOW + 5)])
    got = run(noise)
    assert (got["decision"], got["action"], got["item"]["id"]) == (want["decision"], want["action"], "w_1")
    assert "ask" not in got  # the gate's only target is done: it blocks nothing


def test_without_goal_id_prefers_obligations_then_priority() -> None:
    g1 = goal(adv("w_1", priority=0), gid="goal_1", created_ms=1)
    g2 = goal(adv("w_2", priority=3), gid="goal_2", created_ms=2,
              effects=[EffectView("ef_1", "k", "unknown", A, NOW)])
    assert run(g1, g2, goal_id=None)["action"] == "readback_effect"
    g3 = goal(adv("w_3", status="deferred", resume_when=("time:1",)), gid="goal_3")
    g4 = goal(adv("w_4", status="deferred", resume_when=("time:2",)), gid="goal_4")
    merged = run(g3, g4, goal_id=None)
    assert merged["decision"] == "wait" and merged["wake_when"] == ["time:1", "time:2"]
    assert run(goal_id=None)["reasons"] == ["no_goals"]


def test_budget_resume_at_is_the_next_utc_day() -> None:
    got = run(goal(adv("w_1"), units_per_day=5, spent_today=7))
    start, end = day_window(NOW)
    assert got["resume_at"] == end and end - start == 86_400_000 and end > NOW
    assert run(goal(adv("w_1"), units_per_day=5, spent_today=4))["action"] == "start"


@pytest.mark.parametrize(("gate_scope", "required", "ok"), [
    ("production:goal:*", "production:action:deploy", True),
    ("production:action:deploy", "production:goal:deploy", False),  # narrower granularity
    ("production:goal:svc", "production:goal:svc/api", True),  # /-prefix
    ("production:goal:svc", "production:goal:svcx", False),  # not a /-prefix
    ("resource:global:*", "production:action:x", False),  # kinds differ
    ("production:lane:a/b", "production:lane:a/b", True),
    ("production:bogus:*", "production:action:x", False),
])
def test_scope_coverage(gate_scope: str, required: str, ok: bool) -> None:
    assert covers(gate_scope, required) is ok
