"""The ``next`` decision (control-plane.md §7): deliver, ask a person, wait, replan or stop — a pure function.

``decide`` reads plain views of one snapshot per goal (``GoalView``) and walks the §7.2 precedence table; the
store side (``read_views``, ``next_decision``) builds the views in one read and issues the optional claim.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from wakeful.control import schema as S
from wakeful.control import snapshot as snap
from wakeful.control.actor import Actor
from wakeful.control.errors import ControlRefused
from wakeful.control.next_steps import attach
from wakeful.control.rules import covers, scopes_overlap
from wakeful.harness.store import agents as harness_agents
from wakeful.harness.store.clock import WallClock
from wakeful.harness.store.core import Store

__all__ = [
    "ClaimView", "CriterionView", "EffectView", "GoalView", "ItemView", "covers", "day_window", "decide",
    "next_decision", "read_views", "utc_day", "view_of",
]

DAY_MS = 86_400_000
AGENT_CLASSES = ("advancement", "blocker", "monitor")  # what an agent may claim and run (§3.2)
ROUTE_CLASSES = ("advancement", "blocker", "monitor", "user_gate")  # user_action never blocks agents (§2.4)
DONE_OK = ("completed", "resolved")  # depends_on is satisfied only by these (§2.4)
ELSEWHERE_MAX = 10


# ---------------------------------------------------------------- views (one snapshot, read once)


@dataclass(frozen=True, slots=True)
class ItemView:
    """The fields of a work item (§2.4) that ``next`` reads."""

    id: str
    cls: str
    status: str
    title: str = ""
    revision: int = 1
    priority: int = 2
    created_ms: int = 0
    done_kind: str | None = None
    bound_agent: str | None = None
    excluded_agents: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    required_scopes: tuple[str, ...] = ()
    satisfied_scopes: tuple[str, ...] = ()
    write_scopes: tuple[str, ...] = ()
    blocked_reason: str | None = None
    resume_when: tuple[str, ...] = ()
    # gate fields
    scope: str | None = None
    targets: tuple[str, ...] = ()
    question: str | None = None
    options: tuple[Any, ...] = ()
    asked_ms: int | None = None
    # monitor fields: the backing Loop and its state as last recorded in watch_state
    loop_id: str | None = None
    loop_state: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimView:
    """An active claim row (§2.5); released tombstones are not views."""

    item_id: str
    holder: str
    epoch: int
    key: str
    expires_ms: int


@dataclass(frozen=True, slots=True)
class EffectView:
    """An effect row (§2.8)."""

    id: str
    request_key: str
    state: str
    actor: str
    updated_ms: int
    attempt: int = 1
    work_item_id: str | None = None


@dataclass(frozen=True, slots=True)
class CriterionView:
    """A criterion of the current contract with its §5 status and the items bound to it."""

    id: str
    status: str  # pass | fail | stale | missing
    bound_items: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GoalView:
    """Everything ``next`` reads of one goal, at one revision."""

    id: str
    status: str
    revision: int
    created_ms: int = 0
    agents: Mapping[str, str] = field(default_factory=dict)  # agent id → active | excluded
    items: Sequence[ItemView] = ()
    claims: Sequence[ClaimView] = ()
    effects: Sequence[EffectView] = ()
    criteria: Sequence[CriterionView] = ()
    acceptance_revision: int = 0
    acceptance_status: str = "none"
    units_per_day: float | None = None
    spent_today: float = 0.0


# ---------------------------------------------------------------- budget day


def day_window(now_ms: int) -> tuple[int, int]:
    """The budget day (UTC calendar day) holding ``now_ms``: (start, end) in ms."""
    start = now_ms - now_ms % DAY_MS
    return start, start + DAY_MS


def utc_day(now_ms: int) -> str:
    """The ``budget_spend.day`` key of ``now_ms`` (YYYY-MM-DD, UTC)."""
    return time.strftime("%Y-%m-%d", time.gmtime(now_ms // 1000))


# ---------------------------------------------------------------- rows → views


def _item_view(it: snap.ItemView, loop_states: Mapping[str, str]) -> ItemView:
    return ItemView(
        id=it.id, cls=it.cls, status=it.status, title=it.title, revision=it.revision, priority=it.priority,
        created_ms=it.created_ms, done_kind=it.done_kind, bound_agent=it.bound_agent,
        excluded_agents=it.excluded_agents, depends_on=it.depends_on, required_scopes=it.required_scopes,
        satisfied_scopes=it.satisfied_scopes, write_scopes=it.write_scopes, blocked_reason=it.blocked_reason,
        resume_when=it.resume_when,
        scope=it.scope, targets=it.targets, question=it.question, options=it.options, asked_ms=it.asked_ms,
        loop_id=it.loop_id, loop_state=None if it.loop_id is None else loop_states.get(it.loop_id, "deleted"),
    )


def view_of(s: snap.GoalSnapshot) -> GoalView:
    """The ``next`` view of one goal's snapshot; monitor Loops at their live state (§9: a Loop that left
    ``active`` makes its item runnable at once, whether or not ``watch_state`` has caught up)."""
    bound: dict[str, list[str]] = {}
    for item_id, binding in (s.contract.bindings if s.contract is not None else {}).items():
        for cid in binding.get("criteria", []):
            bound.setdefault(cid, []).append(item_id)
    g = s.goal
    return GoalView(
        id=g.id, status=g.status, revision=g.revision, created_ms=g.created_ms,
        agents={a.agent_id: a.status for a in s.agents}, items=[_item_view(it, s.loop_states) for it in s.items],
        claims=[ClaimView(c.item_id, c.holder, c.epoch, c.key, c.expires_ms)
                for c in s.claims.values() if c.status == "active"],
        effects=[EffectView(e.id, e.request_key, e.state, e.actor, e.updated_ms, e.attempt, e.work_item_id)
                 for e in s.effects],
        criteria=[CriterionView(cid, st.status, tuple(bound.get(cid, ()))) for cid, st in s.criteria.items()],
        acceptance_revision=g.acceptance_revision, acceptance_status=s.acceptance_status,
        units_per_day=(g.budget or {}).get("units_per_day"), spent_today=float(s.budget_spent_today),
    )


# ---------------------------------------------------------------- one goal, seen by one agent


class _Goal:
    """Derived facts of one goal for one agent; the precedence rows read these."""

    def __init__(self, goal: GoalView, agent_id: str, now_ms: int) -> None:
        self.g, self.agent, self.now = goal, agent_id, now_ms
        self.items = {it.id: it for it in goal.items}
        self.live_claims = {c.item_id: c for c in goal.claims if c.expires_ms > now_ms}
        self.open_gates = [it for it in goal.items if it.cls == "user_gate" and it.status == "open"]

    # -- §7.2 "runnable"
    def peer_claim(self, item: ItemView) -> ClaimView | None:
        claim = self.live_claims.get(item.id)
        return claim if claim is not None and claim.holder != self.agent else None

    def bound_elsewhere(self, item: ItemView) -> bool:
        return (item.bound_agent not in (None, self.agent)) or self.agent in item.excluded_agents

    def missing_scopes(self, item: ItemView) -> list[str]:
        return [s for s in item.required_scopes if not any(covers(g, s) for g in item.satisfied_scopes)]

    def open_deps(self, item: ItemView) -> list[ItemView]:
        return [d for d in (self.items.get(i) for i in item.depends_on) if d is not None and d.status != "done"]

    def dead_deps(self, item: ItemView) -> list[str]:
        out = []
        for dep_id in item.depends_on:
            dep = self.items.get(dep_id)
            if dep is None or (dep.status == "done" and dep.done_kind not in DONE_OK):
                out.append(dep_id)
        return out

    def watching(self, item: ItemView) -> bool:
        return item.cls == "monitor" and item.loop_id is not None and item.loop_state == "active"

    def scope_conflicts(self, item: ItemView) -> list[ClaimView]:
        """Peers' live claims whose items' write scopes overlap this item's (claim.acquire would refuse)."""
        if not item.write_scopes:
            return []
        return [c for c in self.live_claims.values() if c.holder != self.agent and c.item_id != item.id
                and c.item_id in self.items
                and scopes_overlap(list(item.write_scopes), list(self.items[c.item_id].write_scopes))]

    def runnable(self, item: ItemView) -> bool:
        return (item.status == "open" and item.cls in AGENT_CLASSES and not self.watching(item)
                and self.peer_claim(item) is None and not self.bound_elsewhere(item)
                and not self.open_deps(item) and not self.dead_deps(item) and not self.missing_scopes(item)
                and not self.scope_conflicts(item))

    def runnable_items(self) -> list[ItemView]:
        return sorted((it for it in self.g.items if self.runnable(it)), key=_order)

    # -- gates
    def gate_blocks(self, gate: ItemView, item: ItemView) -> bool:
        if item.id not in gate.targets or item.status == "done":
            return False
        if item.status == "blocked" and item.blocked_reason == f"gate:{gate.id}":
            return True
        return gate.scope is not None and any(covers(gate.scope, s) for s in self.missing_scopes(item))

    def blocking_gates(self) -> list[ItemView]:
        return sorted((g for g in self.open_gates
                       if any(self.gate_blocks(g, self.items[t]) for t in g.targets if t in self.items)),
                      key=_order)

    def covering_gate(self, item: ItemView, scope: str) -> ItemView | None:
        for gate in self.g.items:
            if (gate.cls == "user_gate" and gate.status in ("open", "deferred") and item.id in gate.targets
                    and gate.scope is not None and covers(gate.scope, scope)):
                return gate
        return None

    # -- criteria
    def addressed(self, crit: CriterionView) -> bool:
        return any(self.items[i].status != "done" for i in crit.bound_items if i in self.items)


