"""Work item commands (control-plane.md §3.2–§3.4): add, update, block, defer, reopen, resume, complete (with the
completion rules of §3.3), supersede and cancel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.control import rows
from wakeful.control import schema as S
from wakeful.control.applicability import assess
from wakeful.control.errors import ControlRefused
from wakeful.control.rules import covers, item_defaults, semantic_digest
from wakeful.harness.store import loops as harness_loops
from wakeful.harness.store.ids import ulid

if TYPE_CHECKING:
    from wakeful.control.kernel import Ctx

__all__ = [
    "MAX_OPEN_ITEMS", "add", "block", "cancel", "complete", "defer", "dependencies_open", "missing_scopes",
    "reopen", "resume", "supersede", "update",
]

MAX_OPEN_ITEMS = 500
CLASS_FIELDS = {
    "user_gate": ("scope", "targets", "question", "options"),
    "blocker": ("recovery", "blocks"),
    "monitor": ("loop_id", "target"),
}
REQUIRED_CLASS_FIELDS = {"user_gate": ("scope", "targets", "question"), "blocker": ("recovery",)}


def _refuse_foreign_fields(cls: str, fields: dict[str, Any], prefix: str = "command") -> None:
    for other, names in CLASS_FIELDS.items():
        if other == cls:
            continue
        for name in names:
            if name in fields and not (name == "target" and cls == "monitor"):
                raise ControlRefused("invalid_command", f"{name} is a {other} field", field=f"{prefix}.{name}")


async def _check_refs(ctx: Ctx, fields: dict[str, Any], self_id: str | None = None) -> None:
    """References name items of this goal (§3.2 work.add); a bound agent must be registered."""
    for name in ("depends_on", "targets", "blocks"):
        for ref in fields.get(name, []):
            if ref == self_id:
                raise ControlRefused("invalid_command", f"{name} names the item itself", field=f"command.{name}")
            if await rows.load_item(ctx.tx, ctx.goal_id, ref) is None:
                raise ControlRefused("not_found", f"{name} names {ref}, which is not in this goal",
                                     field=f"command.{name}", id=ref)
    if self_id is not None and fields.get("depends_on"):
        await _refuse_cycle(ctx, self_id, fields["depends_on"])
    bound = fields.get("bound_agent")
    if bound is not None and await ctx.agent_status(bound) != "active":
        raise ControlRefused("not_registered", f"bound agent {bound} is not registered on this goal",
                             field="command.bound_agent")


async def _refuse_cycle(ctx: Ctx, self_id: str, depends_on: list[str]) -> None:
    """A dependency that (transitively) depends on the item itself would never become runnable."""
    seen: set[str] = set()
    stack = list(depends_on)
    while stack:
        ref = stack.pop()
        if ref == self_id:
            raise ControlRefused("invalid_command", "depends_on would make a dependency cycle",
                                 field="command.depends_on")
        if ref in seen or len(seen) > 2000:
            continue
        seen.add(ref)
        dep = await rows.load_item(ctx.tx, ctx.goal_id, ref)
        if dep is not None:
            stack.extend(dep["depends_on"])


async def check_loop(ctx: Ctx, loop_id: str) -> None:
    """§9: a monitor's Loop is in the goal's group and its owner is registered on the goal."""
    loop = await harness_loops.find_loop(ctx.tx, loop_id)
    if loop is None:
        raise ControlRefused("loop_not_found", f"Loop {loop_id} not found", loop_id=loop_id)
    if loop.group_id != ctx.goal["group_id"] or await ctx.agent_status(loop.agent_id) != "active":
        raise ControlRefused("loop_foreign", f"Loop {loop_id} is not owned by an agent of this goal",
                             loop_id=loop_id)


async def count_open(ctx: Ctx) -> int:
    W = S.work_item
    stmt = sa.select(sa.func.count()).select_from(W).where(W.c.goal_id == ctx.goal_id, W.c.status != "done")
    return int((await ctx.tx.execute(stmt)).scalar_one())


async def new_item(ctx: Ctx, fields: dict[str, Any], prefix: str = "command", **extra: Any) -> dict[str, Any]:
    """Check and insert a new ``open`` item (work.add and work.supersede's replacement)."""
    cls = fields["class"]
    _refuse_foreign_fields(cls, fields, prefix)
    for name in REQUIRED_CLASS_FIELDS.get(cls, ()):
        if name not in fields:
            raise ControlRefused("invalid_command", f"a {cls} needs {name}", field=f"{prefix}.{name}")
    await _check_refs(ctx, fields)
    if fields.get("loop_id") is not None:
        await check_loop(ctx, fields["loop_id"])
    if await count_open(ctx) >= MAX_OPEN_ITEMS:
        raise ControlRefused("budget_exceeded", f"a goal has at most {MAX_OPEN_ITEMS} items not done",
                             limit=MAX_OPEN_ITEMS)
    item: dict[str, Any] = {
        "id": f"w_{ulid(ctx.now)}", "goal_id": ctx.goal_id, "class": cls, "status": "open", "done_kind": None,
        "revision": 1, "title": fields["title"], "priority": fields.get("priority", 2), "semantic_digest": "",
        "bound_agent": fields.get("bound_agent"), "loop_id": fields.get("loop_id"), "status_seq": ctx.seq,
        "created_by": ctx.actor.ref, "created_ms": ctx.now, "updated_ms": ctx.now, "done_ms": None,
        **item_defaults(),
    }
    item.update({k: v for k, v in fields.items() if k not in ("class",)}, **extra)
    item["semantic_digest"] = semantic_digest(item)
    await ctx.insert_item(item)
    if cls == "blocker":  # the listed items are blocked by it until it completes
        for ref in item["blocks"]:
            target = await ctx.item(ref)
            if target["status"] == "open":
                await ctx.write_item(target, status="blocked", blocked_reason=f"blocker:{item['id']}")
    return item


async def add(ctx: Ctx) -> None:
    await new_item(ctx, dict(ctx.command))


def _not_done(item: dict[str, Any]) -> None:
    if item["status"] == "done":
        raise ControlRefused("illegal_transition", f"item {item['id']} is done ({item['done_kind']})",
                             status="done", done_kind=item["done_kind"])


def _from(item: dict[str, Any], *allowed: str) -> None:
    _not_done(item)
    if item["status"] not in allowed:
        raise ControlRefused("illegal_transition", f"item {item['id']} is {item['status']}", status=item["status"])


async def _lifecycle_item(ctx: Ctx, *, lifecycle: bool = True) -> dict[str, Any]:
    """Load the command's item, then step 4 (bound / excluded agents), step 5 (expected revision) and step 6
    (claim)."""
    item = await ctx.item(ctx.command["item"])
    _routing(ctx, item)
    ctx.expect_item_revision(item)
    await ctx.check_claim(item, lifecycle=lifecycle)
    return item


def _routing(ctx: Ctx, item: dict[str, Any]) -> None:
    """§2.4 routing limits: an item bound to another agent, or excluding this one, is not its to change."""
    if ctx.actor.kind != "agent":
        return
    if item["bound_agent"] and item["bound_agent"] != ctx.actor.id:
        raise ControlRefused("forbidden", f"item {item['id']} is bound to another agent", item=item["id"])
    if ctx.actor.id in item["excluded_agents"]:
        raise ControlRefused("forbidden", f"agent {ctx.actor.id} is excluded from item {item['id']}",
                             item=item["id"])


async def update(ctx: Ctx) -> None:
    item = await _lifecycle_item(ctx)
    changes = {k: v for k, v in ctx.command.items() if k != "item"}
    _refuse_foreign_fields(item["class"], changes)
    _not_done(item)
    await _check_refs(ctx, changes, self_id=item["id"])
    merged = {**item, **changes}
    changes["semantic_digest"] = semantic_digest(merged)
    await ctx.write_item(item, **changes)


async def block(ctx: Ctx) -> None:
    item = await _lifecycle_item(ctx)
    _from(item, "open")
    await ctx.write_item(item, status="blocked", blocked_reason=ctx.command["reason"],
                         resume_when=ctx.command.get("resume_when", []))


async def defer(ctx: Ctx) -> None:
    item = await _lifecycle_item(ctx)
    _from(item, "open")
    await ctx.write_item(item, status="deferred", blocked_reason=ctx.command.get("reason"),
                         resume_when=ctx.command["resume_when"])
    await ctx.release_claim(item["id"])


async def reopen(ctx: Ctx) -> None:
    item = await _lifecycle_item(ctx)
    _from(item, "blocked", "deferred")
    await ctx.write_item(item, status="open", blocked_reason=None, resume_when=[])


async def resume(ctx: Ctx) -> None:
    item = await ctx.item(ctx.command["item"])
    _from(item, "deferred")
    await ctx.write_item(item, status="open", blocked_reason=None, resume_when=[])


async def dependencies_open(ctx: Ctx, item: dict[str, Any]) -> list[str]:
    """Dependencies not ``done(completed | resolved)``."""
    pending = []
    for ref in item["depends_on"]:
        dep = await rows.load_item(ctx.tx, ctx.goal_id, ref)
        if dep is None or dep["status"] != "done" or dep["done_kind"] not in ("completed", "resolved"):
            pending.append(ref)
    return pending


def missing_scopes(item: dict[str, Any]) -> list[str]:
    return [s for s in item["required_scopes"] if not any(covers(g, s) for g in item["satisfied_scopes"])]


async def _completion_rules(ctx: Ctx, item: dict[str, Any]) -> dict[str, Any]:
    """§3.3, each failure its own code; returns the completion fields."""
    pending = await dependencies_open(ctx, item)
    if pending:
        raise ControlRefused("dependencies_open", "dependencies are not done", items=pending)
    missing = missing_scopes(item)
    if missing:
        raise ControlRefused("gate_required", "required scopes need a person's approval", scopes=missing)
    F = S.effect
    stmt = sa.select(F.c.request_key).where(F.c.work_item_id == item["id"], F.c.state.in_(("intended", "unknown")))
    unsettled = [r[0] for r in (await ctx.tx.execute(stmt)).all()]
    if unsettled:
        raise ControlRefused("effect_unsettled", "the item has unsettled effects", request_keys=unsettled)
    continuation = ctx.command.get("continuation", "no_followup")
    successors = ctx.command.get("successors", [])
    if continuation == "successor":
        if not successors:
            raise ControlRefused("continuation_invalid", "continuation successor names no successor")
        for ref in successors:
            succ = await rows.load_item(ctx.tx, ctx.goal_id, ref)
            if succ is None or succ["status"] == "done" or ref == item["id"]:
                raise ControlRefused("continuation_invalid", f"successor {ref} is not an item of this goal "
                                     "that is not done", item=ref)
    elif successors:
        raise ControlRefused("continuation_invalid", f"continuation {continuation} takes no successors")
    await _acceptance_rule(ctx, item)
    return {"continuation": continuation, "successors": successors}


async def _acceptance_rule(ctx: Ctx, item: dict[str, Any]) -> None:
    """Each criterion bound to this advancement item has applicable passing evidence (§5), independent ones
    from a recorder other than the completing agent."""
    contract = await ctx.contract()
    if item["class"] != "advancement" or contract is None or item["id"] not in contract["bindings"]:
        return
    bound = contract["bindings"][item["id"]]["criteria"]
    items = {i["id"]: i for i in await rows.load_items(ctx.tx, ctx.goal_id)}
    evidence = await rows.load_evidence(ctx.tx, ctx.goal_id)
    statuses = assess(contract, evidence, items, ctx.goal["subjects"], completer=ctx.actor.ref)
    # §3.3: the refusal names each criterion with its precise reason (not_independent, workload_mismatch, …)
    unmet = {cid: statuses[cid].unmet for cid in bound if cid in statuses and statuses[cid].status != "pass"}
    if unmet:
        listed = ", ".join(f"{cid} ({why})" for cid, why in unmet.items())
        raise ControlRefused("acceptance_unmet", f"bound criteria lack applicable passing evidence: {listed}",
                             criteria=unmet)
    ctx.receipt_extra["acceptance"] = {
        "revision": contract["revision"],
        "evidence": {cid: statuses[cid].evidence_id for cid in bound if cid in statuses},
    }


async def complete(ctx: Ctx) -> None:
    item = await ctx.item(ctx.command["item"])
    if item["class"] == "user_gate":
        raise ControlRefused("illegal_transition", "a gate is resolved with gate.resolve", cls="user_gate")
    if ctx.actor.kind == "agent" and item["class"] not in ("advancement", "blocker", "monitor"):
        raise ControlRefused("forbidden", f"a person completes a {item['class']} item")
    _routing(ctx, item)
    ctx.expect_item_revision(item)
    await ctx.check_claim(item)
    _from(item, "open")
    done = await _completion_rules(ctx, item)
    await ctx.write_item(item, status="done", done_kind="completed", done_ms=ctx.now,
                         completed_by=ctx.actor.ref, **done)
    await ctx.release_claim(item["id"])
    if ctx.command.get("spend"):  # issue 20: the cost is recorded with the write-back, in this commit
        from wakeful.control.cmd_goal import spend

        await spend(ctx, int(ctx.command["spend"]["units"]))
    if item["class"] == "blocker":  # §3.3: reopen what it blocked, in the same commit
        W = S.work_item
        stmt = sa.select(W.c.id).where(W.c.goal_id == ctx.goal_id, W.c.status == "blocked")
        for (ref,) in (await ctx.tx.execute(stmt)).all():
            target = await ctx.item(ref)
            if target["blocked_reason"] == f"blocker:{item['id']}":
                await ctx.write_item(target, status="open", blocked_reason=None, resume_when=[])


async def supersede(ctx: Ctx) -> None:
    item = await _lifecycle_item(ctx)
    _from(item, "open", "blocked", "deferred")
    replacement_fields, replacement_id = ctx.command.get("replacement"), ctx.command.get("replacement_id")
    if (replacement_fields is None) == (replacement_id is None):
        raise ControlRefused("invalid_command", "give exactly one of replacement and replacement_id",
                             field="command.replacement")
    if replacement_id is not None:
        replacement = await ctx.item(replacement_id, field_name="replacement_id")
        if replacement["status"] != "open" or replacement_id == item["id"]:
            raise ControlRefused("illegal_transition", f"replacement {replacement_id} is not another open item",
                                 status=replacement["status"])
    else:
        assert replacement_fields is not None
        replacement = await new_item(ctx, dict(replacement_fields), prefix="command.replacement",
                                     supersedes=item["id"])
    await ctx.write_item(item, status="done", done_kind="superseded", done_ms=ctx.now,
                         superseded_by=replacement["id"])
    if replacement_id is not None:
        await ctx.write_item(replacement, supersedes=item["id"])
    await ctx.release_claim(item["id"])


async def cancel(ctx: Ctx) -> None:
    item = await ctx.item(ctx.command["item"])
    ctx.expect_item_revision(item)
    _from(item, "open", "blocked", "deferred")
    await ctx.write_item(item, status="done", done_kind="cancelled", done_ms=ctx.now)
    await ctx.release_claim(item["id"])
