"""Status and board projections (control-plane.md §8): pure functions of one goal's rows at one revision.

``GoalRows`` is read from the tables (``next_read.goal_rows``) or folded from the commit log
(``fold_commits``); both must give byte-identical bodies. Bodies are canonical JSON (``canonical.canonical``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from wakeful.control import rows as R
from wakeful.control import schema as S
from wakeful.control.applicability import acceptance_status, assess
from wakeful.control.canonical import canonical, decode
from wakeful.control.errors import ControlRefused
from wakeful.control.rules import covers
from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.store.core import Store, Tx

__all__ = ["DONE_COLUMN_MAX", "KINDS", "GoalRows", "board", "build", "fold_commits", "from_log", "read",
           "log_mismatches", "read_commits", "read_rows", "rebuild", "status"]

log = logging.getLogger("wakeful.control.projections")

KINDS = ("status", "board")
DONE_COLUMN_MAX = 50
CLASSES = ("advancement", "user_gate", "user_action", "monitor", "blocker")
PERSON_CLASSES = ("user_gate", "user_action")  # §8 needs_person; on the board they wait in `gated`
STATUSES = ("open", "blocked", "deferred", "done")
DONE_OK = ("completed", "resolved")

Row = Mapping[str, Any]


@dataclass(frozen=True)
class GoalRows:
    """One goal's rows at one revision. Items carry their ``fields`` JSON merged into the row; ``criteria`` is
    the §5 assessment of the current contract: ``[{id, status, deciding: evidence id | None}]``."""

    goal: Row
    items: Sequence[Row] = ()
    claims: Sequence[Row] = ()
    evidence: Sequence[Row] = ()
    effects: Sequence[Row] = ()
    acceptance_status: str = "none"
    criteria: Sequence[Row] = ()
    last_commit_ms: int | None = None
    agents: Sequence[Row] = field(default_factory=tuple)
    contract: Row | None = None
    spend: Mapping[str, int] = field(default_factory=dict)  # UTC day (YYYY-MM-DD) → units spent


async def read_rows(tx: Tx, goal_id: str) -> GoalRows | None:
    """Every row of one goal in one transaction, with the §5 assessment of the current contract."""
    goal = await R.load_goal(tx, goal_id)
    if goal is None:
        return None
    items = await R.load_items(tx, goal_id)
    evidence = await R.load_evidence(tx, goal_id)
    contract = None
    if goal["acceptance_revision"]:
        contract = await R.load_contract(tx, goal_id, int(goal["acceptance_revision"]))
    assessed = assess(contract, evidence, {it["id"]: it for it in items}, goal.get("subjects") or {})
    criteria: list[dict[str, Any]] = [{"id": cid, "status": st.status, "deciding": st.evidence_id}
                                      for cid, st in assessed.items()]
    GA, C, B = S.goal_agent, S.control_commit, S.budget_spend
    agents = [dict(r._mapping) for r in (await tx.execute(
        sa.select(GA).where(GA.c.goal_id == goal_id).order_by(GA.c.agent_id))).all()]
    last = (await tx.execute(sa.select(sa.func.max(C.c.committed_ms)).where(C.c.goal_id == goal_id))).scalar()
    spend = {r.day: int(r.units) for r in (await tx.execute(sa.select(B).where(B.c.goal_id == goal_id))).all()}
    return GoalRows(
        goal=goal, items=items, claims=await R.load_claims(tx, goal_id), evidence=evidence,
        effects=await R.load_effects(tx, goal_id), criteria=criteria, agents=agents, contract=contract,
        acceptance_status=acceptance_status((c["status"] for c in criteria), has_contract=contract is not None),
        last_commit_ms=None if last is None else int(last), spend=spend,
    )


def _order(item: Row) -> tuple[int, int, str]:
    return int(item.get("priority", 2)), int(item.get("created_ms", 0)), str(item["id"])


def _active_claims(rows: GoalRows) -> dict[str, Row]:
    return {c["item_id"]: c for c in rows.claims if c.get("status") == "active"}


def _latest_evidence(rows: GoalRows) -> dict[str, Row]:
    out: dict[str, Row] = {}
    for ev in sorted(rows.evidence, key=lambda e: (int(e.get("seq", 0)), str(e["id"]))):
        if ev.get("work_item_id"):
            out[ev["work_item_id"]] = ev
    return out


# ---------------------------------------------------------------- status summary


def status(rows: GoalRows) -> dict[str, Any]:
    """§8 status summary."""
    g = rows.goal
    claims = _active_claims(rows)
    items = sorted(rows.items, key=_order)
    return {
        "kind": "status",
        "source_revision": int(g["revision"]),
        "goal": {"id": g["id"], "title": g["title"], "status": g["status"], "revision": int(g["revision"]),
                 "claim_mode": g.get("claim_mode"), "subjects": g.get("subjects") or {}},
        "acceptance": _acceptance(rows),
        "counts": _counts(items),
        "needs_person": [_person_card(it) for it in items
                         if it["status"] == "open" and it["class"] in PERSON_CLASSES],
        "claims": [{"item_id": c["item_id"], "holder": c["holder"], "epoch": int(c["epoch"]),
                    "expires_ms": int(c["expires_ms"])} for _, c in sorted(claims.items())],
        "monitors": [_monitor(it) for it in items if it["class"] == "monitor" and it["status"] != "done"],
        "unsettled_effects": [
            {"id": e["id"], "request_key": e["request_key"], "state": e["state"], "attempt": int(e["attempt"]),
             "kind": e["kind"], "work_item_id": e.get("work_item_id"), "actor": e["actor"]}
            for e in sorted(rows.effects, key=lambda e: str(e["id"])) if e["state"] in ("intended", "unknown")
        ],
        "last_commit_ms": rows.last_commit_ms,
    }


def _acceptance(rows: GoalRows) -> dict[str, Any]:
    by_id = {e["id"]: e for e in rows.evidence}
    criteria = []
    for crit in rows.criteria:
        ev = by_id.get(crit.get("deciding") or "")
        deciding = None if ev is None else {"id": ev["id"], "verdict": ev["verdict"],
                                            "recorded_by": ev["recorded_by"], "recorded_ms": ev["recorded_ms"]}
        criteria.append({"id": crit["id"], "status": crit["status"], "deciding_evidence": deciding})
    return {"revision": int(rows.goal.get("acceptance_revision", 0)), "status": rows.acceptance_status,
            "criteria": criteria}


def _counts(items: Iterable[Row]) -> dict[str, dict[str, int]]:
    counts = {cls: dict.fromkeys(STATUSES, 0) for cls in CLASSES}
    for it in items:
        counts[it["class"]][it["status"]] += 1
    return counts


def _person_card(item: Row) -> dict[str, Any]:
    return {"id": item["id"], "class": item["class"], "title": item["title"], "question": item.get("question"),
            "options": item.get("options") or [], "scope": item.get("scope"), "targets": item.get("targets") or [],
            "asked_ms": item.get("asked_ms"), **_proposal_of(item)}


def _proposal_of(item: Row) -> dict[str, Any]:
    """An open proposal as persons see it (issue 20): what it would apply, its digest, its base and author."""
    p = item.get("proposal")
    if not p:
        return {}
    return {"proposal": {"kind": p["kind"], "digest": p["digest"], "based_on": p["based_on"],
                         "proposed_by": p.get("proposed_by"), "document": p.get("document"),
                         "bindings": p.get("bindings"), "changes": p.get("changes")}}


def _monitor(item: Row) -> dict[str, Any]:
    watch = item.get("watch_state") or {}
    return {"id": item["id"], "loop_id": item.get("loop_id"), "loop_state": watch.get("state"),
            "loop_reason": watch.get("reason"), "observations": int(item.get("observations") or 0),
            "last_observed_ms": item.get("last_observed_ms"), "status": item["status"]}


# ---------------------------------------------------------------- board


def board(rows: GoalRows) -> dict[str, Any]:
    """§8 board: ``open`` split into runnable, claimed and gated; ``blocked``; ``deferred``; the newest done."""
    claims = _active_claims(rows)
    latest = _latest_evidence(rows)
    by_id = {it["id"]: it for it in rows.items}
    columns: dict[str, list[dict[str, Any]]] = {
        "runnable": [], "claimed": [], "gated": [], "blocked": [], "deferred": [], "done": []}
    for it in sorted(rows.items, key=_order):
        card = _card(it, claims.get(it["id"]), latest.get(it["id"]))
        if it["status"] != "open":
            columns[it["status"]].append(card)
        elif it["id"] in claims or _watching(it):
            columns["claimed"].append(card)
        elif it["class"] in PERSON_CLASSES or _gated(it, by_id):
            columns["gated"].append(card)  # §7.2: gates and user actions are a person's, never runnable
        else:
            columns["runnable"].append(card)
    done = sorted((it for it in rows.items if it["status"] == "done"),
                  key=lambda it: (-int(it.get("done_ms") or 0), str(it["id"])))[:DONE_COLUMN_MAX]
    columns["done"] = [_card(it, None, latest.get(it["id"])) for it in done]
    return {"kind": "board", "source_revision": int(rows.goal["revision"]), "goal_id": rows.goal["id"],
            "columns": {"open": {k: columns[k] for k in ("runnable", "claimed", "gated")},
                        "blocked": columns["blocked"], "deferred": columns["deferred"], "done": columns["done"]}}


def _watching(item: Row) -> bool:
    return item["class"] == "monitor" and bool(item.get("loop_id")) and (
        (item.get("watch_state") or {}).get("state", "active") == "active")


def _missing(item: Row) -> list[str]:
    satisfied = item.get("satisfied_scopes") or []
    return [s for s in item.get("required_scopes") or [] if not any(covers(g, s) for g in satisfied)]


def _gated(item: Row, by_id: Mapping[str, Row]) -> bool:
    missing = _missing(item)
    deps = [by_id.get(d) for d in item.get("depends_on") or []]
    return bool(missing) or any(d is None or d["status"] != "done" or d.get("done_kind") not in DONE_OK
                                for d in deps)


def _card(item: Row, claim: Row | None, evidence: Row | None) -> dict[str, Any]:
    holder = claim["holder"] if claim is not None else (f"loop:{item['loop_id']}" if _watching(item) else None)
    missing = _missing(item)
    return {"id": item["id"], "class": item["class"], "title": item["title"], "priority": int(item["priority"]),
            "status": item["status"], "done_kind": item.get("done_kind"), "holder": holder,
            "evidence": None if evidence is None else evidence["verdict"],
            "gate_scope": item.get("scope"), "missing_scopes": missing,
            "blocked_reason": item.get("blocked_reason"), **_proposal_of(item)}


def build(kind: str, rows: GoalRows) -> dict[str, Any]:
    """The projection ``kind`` (``status`` or ``board``) of ``rows``."""
    if kind == "status":
        return status(rows)
    if kind == "board":
        return board(rows)
    raise ValueError(f"unknown projection kind {kind!r}")


# ---------------------------------------------------------------- the cache (§8): used only at the same revision


async def read(store: Store, goal_id: str, kind: str) -> dict[str, Any]:
    """The projection of the goal now: the cached body when its ``source_revision`` is the goal's revision,
    else recomputed and stored. The answer adds ``generated_ms`` and ``cached``."""
    if kind not in KINDS:
        raise ControlRefused("not_found", f"no projection {kind!r}", resource="projection")
    P = S.projection
    async with store.tx(readonly=True) as tx:
        goal = await R.load_goal(tx, goal_id)
        if goal is None:
            raise ControlRefused("not_found", f"goal {goal_id} not found", resource="goal")
        row = (await tx.execute(sa.select(P).where(P.c.goal_id == goal_id, P.c.kind == kind))).first()
        if row is not None and int(row.source_revision) == int(goal["revision"]):
            return {**decode(row.body), "generated_ms": int(row.generated_ms), "cached": True}
        rows = await read_rows(tx, goal_id)
        now = await tx.now_ms()
    assert rows is not None
    body = build(kind, rows)
    await _store(store, goal_id, kind, body, now)
    return {**body, "generated_ms": now, "cached": False}


async def _store(store: Store, goal_id: str, kind: str, body: dict[str, Any], now: int) -> None:
    P = S.projection
    try:
        async with store.tx() as tx:
            await tx.execute(P.delete().where(P.c.goal_id == goal_id, P.c.kind == kind,
                                              P.c.source_revision <= body["source_revision"]))
            present = (await tx.execute(sa.select(P.c.kind).where(P.c.goal_id == goal_id, P.c.kind == kind))).first()
            if present is None:
                await tx.execute(P.insert().values(goal_id=goal_id, kind=kind, source_revision=body["source_revision"],
                                                   body=canonical(body), generated_ms=now))
    except StoreUnavailable:  # a cache write that loses a race (or a store hiccup) changes nothing served
        log.info("projection cache write for %s/%s skipped", goal_id, kind)


async def rebuild(store: Store, goal_id: str | None = None, *, check_log: bool = False) -> dict[str, Any]:
    """``wakeful goal rebuild``: drop the cache rows (of one goal or all) and recompute every projection.

    ``check_log`` also rebuilds each goal's projections from its commit log alone and lists, under
    ``log_mismatches``, the goals whose tables and log disagree (``[{goal_id, kinds}]``; empty when all agree).
    """
    P, G = S.projection, S.goal
    async with store.tx() as tx:
        await tx.execute(P.delete() if goal_id is None else P.delete().where(P.c.goal_id == goal_id))
        stmt = sa.select(G.c.id).order_by(G.c.created_ms, G.c.id)
        ids = [str(r[0]) for r in (await tx.execute(stmt if goal_id is None else stmt.where(G.c.id == goal_id)))]
    if goal_id is not None and not ids:
        raise ControlRefused("not_found", f"goal {goal_id} not found", resource="goal")
    mismatches: list[dict[str, Any]] = []
    for gid in ids:
        for kind in KINDS:
            await read(store, gid, kind)
        if check_log and (kinds := await log_mismatches(store, gid)):
            mismatches.append({"goal_id": gid, "kinds": kinds})
    done: dict[str, Any] = {"goals": len(ids), "projections": len(ids) * len(KINDS)}
    if check_log:
        done["log_mismatches"] = mismatches
    return done


async def log_mismatches(store: Store, goal_id: str) -> list[str]:
    """The projection kinds whose body folded from the goal's commit log differs byte for byte from the body
    computed from its tables (empty when they agree). Both are read under the goal's commit lock, so no commit
    falls between them."""
    async with store.tx() as tx:
        goal = await R.load_goal(tx, goal_id, for_update=True)
        if goal is None:
            raise ControlRefused("not_found", f"goal {goal_id} not found", resource="goal")
        rows = await read_rows(tx, goal_id)
        folded = fold_commits(await read_commits(tx, goal_id))
    assert rows is not None
    return [kind for kind in KINDS
            if folded is None or canonical(build(kind, rows)) != canonical(build(kind, folded))]


# ---------------------------------------------------------------- rows folded from the commit log


def fold_commits(commits: Iterable[Mapping[str, Any]]) -> GoalRows | None:
    """One goal's rows rebuilt from its commits alone (``seq`` order; ``events`` and ``receipt`` decoded):
    every event's ``new`` values applied in order, revisions from the receipts' ``changed`` entries."""
    state: dict[str, dict[str, dict[str, Any]]] = {}
    last_ms: int | None = None
    goal_id: str | None = None
    for commit in sorted(commits, key=lambda c: int(c["seq"])):
        revisions = {(c["entity"], c["id"]): c["revision"] for c in commit["receipt"].get("changed", [])}
        for ev in commit["events"]:
            if ev.get("op") not in ("insert", "update"):
                continue
            row = state.setdefault(ev["entity"], {}).setdefault(ev["id"], {"id": ev["id"]})
            row.update(ev.get("new") or {})
            if ev["entity"] == "item" and (ev["entity"], ev["id"]) in revisions:
                row["revision"] = revisions[(ev["entity"], ev["id"])]
        goal_id = str(commit["goal_id"])
        goal = state.setdefault("goal", {}).setdefault(goal_id, {"id": goal_id})
        goal.update(revision=int(commit["seq"]), updated_ms=int(commit["committed_ms"]))
        last_ms = int(commit["committed_ms"])
    if goal_id is None:
        return None
    goal = state["goal"][goal_id]
    items = sorted(state.get("item", {}).values(), key=lambda it: (int(it["created_ms"]), str(it["id"])))
    evidence = sorted(state.get("evidence", {}).values(), key=lambda e: (int(e["seq"]), str(e["id"])))
    claims = [{**c, "item_id": c.get("item_id", key)} for key, c in sorted(state.get("claim", {}).items())]
    contract = None
    acceptance_rev = int(goal.get("acceptance_revision") or 0)
    if acceptance_rev:
        contract = _contract(state["acceptance"][f"{goal_id}:{acceptance_rev}"], goal_id, acceptance_rev)
    assessed = assess(contract, evidence, {it["id"]: it for it in items}, goal.get("subjects") or {})
    criteria: list[dict[str, Any]] = [{"id": cid, "status": st.status, "deciding": st.evidence_id}
                                      for cid, st in assessed.items()]
    effects = sorted(state.get("effect", {}).values(), key=lambda e: (int(e["created_ms"]), str(e["id"])))
    agents = [{"agent_id": r.get("agent_id"), "status": r.get("status")}
              for _, r in sorted(state.get("registration", {}).items())]
    return GoalRows(
        goal=goal, items=items, claims=claims, evidence=evidence, effects=effects, criteria=criteria,
        agents=agents, contract=contract, last_commit_ms=last_ms,
        acceptance_status=acceptance_status((c["status"] for c in criteria), has_contract=contract is not None),
    )


def _contract(values: Mapping[str, Any], goal_id: str, revision: int) -> dict[str, Any]:
    """An acceptance row from its insert event, in the shape of ``rows.contract_row``."""
    def text(name: str) -> str:
        value = values[name]
        return value if isinstance(value, str) else canonical(value)

    row = SimpleNamespace(goal_id=goal_id, revision=revision, document=text("document"), digest=values["digest"],
                          criterion_digests=text("criterion_digests"), bindings=text("bindings"),
                          set_by=values.get("set_by"), set_ms=values.get("set_ms"))
    return R.contract_row(row)


async def read_commits(tx: Tx, goal_id: str) -> list[dict[str, Any]]:
    """The goal's commit log, oldest first, JSON decoded."""
    K = S.control_commit
    rows = (await tx.execute(sa.select(K).where(K.c.goal_id == goal_id).order_by(K.c.seq))).all()
    return [{"goal_id": r.goal_id, "seq": int(r.seq), "operation_id": r.operation_id, "actor": decode(r.actor),
             "command_type": r.command_type, "events": decode(r.events), "receipt": decode(r.receipt),
             "committed_ms": int(r.committed_ms)} for r in rows]


async def from_log(store: Store, goal_id: str, kind: str) -> dict[str, Any]:
    """The projection ``kind`` rebuilt from the commit log only (an audit of the incremental tables)."""
    async with store.tx(readonly=True) as tx:
        folded = fold_commits(await read_commits(tx, goal_id))
    if folded is None:
        raise ControlRefused("not_found", f"goal {goal_id} not found", resource="goal")
    return build(kind, folded)