def _order(item: ItemView) -> tuple[int, int, str]:
    return item.priority, item.created_ms, item.id


def _item(item: ItemView) -> dict[str, Any]:
    return {"id": item.id, "class": item.cls, "title": item.title, "revision": item.revision}


def _out(g: GoalView, decision: str, reasons: Iterable[str], **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"decision": decision, "goal_id": g.id, "goal_revision": g.revision}
    body.update({k: v for k, v in extra.items() if v is not None})
    body["reasons"] = list(dict.fromkeys(reasons))
    return body


def _ask(gate: ItemView) -> dict[str, Any]:
    return {"gate_id": gate.id, "question": gate.question, "options": list(gate.options), "scope": gate.scope}


# ---------------------------------------------------------------- the precedence rows (§7.2)


def _row1_stop(x: _Goal) -> dict[str, Any] | None:
    reasons = []
    status = x.g.agents.get(x.agent)
    if status is None:
        reasons.append("not_registered")
    elif status == "excluded":
        reasons.append("excluded")
    if x.g.status in ("paused", "closed"):
        reasons.append("goal_paused" if x.g.status == "paused" else "goal_closed")
    return _out(x.g, "stop", reasons) if reasons else None


def _row2_budget(x: _Goal) -> dict[str, Any] | None:
    if x.g.units_per_day is None or x.g.spent_today < x.g.units_per_day:
        return None
    resume_at = day_window(x.now)[1]
    return _out(x.g, "stop", ["budget_exhausted"], resume_at=resume_at, wake_when=[f"time:{resume_at}"])


