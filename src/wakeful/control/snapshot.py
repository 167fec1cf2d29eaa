"""``GoalSnapshot``: everything ``next`` and the projections need about one goal, read in one transaction.

Typed, immutable views of the rows (§2) plus the computed acceptance (§5) and the state of monitor Loops (§9).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import sqlalchemy as sa

from wakeful.control import rows
from wakeful.control import schema as S
from wakeful.control.applicability import CriterionStatus, acceptance_status, assess
from wakeful.harness.store.core import Tx
from wakeful.harness.store.schema import loop as LOOP

__all__ = [
    "ClaimView", "ContractView", "EffectView", "EvidenceView", "GoalSnapshot", "GoalView", "ItemView",
    "Registration", "read_snapshot",
]

T = TypeVar("T")


def _build(kind: type[T], data: Mapping[str, Any], **renames: str) -> T:
    values = {}
    for f in fields(kind):  # type: ignore[arg-type]
        source = renames.get(f.name, f.name)
        value = data.get(source)
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return kind(**values)


@dataclass(frozen=True)
class GoalView:
    id: str
    group_id: str
    title: str
    objective: str
    status: str
    claim_mode: str
    revision: int
    acceptance_revision: int
    subjects: dict[str, str]
    budget: dict[str, int] | None
    created_by: str
    created_ms: int
    updated_ms: int
    closed_ms: int | None


@dataclass(frozen=True)
class Registration:
    agent_id: str
    status: str
    registered_ms: int
    registered_by: str


@dataclass(frozen=True)
class ContractView:
    revision: int
    document: dict[str, Any]
    digest: str
    criteria: tuple[dict[str, Any], ...]
    criterion_digests: dict[str, str]
    bindings: dict[str, dict[str, Any]]
    set_by: str
    set_ms: int


@dataclass(frozen=True)
class ItemView:
    id: str
    cls: str
    status: str
    done_kind: str | None
    revision: int
    title: str
    detail: str
    priority: int
    semantic_digest: str
    bound_agent: str | None
    excluded_agents: tuple[str, ...]
    depends_on: tuple[str, ...]
    write_scopes: tuple[str, ...]
    required_scopes: tuple[str, ...]
    satisfied_scopes: tuple[str, ...]
    blocked_reason: str | None
    resume_when: tuple[str, ...]
    successors: tuple[str, ...]
    supersedes: str | None
    superseded_by: str | None
    continuation: str | None
    completed_by: str | None
    scope: str | None
    targets: tuple[str, ...]
    question: str | None
    options: tuple[str, ...]
    outcome: str | None
    asked_ms: int | None
    resolved_by: str | None
    recovery: str | None
    blocks: tuple[str, ...]
    loop_id: str | None
    watch_state: dict[str, Any] | None
    target: str | None
    observations: int
    last_observed_ms: int | None
    status_seq: int
    created_by: str
    created_ms: int
    updated_ms: int
    done_ms: int | None

    @property
    def missing_scopes(self) -> tuple[str, ...]:
        from wakeful.control.rules import covers

        return tuple(s for s in self.required_scopes if not any(covers(g, s) for g in self.satisfied_scopes))


@dataclass(frozen=True)
class ClaimView:
    item_id: str
    holder: str
    epoch: int
    version: int
    key: str
    ttl_s: int
    acquired_ms: int
    renewed_ms: int
    expires_ms: int
    status: str

    def live(self, now_ms: int) -> bool:
        """Active and unexpired (an expired claim only allows a takeover)."""
        return self.status == "active" and self.expires_ms > now_ms


@dataclass(frozen=True)
class EvidenceView:
    id: str
    seq: int
    work_item_id: str | None
    criterion_ids: tuple[str, ...]
    kind: str
    subject: str | None
    artifact_revision: str | None
    workload: dict[str, Any] | None
    acceptance_revision: int
    criterion_digests: dict[str, str]
    verdict: str
    summary: str
    details_url: str | None
    source: str
    recorded_by: str
    observed_ms: int
    recorded_ms: int


@dataclass(frozen=True)
class EffectView:
    id: str
    work_item_id: str | None
    request_key: str
    kind: str
    target: str
    payload_digest: str
    state: str
    attempt: int
    outcome: dict[str, Any] | None
    readback: dict[str, Any] | None
    actor: str
    created_ms: int
    updated_ms: int


@dataclass(frozen=True)
class GoalSnapshot:
    """One goal at one revision (``goal.revision``), read at store time ``now_ms``."""

    now_ms: int
    goal: GoalView
    agents: tuple[Registration, ...]
    contract: ContractView | None
    items: tuple[ItemView, ...]
    claims: dict[str, ClaimView]
    evidence: tuple[EvidenceView, ...]
    effects: tuple[EffectView, ...]
    criteria: dict[str, CriterionStatus]
    acceptance_status: str
    budget_spent_today: int
    loop_states: dict[str, str]

    def item(self, item_id: str) -> ItemView | None:
        return next((i for i in self.items if i.id == item_id), None)

    def live_claim(self, item_id: str) -> ClaimView | None:
        claim = self.claims.get(item_id)
        return claim if claim is not None and claim.live(self.now_ms) else None


async def read_snapshot(tx: Tx, goal_id: str, *, now_ms: int | None = None) -> GoalSnapshot | None:
    goal = await rows.load_goal(tx, goal_id)
    if goal is None:
        return None
    now = now_ms if now_ms is not None else await tx.now_ms()
    items = await rows.load_items(tx, goal_id)
    contract = await rows.load_contract(tx, goal_id, goal["acceptance_revision"]) if goal[
        "acceptance_revision"] else None
    evidence = await rows.load_evidence(tx, goal_id)
    GA = S.goal_agent
    regs = (await tx.execute(sa.select(GA).where(GA.c.goal_id == goal_id).order_by(GA.c.registered_ms,
                                                                                     GA.c.agent_id))).all()
    criteria = assess(contract, evidence, {i["id"]: i for i in items}, goal["subjects"])
    day = dt.datetime.fromtimestamp(now / 1000, tz=dt.UTC).strftime("%Y-%m-%d")
    B = S.budget_spend
    spent = (await tx.execute(sa.select(B.c.units).where(B.c.goal_id == goal_id, B.c.day == day))).scalar()
    loop_ids = sorted({i["loop_id"] for i in items if i["loop_id"]})
    loop_states: dict[str, str] = {}
    if loop_ids:
        stmt = sa.select(LOOP.c.id, LOOP.c.state).where(LOOP.c.id.in_(loop_ids))
        for r in (await tx.execute(stmt)).all():
            loop_states[str(r._mapping["id"])] = str(r._mapping["state"])
    return GoalSnapshot(
        now_ms=now,
        goal=_build(GoalView, goal),
        agents=tuple(_build(Registration, dict(r._mapping)) for r in regs),
        contract=None if contract is None else _build(ContractView, contract),
        items=tuple(_build(ItemView, i, cls="class") for i in items),
        claims={c["item_id"]: _build(ClaimView, c) for c in await rows.load_claims(tx, goal_id)},
        evidence=tuple(_build(EvidenceView, e) for e in evidence),
        effects=tuple(_build(EffectView, e) for e in await rows.load_effects(tx, goal_id)),
        criteria=criteria,
        acceptance_status=acceptance_status((c.status for c in criteria.values()), has_contract=contract is not None),
        budget_spent_today=int(spent or 0),
        loop_states=loop_states,
    )
