"""control-plane.md §8: the status summary and the board as pure functions of one goal's rows."""

from __future__ import annotations

from typing import Any

from wakeful.control.canonical import canonical
from wakeful.control.projections import DONE_COLUMN_MAX, GoalRows, board, build, status


def item(iid: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": iid, "class": "advancement", "status": "open", "title": iid, "priority": 2,
                            "created_ms": 10, "done_kind": None, "done_ms": None}
    base.update(kw)
    return base


GOAL = {"id": "goal_1", "title": "fast p99", "status": "active", "revision": 12, "claim_mode": "soft",
        "subjects": {"repo": "git:abc"}, "acceptance_revision": 2}


def rows(*items: dict[str, Any], **kw: Any) -> GoalRows:
    return GoalRows(goal=GOAL, items=items, **kw)


def test_board_columns_split_open_into_runnable_claimed_gated() -> None:
    r = rows(
        item("w_run"), item("w_claimed"), item("w_scoped", required_scopes=["production:action:x"]),
        item("w_dep", depends_on=["w_run"]), item("w_ok_dep", depends_on=["w_done"]),
        item("w_done", status="done", done_kind="completed", done_ms=5),
        item("w_mon", **{"class": "monitor"}, loop_id="lp_1", watch_state={"state": "active"}),
        item("w_mon2", **{"class": "monitor"}, loop_id="lp_2", watch_state={"state": "failed"}),
        item("w_blk", status="blocked", blocked_reason="gate_rejected:w_g"),
        item("w_def", status="deferred"),
        claims=[{"item_id": "w_claimed", "holder": "agt_a", "epoch": 2, "expires_ms": 99, "status": "active"},
                {"item_id": "w_run", "holder": "agt_b", "epoch": 1, "expires_ms": 9, "status": "released"}],
        evidence=[{"id": "ev_1", "work_item_id": "w_done", "verdict": "fail", "seq": 3},
                  {"id": "ev_2", "work_item_id": "w_done", "verdict": "pass", "seq": 4}],
    )
    cols = board(r)["columns"]
    ids = {name: [c["id"] for c in cards] for name, cards in cols["open"].items()}
    # same priority and age: by id
    assert ids == {"runnable": ["w_mon2", "w_ok_dep", "w_run"], "claimed": ["w_claimed", "w_mon"],
                   "gated": ["w_dep", "w_scoped"]}
    assert [c["id"] for c in cols["blocked"]] == ["w_blk"] and [c["id"] for c in cols["deferred"]] == ["w_def"]
    assert cols["done"][0]["evidence"] == "pass"  # the latest evidence by commit sequence
    claimed = {c["id"]: c["holder"] for c in cols["open"]["claimed"]}
    assert claimed == {"w_claimed": "agt_a", "w_mon": "loop:lp_1"}
    assert cols["open"]["gated"][1]["missing_scopes"] == ["production:action:x"]


def test_done_column_keeps_the_newest_fifty() -> None:
    done = [item(f"w_{i:03d}", status="done", done_kind="completed", done_ms=i) for i in range(70)]
    cards = board(rows(*done))["columns"]["done"]
    assert len(cards) == DONE_COLUMN_MAX and cards[0]["id"] == "w_069" and cards[-1]["id"] == "w_020"


def test_status_summary_fields() -> None:
    r = rows(
        item("w_g", **{"class": "user_gate"}, question="ship?", options=["yes"], scope="production:goal:*",
             targets=["w_1"], asked_ms=5),
        item("w_u", **{"class": "user_action"}, status="done", done_kind="completed"),
        item("w_m", **{"class": "monitor"}, loop_id="lp_1", watch_state={"state": "paused", "reason": "budget"},
             observations=3, last_observed_ms=77),
        item("w_1"),
        claims=[{"item_id": "w_1", "holder": "agt_a", "epoch": 4, "expires_ms": 1000, "status": "active"}],
        effects=[{"id": "ef_1", "request_key": "pr-1", "state": "unknown", "attempt": 1, "kind": "github.pr",
                  "work_item_id": "w_1", "actor": "agt_a"},
                 {"id": "ef_2", "request_key": "pr-2", "state": "succeeded", "attempt": 1, "kind": "github.pr",
                  "work_item_id": None, "actor": "agt_a"}],
        evidence=[{"id": "ev_1", "verdict": "pass", "recorded_by": "agt_b", "recorded_ms": 50}],
        criteria=[{"id": "lat", "status": "pass", "deciding": "ev_1"}, {"id": "mix", "status": "missing",
                                                                       "deciding": None}],
        acceptance_status="partial", last_commit_ms=900,
    )
    s = status(r)
    assert s["goal"]["revision"] == 12 and s["source_revision"] == 12
    assert s["acceptance"]["status"] == "partial" and s["acceptance"]["revision"] == 2
    assert s["acceptance"]["criteria"][0]["deciding_evidence"]["id"] == "ev_1"
    assert s["acceptance"]["criteria"][1]["deciding_evidence"] is None
    assert s["counts"]["advancement"] == {"open": 1, "blocked": 0, "deferred": 0, "done": 0}
    assert s["counts"]["user_action"]["done"] == 1
    assert [p["id"] for p in s["needs_person"]] == ["w_g"] and s["needs_person"][0]["asked_ms"] == 5
    assert s["claims"] == [{"item_id": "w_1", "holder": "agt_a", "epoch": 4, "expires_ms": 1000}]
    assert s["monitors"][0] | {} == {"id": "w_m", "loop_id": "lp_1", "loop_state": "paused",
                                     "loop_reason": "budget", "observations": 3, "last_observed_ms": 77,
                                     "status": "open"}
    assert [e["request_key"] for e in s["unsettled_effects"]] == ["pr-1"]
    assert s["last_commit_ms"] == 900


def test_bodies_are_deterministic_whatever_the_row_order() -> None:
    items = [item(f"w_{i}", priority=i % 3, created_ms=i) for i in range(8)]
    a = rows(*items)
    b = rows(*reversed(items))
    for kind in ("status", "board"):
        assert canonical(build(kind, a)) == canonical(build(kind, b))