def _row3_effect(x: _Goal, grace_ms: int) -> dict[str, Any] | None:
    mine = [e for e in x.g.effects if e.actor == x.agent and (
        e.state == "unknown" or (e.state == "intended" and x.now - e.updated_ms >= grace_ms))]
    if not mine:
        return None
    effect = min(mine, key=lambda e: (e.state != "unknown", e.updated_ms, e.id))
    item = x.items.get(effect.work_item_id or "")
    reason = "effect_unknown" if effect.state == "unknown" else "intent_grace_passed"
    return _out(x.g, "deliver", [reason], item=_item(item) if item else None, action="readback_effect",
                effect={"id": effect.id, "request_key": effect.request_key, "state": effect.state,
                        "attempt": effect.attempt})


def _row4_continue(x: _Goal) -> dict[str, Any] | None:
    held = [x.items[c.item_id] for c in x.live_claims.values()
            if c.holder == x.agent and c.item_id in x.items and x.items[c.item_id].status == "open"
            and x.items[c.item_id].cls in AGENT_CLASSES]
    if not held:
        return None
    item = min(held, key=_order)
    claim = x.live_claims[item.id]
    return _out(x.g, "deliver", ["claim_held"], item=_item(item), action="continue",
                held_claim={"epoch": claim.epoch, "key": claim.key, "expires_ms": claim.expires_ms})


