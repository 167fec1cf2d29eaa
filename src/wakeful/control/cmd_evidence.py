"""Acceptance and evidence commands (control-plane.md §2.3, §2.7, §5, §9): acceptance.set with digests,
bindings and re-assessment; evidence.add; monitor.observe (a Loop's wake as an observation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.control import schema as S
from wakeful.control.canonical import canonical, digest
from wakeful.control.cmd_goal import goal_acceptance_status, reassess
from wakeful.control.errors import ControlRefused
from wakeful.harness.store.ids import ulid

if TYPE_CHECKING:
    from wakeful.control.kernel import Ctx

__all__ = ["MAX_EVIDENCE_PER_ITEM", "acceptance_set", "add", "apply_contract", "check_contract", "observe",
           "record_evidence", "watch"]

MAX_EVIDENCE_PER_ITEM = 200


async def acceptance_set(ctx: Ctx) -> None:
    if ctx.expected.get("acceptance_revision") is None:
        raise ControlRefused("invalid_command", "acceptance.set needs expected.acceptance_revision",
                             field="expected.acceptance_revision")
    document = ctx.command["document"]
    await apply_contract(ctx, document, await check_contract(ctx, document, ctx.command.get("bindings", {})))


async def check_contract(ctx: Ctx, document: dict[str, Any], raw: dict[str, list[str]],
                         prefix: str = "command") -> dict[str, Any]:
    """§2.3: unique criterion ids; bindings name advancement items and known criteria → the stored bindings
    (each with the item's semantic digest now)."""
    criteria = document["criteria"]
    ids = [c["id"] for c in criteria]
    if len(set(ids)) != len(ids):
        raise ControlRefused("invalid_command", "criterion ids must be unique", field=f"{prefix}.document.criteria")
    by_id = {c["id"]: c for c in criteria}
    bindings: dict[str, Any] = {}
    for item_id, cids in raw.items():
        item = await ctx.item(item_id, field_name=f"{prefix}.bindings.{item_id}")
        if item["class"] != "advancement":
            raise ControlRefused("invalid_command", f"only advancement items are bound ({item_id} is a "
                                 f"{item['class']})", field=f"{prefix}.bindings.{item_id}")
        unknown = [c for c in cids if c not in by_id]
        if unknown:
            raise ControlRefused("invalid_command", f"unknown criteria {unknown}",
                                 field=f"{prefix}.bindings.{item_id}")
        bindings[item_id] = {"criteria": cids, "semantic_digest": item["semantic_digest"]}
    return bindings


async def apply_contract(ctx: Ctx, document: dict[str, Any], bindings: dict[str, Any]) -> None:
    """Store the next acceptance revision and re-assess (acceptance.set, and an approved proposal)."""
    criteria = document["criteria"]
    revision = int(ctx.goal["acceptance_revision"]) + 1
    _, before = await goal_acceptance_status(ctx)
    values = {
        "goal_id": ctx.goal_id, "revision": revision, "document": canonical(document), "digest": digest(document),
        "criterion_digests": canonical({c["id"]: digest(c) for c in criteria}), "bindings": canonical(bindings),
        "set_by": ctx.actor.ref, "set_ms": ctx.now,
    }
    await ctx.insert_row("acceptance", S.acceptance, values, row_id=f"{ctx.goal_id}:{revision}", revision=revision)
    from wakeful.control.rows import contract_row

    contract = contract_row(_Row(values))
    ctx.set_goal(acceptance_revision=revision)
    _, after = await goal_acceptance_status(ctx, contract=contract, use_current=False)
    await reassess(ctx, before, after)


class _Row:
    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def _source(ctx: Ctx) -> str:
    return {"agent": "agent", "loop": "loop", "system": "validator"}.get(ctx.actor.kind, "person")


async def record_evidence(ctx: Ctx, fields: dict[str, Any], *, item_id: str | None) -> str:
    """Check and insert one immutable evidence row (§2.7); returns its id."""
    cids = fields.get("criterion_ids", [])
    contract = await ctx.contract()
    if cids:
        if "subject" not in fields or "artifact_revision" not in fields:
            raise ControlRefused("invalid_command", "evidence naming criteria needs subject and artifact_revision",
                                 field="command.subject")
        known = {c["id"] for c in contract["criteria"]} if contract else set()
        unknown = [c for c in cids if c not in known]
        if unknown:
            raise ControlRefused("not_found", f"criteria {unknown} are not in the current contract",
                                 field="command.criterion_ids", criteria=unknown)
    if item_id is not None:
        await ctx.item(item_id)
        E = S.evidence
        stmt = sa.select(sa.func.count()).select_from(E).where(E.c.work_item_id == item_id)
        if int((await ctx.tx.execute(stmt)).scalar_one()) >= MAX_EVIDENCE_PER_ITEM:
            raise ControlRefused("budget_exceeded", f"an item has at most {MAX_EVIDENCE_PER_ITEM} evidence rows",
                                 limit=MAX_EVIDENCE_PER_ITEM)
    workload = fields.get("workload")
    if workload is not None:
        workload = {**workload, "digest": digest({"kind": workload["kind"], "ref": workload["ref"]})}
    digests = contract["criterion_digests"] if contract else {}
    ev_id = f"ev_{ulid(ctx.now)}"
    values = {
        "id": ev_id, "goal_id": ctx.goal_id, "seq": ctx.seq, "work_item_id": item_id,
        "criterion_ids": canonical(cids), "kind": fields["kind"], "subject": fields.get("subject"),
        "artifact_revision": fields.get("artifact_revision"),
        "workload": None if workload is None else canonical(workload),
        "acceptance_revision": int(ctx.goal["acceptance_revision"]),
        "criterion_digests": canonical({c: digests[c] for c in cids if c in digests}),
        "verdict": fields["verdict"], "summary": fields.get("summary", ""), "details_url": fields.get("details_url"),
        "source": _source(ctx), "recorded_by": ctx.actor.ref, "observed_ms": fields.get("observed_ms", ctx.now),
        "recorded_ms": ctx.now,
    }
    await ctx.insert_row("evidence", S.evidence, values, row_id=ev_id, status=fields["verdict"])
    return ev_id


async def add(ctx: Ctx) -> None:
    ev_id = await record_evidence(ctx, dict(ctx.command), item_id=ctx.command.get("item"))
    ctx.receipt_extra["evidence"] = ev_id
    if ctx.command.get("spend"):  # issue 20: the cost is recorded with the write-back, in this commit
        from wakeful.control.cmd_goal import spend

        await spend(ctx, int(ctx.command["spend"]["units"]))


async def observe(ctx: Ctx) -> None:
    """§9: a wake of the Loop backing a monitor item: counters, an evidence row, and (after the commit) the
    ``loop_wake`` resume conditions."""
    item = await ctx.item(ctx.command["item"])
    if item["class"] != "monitor" or not item["loop_id"]:
        raise ControlRefused("illegal_transition", f"item {item['id']} is not a Loop-backed monitor")
    if ctx.actor.kind == "loop" and item["loop_id"] != ctx.actor.id:
        raise ControlRefused("forbidden", f"Loop {ctx.actor.id} does not back item {item['id']}")
    summary = ctx.command.get("summary", "")
    fields: dict[str, Any] = {"kind": "loop_wake", "verdict": "observed", "summary": summary}
    structured = ctx.command.get("evidence")
    if isinstance(structured, dict):
        candidate = {k: structured[k] for k in ("verdict", "criterion_ids", "subject", "artifact_revision",
                                                 "summary") if k in structured}
        try:
            from wakeful.control.catalogue import evidence_member

            checked = evidence_member(candidate, "command.evidence")
            ev_id = await record_evidence(ctx, {"kind": "loop_wake", **checked}, item_id=item["id"])
        except ControlRefused as exc:
            if exc.code not in ("invalid_command", "not_found"):
                raise
            ev_id = await record_evidence(ctx, fields, item_id=item["id"])
    else:
        ev_id = await record_evidence(ctx, fields, item_id=item["id"])
    await ctx.write_item(item, bump=False, observations=int(item["observations"]) + 1, last_observed_ms=ctx.now)
    ctx.receipt_extra["evidence"] = ev_id


async def watch(ctx: Ctx) -> None:
    """§9 lifecycle: record the backing Loop's state in ``watch_state`` (system bookkeeping: the item's revision
    does not move, so an agent's expected revision stays valid)."""
    item = await ctx.item(ctx.command["item"])
    if item["class"] != "monitor" or not item["loop_id"]:
        raise ControlRefused("illegal_transition", f"item {item['id']} is not a Loop-backed monitor")
    state = {"state": ctx.command["loop_state"], "reason": ctx.command.get("reason"),
             "incarnation": ctx.command.get("incarnation")}
    await ctx.write_item(item, bump=False, watch_state=state)