def _row5_revalidate(x: _Goal) -> dict[str, Any] | None:
    stale = [c for c in x.g.criteria if c.status == "stale" and not x.addressed(c)]
    if not stale:
        return None
    done = [x.items[i] for c in stale for i in c.bound_items if i in x.items and x.items[i].status == "done"]
    item = min(done, key=_order) if done else None
    crits = [c.id for c in stale if item is None or item.id in c.bound_items] or [c.id for c in stale]
    return _out(x.g, "deliver", ["criterion_stale"], item=_item(item) if item else None, action="revalidate",
                criterion_ids=crits)


def _row6_start(x: _Goal) -> dict[str, Any] | None:
    runnable = x.runnable_items()
    if not runnable:
        return None
    item = runnable[0]
    unasked = [g for g in x.blocking_gates() if g.asked_ms is None]
    return _out(x.g, "deliver", ["runnable"], item=_item(item), action="start",
                ask=_ask(unasked[0]) if unasked else None)


def _row7_ask(x: _Goal) -> dict[str, Any] | None:
    """An unasked gate: those that block items first; one that blocks nothing is still a person's open question
    (the goal cannot close while it is open), so waiting on it unasked would wait for ever."""
    blocking = [g for g in x.blocking_gates() if g.asked_ms is None]
    others = sorted((g for g in x.open_gates if g.asked_ms is None and g not in blocking), key=_order)
    if not blocking and not others:
        return None
    gate = (blocking or others)[0]
    return _out(x.g, "ask_person", ["gate_unasked"], item=_item(gate), wait_kind="needs_person", ask=_ask(gate),
                wake_when=[f"gate_resolved:{gate.id}"])


def _row9_asked(x: _Goal) -> dict[str, Any] | None:
    asked = sorted((g for g in x.open_gates if g.asked_ms is not None), key=_order)
    if not asked:
        return None
    return _out(x.g, "wait", ["gate_asked"], wait_kind="needs_person", item=_item(asked[0]),
                wake_when=[f"gate_resolved:{g.id}" for g in asked])


def _waits_and_dead(x: _Goal) -> tuple[list[str], list[str]]:
    """Rows 10 and 11: the wake conditions of every remaining item, and why others can never run."""
    wakes: list[str] = []
    dead: list[str] = []
    for item in sorted(x.g.items, key=_order):
        if item.status == "done" or item.cls not in ROUTE_CLASSES:
            continue
        conds, why = _item_waits(x, item)
        wakes += conds
        dead += why
    return list(dict.fromkeys(wakes)), dead


def _item_waits(x: _Goal, item: ItemView) -> tuple[list[str], list[str]]:
    if item.status == "deferred":
        return (list(item.resume_when), []) if item.resume_when else ([], [f"deferred_without_condition:{item.id}"])
    if item.status == "blocked":
        return _blocked_waits(x, item)
    if item.cls == "user_gate":  # open gates: rows 7 and 9 already answered
        return [f"gate_resolved:{item.id}"], []
    if x.watching(item):
        return [f"loop_wake:{item.loop_id}"], []
    claim = x.peer_claim(item)
    if claim is not None:
        return [f"work_done:{item.id}", f"time:{claim.expires_ms}"], []
    if x.bound_elsewhere(item):
        return [f"work_done:{item.id}"], []
    dead = [f"dependency_dead:{item.id}:{d}" for d in x.dead_deps(item)]
    conds = [f"work_done:{d.id}" for d in x.open_deps(item)]
    for claim in x.scope_conflicts(item):  # a peer holds overlapping write scopes
        conds += [f"work_done:{claim.item_id}", f"time:{claim.expires_ms}"]
    for scope in x.missing_scopes(item):
        gate = x.covering_gate(item, scope)
        if gate is None:
            dead.append(f"scope_uncovered:{item.id}:{scope}")
        else:
            conds.append(f"gate_resolved:{gate.id}")
    return conds, dead


def _blocked_waits(x: _Goal, item: ItemView) -> tuple[list[str], list[str]]:
    if item.resume_when:
        return list(item.resume_when), []
    reason = item.blocked_reason or ""
    kind, _, ref = reason.partition(":")
    other = x.items.get(ref)
    if kind == "blocker" and other is not None and other.status != "done":
        return [f"work_done:{ref}"], []
    if kind == "gate" and other is not None and other.status != "done":
        return [f"gate_resolved:{ref}"], []
    return [], [f"blocked_without_condition:{item.id}"]


def _route_rows(x: _Goal) -> dict[str, Any]:
    """Rows 10–13, once nothing here can be delivered, asked or waited on by a person."""
    wakes, dead = _waits_and_dead(x)
    failing = [c.id for c in x.g.criteria if c.status == "fail" and not x.addressed(c)]
    remaining = [it for it in x.g.items if it.status != "done" and it.cls in ROUTE_CLASSES]
    if remaining and not dead:
        return _out(x.g, "wait", ["no_new_facts"], wait_kind="no_new_facts", wake_when=wakes)
    if dead or failing:
        return _out(x.g, "replan", [*dead, *(f"criterion_failed:{c}" for c in failing)],
                    wait_kind="invalid_route")
    if x.g.acceptance_status in ("accepted", "none"):
        # an agent may close only an accepted goal; without a contract the close is a person's (cmd_goal.close)
        closer = "agent" if x.g.acceptance_status == "accepted" else "person"
        return _out(x.g, "stop", ["goal_complete"], suggest="goal.close", closed_by=closer)
    unmet = [c.id for c in x.g.criteria if c.status != "pass"]
    return _out(x.g, "replan", ["acceptance_unmet", *(f"criterion_unmet:{c}" for c in unmet)],
                wait_kind="invalid_route")


# ---------------------------------------------------------------- decide


def _one(x: _Goal, grace_ms: int, elsewhere: list[dict[str, str]]) -> dict[str, Any]:
    rows = (_row1_stop, _row2_budget, lambda g: _row3_effect(g, grace_ms), _row4_continue, _row5_revalidate,
            _row6_start, _row7_ask)
    for row in rows:
        found = row(x)
        if found is not None:
            return found
    if elsewhere:  # row 8
        return _out(x.g, "wait", ["independent_work_elsewhere"], wait_kind="independent_work_elsewhere",
                    elsewhere=elsewhere)
    return _row9_asked(x) or _route_rows(x)


_RANK = {"deliver": 0, "ask_person": 1, "replan": 2, "wait": 3, "stop": 4}
_ACTION_RANK = {"readback_effect": 0, "continue": 1, "revalidate": 2, "start": 3}


def decide(agent_id: str, goals: Sequence[GoalView], *, goal_id: str | None = None, now_ms: int,
           intent_grace_ms: int = 60_000) -> dict[str, Any]:
    """§7: the decision for ``agent_id``. ``goals`` holds the goal asked about (when ``goal_id`` is given) and
    every other active goal the agent is registered on; without ``goal_id`` all of them are considered."""
    views = {g.id: _Goal(g, agent_id, now_ms) for g in goals}
    if goal_id is not None:
        if goal_id not in views:
            return {"decision": "stop", "goal_id": goal_id, "goal_revision": None, "reasons": ["not_found"]}
        others = [x for gid, x in views.items() if gid != goal_id and _eligible(x)]
        return _one(views[goal_id], intent_grace_ms, _elsewhere(others))
    eligible = [x for x in views.values() if _eligible(x)]
    if not eligible:
        return {"decision": "stop", "goal_id": None, "goal_revision": None, "reasons": ["no_goals"]}
    answers = [(_one(x, intent_grace_ms, []), x) for x in sorted(eligible, key=lambda x: (x.g.created_ms, x.g.id))]
    return _merge(answers)


def _eligible(x: _Goal) -> bool:
    return x.g.status == "active" and x.g.agents.get(x.agent) == "active"


def _elsewhere(others: list[_Goal]) -> list[dict[str, str]]:
    found = [(it, x.g.id) for x in others if _row2_budget(x) is None for it in x.runnable_items()]
    found.sort(key=lambda pair: _order(pair[0]))
    return [{"goal_id": gid, "item_id": it.id} for it, gid in found[:ELSEWHERE_MAX]]


def _merge(answers: list[tuple[dict[str, Any], _Goal]]) -> dict[str, Any]:
    """Without ``goal_id``: the most actionable answer; among starts the highest-priority, oldest item."""
    def rank(pair: tuple[dict[str, Any], _Goal]) -> tuple[int, int, tuple[int, int, str]]:
        ans, x = pair
        item = x.items.get((ans.get("item") or {}).get("id", ""))
        wait = 0 if ans.get("wait_kind") == "needs_person" else 1
        sub = _ACTION_RANK.get(ans.get("action", ""), wait)
        return _RANK[ans["decision"]], sub, _order(item) if item is not None else (9, 0, "")

    best = dict(min(answers, key=rank)[0])
    if best["decision"] == "wait":
        wakes = [w for ans, _ in answers if ans["decision"] == "wait" for w in ans.get("wake_when", [])]
        best["wake_when"] = list(dict.fromkeys(wakes))
    return best


# ---------------------------------------------------------------- reading the store, and claim: true


Submit = Callable[[Actor, dict[str, Any]], Awaitable[dict[str, Any]]]
CLAIM_RACES = ("claimed_by_other", "write_scope_conflict", "revision_conflict", "illegal_transition")
CLAIM_ATTEMPTS = 16  # each lost race removes one candidate; bounded so a livelock cannot spin


async def read_views(store: Store, agent_id: str, goal_id: str | None, *,
                     clock: WallClock | None = None) -> tuple[str, list[GoalView], int]:
    """One read transaction: the agent's group, the goal asked about and every active goal it is registered
    on, as views, and the time (``clock`` overrides the store clock, as ``Control`` does)."""
    GA, G = S.goal_agent, S.goal
    async with store.tx(readonly=True) as tx:
        now = clock.unix_ms() if clock is not None else await tx.now_ms()
        agent = await harness_agents.find_agent(tx, agent_id)
        if agent is None:
            raise ControlRefused("not_found", f"agent {agent_id} not found", resource="agent")
        stmt = sa.select(G.c.id).join(GA, GA.c.goal_id == G.c.id).where(
            GA.c.agent_id == agent_id, GA.c.status == "active", G.c.status == "active",
            G.c.group_id == agent.group_id).order_by(G.c.created_ms, G.c.id)
        goal_ids = [str(r[0]) for r in (await tx.execute(stmt)).all()]
        if goal_id is not None and goal_id not in goal_ids:
            goal_ids.insert(0, goal_id)
        views = []
        for gid in goal_ids:
            found = await snap.read_snapshot(tx, gid, now_ms=now)
            if found is None or found.goal.group_id != agent.group_id:
                if gid == goal_id:
                    raise ControlRefused("not_found", f"goal {goal_id} not found", resource="goal")
                continue
            views.append(view_of(found))
    return agent.group_id, views, now


async def next_decision(store: Store, submit: Submit, agent_id: str, goal_id: str | None = None, *,
                        claim: bool = False, key: str | None = None, ttl_s: int | None = None,
                        intent_grace_s: int = 60, clock: WallClock | None = None) -> dict[str, Any]:
    """§7.1: the decision for ``agent_id``; with ``claim`` a ``start`` also acquires the item (operation id
    ``next:<agent>:<goal revision>:<item>``) and carries the receipt. A lost race is decided again."""
    for attempt in range(CLAIM_ATTEMPTS):
        group_id, views, now = await read_views(store, agent_id, goal_id, clock=clock)
        answer = decide(agent_id, views, goal_id=goal_id, now_ms=now, intent_grace_ms=intent_grace_s * 1000)
        if not claim or answer.get("action") != "start":
            return attach(answer, agent_id=agent_id, group_id=group_id, now_ms=now)
        item_id = answer["item"]["id"]
        command: dict[str, Any] = {"type": "claim.acquire", "item": item_id, "key": key or f"next:{agent_id}:{item_id}"}
        if ttl_s is not None:
            command["ttl_s"] = ttl_s
        envelope = {"operation_id": f"next:{agent_id}:{answer['goal_revision']}:{item_id}",
                    "goal_id": answer["goal_id"], "command": command}
        try:
            answer["claim"] = await submit(Actor("agent", agent_id, group_id), envelope)
            return attach(answer, agent_id=agent_id, group_id=group_id, now_ms=now)
        except ControlRefused as exc:
            if exc.code not in CLAIM_RACES or attempt == CLAIM_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
