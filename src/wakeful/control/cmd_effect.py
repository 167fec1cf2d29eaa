"""The effect ledger (control-plane.md §6): intend before the external call, settle with what happened, read
back an unknown outcome by its request key. Unknown is never retried blindly: only a readback of ``absent``
re-opens the intent for another attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.control import rows
from wakeful.control import schema as S
from wakeful.control.canonical import canonical
from wakeful.control.errors import ControlRefused
from wakeful.harness.store.ids import ulid

if TYPE_CHECKING:
    from wakeful.control.kernel import Ctx

__all__ = ["effect_view", "intend", "readback", "record_validation", "settle", "watch"]

F = S.effect


def effect_view(effect: dict[str, Any]) -> dict[str, Any]:
    return {"id": effect["id"], "request_key": effect["request_key"], "state": effect["state"],
            "attempt": effect["attempt"]}


async def _load(ctx: Ctx, request_key: str) -> dict[str, Any] | None:
    stmt = ctx.tx.for_update(sa.select(F).where(F.c.goal_id == ctx.goal_id, F.c.request_key == request_key))
    row = (await ctx.tx.execute(stmt)).first()
    return None if row is None else rows.effect_row(row)


def _may_act(ctx: Ctx, effect: dict[str, Any]) -> None:
    if ctx.actor.kind == "agent" and effect["actor"] != ctx.actor.ref:
        raise ControlRefused("forbidden", "only the intending agent or a person acts on this effect",
                             request_key=effect["request_key"])
    if ctx.actor.kind == "loop" and _watcher(effect) != ctx.actor.id:
        raise ControlRefused("forbidden", "only the effect's readback Loop reads it back",
                             request_key=effect["request_key"])


def _watcher(effect: dict[str, Any]) -> str | None:
    """The readback Loop given to the effect by ``effect.watch`` (kept in its ``readback`` record)."""
    return (effect.get("readback") or {}).get("loop_id")


async def _write(ctx: Ctx, effect: dict[str, Any], **changes: Any) -> dict[str, Any]:
    new = {**effect, **changes, "updated_ms": ctx.now}
    if effect["state"] == "unknown" and new["state"] != "unknown" and ctx.command_type != "effect.readback":
        # §4.3 #6: an effect leaves unknown only through a readback
        raise ControlRefused("readback_required", "the outcome is unknown: read it back first",
                             request_key=effect["request_key"])
    values = {k: (canonical(v) if k in ("outcome", "readback") and v is not None else v) for k, v in changes.items()}
    await ctx.update_row("effect", F, F.c.id == effect["id"], effect, {**values, "updated_ms": ctx.now},
                         row_id=effect["id"], revision=new["attempt"], status=new["state"])
    ctx.receipt_extra["effect"] = effect_view(new)
    return new


async def intend(ctx: Ctx) -> None:
    cmd = ctx.command
    item_id = cmd.get("item")
    if item_id is not None:
        item = await ctx.item(item_id)
        if item["status"] == "done":
            raise ControlRefused("illegal_transition", f"item {item_id} is done", status="done")
    effect = await _load(ctx, cmd["request_key"])
    if effect is None:
        ef_id = f"ef_{ulid(ctx.now)}"
        values = {"id": ef_id, "goal_id": ctx.goal_id, "work_item_id": item_id, "request_key": cmd["request_key"],
                  "kind": cmd["kind"], "target": cmd["target"], "payload_digest": cmd["payload_digest"],
                  "state": "intended", "attempt": 1, "outcome": None, "readback": None, "actor": ctx.actor.ref,
                  "created_ms": ctx.now, "updated_ms": ctx.now}
        await ctx.insert_row("effect", F, values, row_id=ef_id, revision=1, status="intended")
        ctx.receipt_extra["effect"] = effect_view(values)
        return
    same = all(effect[k] == cmd[k] for k in ("kind", "target", "payload_digest")) and (
        effect["work_item_id"] == item_id)
    if not same:
        raise ControlRefused("request_key_conflict", "this request key names another effect",
                             request_key=cmd["request_key"], state=effect["state"])
    _may_act(ctx, effect)
    if effect["state"] == "unknown":
        raise ControlRefused("readback_required", "the outcome is unknown: read it back before any retry",
                             request_key=effect["request_key"], attempt=effect["attempt"])
    if effect["state"] == "succeeded":
        raise ControlRefused("illegal_transition", "the effect already succeeded", state="succeeded",
                             request_key=effect["request_key"])
    if effect["state"] == "intended":  # the existing intent, no new attempt
        ctx.receipt_extra["effect"] = effect_view(effect)
        return
    await _write(ctx, effect, state="intended", attempt=effect["attempt"] + 1, outcome=None, readback=None)


async def _current(ctx: Ctx) -> dict[str, Any]:
    effect = await _load(ctx, ctx.command["request_key"])
    if effect is None:
        raise ControlRefused("not_found", f"no effect with request key {ctx.command['request_key']}",
                             resource="effect")
    _may_act(ctx, effect)
    if ctx.command["attempt"] != effect["attempt"]:
        raise ControlRefused("revision_conflict", f"the effect is at attempt {effect['attempt']}",
                             entity="effect", id=effect["id"], current=effect["attempt"],
                             expected=ctx.command["attempt"])
    return effect


async def settle(ctx: Ctx) -> None:
    effect = await _current(ctx)
    if effect["state"] != "intended":
        raise ControlRefused("illegal_transition", f"the effect is {effect['state']}", state=effect["state"])
    outcome = {"detail": ctx.command.get("detail", ""), "external_ref": ctx.command.get("external_ref")}
    await _write(ctx, effect, state=_settled_as(ctx.command), outcome=outcome)


def _settled_as(cmd: dict[str, Any]) -> str:
    """§6 ``effect.settle {attempt, outcome}``; ``state`` is accepted as the same member's older name."""
    named = {cmd[k] for k in ("outcome", "state") if k in cmd}
    if len(named) != 1:
        why = "is required" if not named else "and state disagree"
        raise ControlRefused("invalid_command", f"command.outcome {why}", field="command.outcome")
    return str(named.pop())


async def readback(ctx: Ctx) -> None:
    """From ``unknown``, or from ``intended`` once the intent grace has passed (the caller may have crashed)."""
    effect = await _current(ctx)
    overdue = effect["state"] == "intended" and ctx.now - int(effect["updated_ms"]) >= ctx.intent_grace_s * 1000
    if effect["state"] != "unknown" and not overdue:
        raise ControlRefused("illegal_transition", f"the effect is {effect['state']}", state=effect["state"])
    observed = ctx.command["observed"]
    note: dict[str, Any] = {"observed": observed, "detail": ctx.command.get("detail", ""), "at_ms": ctx.now,
                            "by": ctx.actor.ref}
    if _watcher(effect) is not None:
        note["loop_id"] = _watcher(effect)
    if observed == "present":
        outcome = {"detail": ctx.command.get("detail", ""), "external_ref": ctx.command.get("external_ref")}
        await _write(ctx, effect, state="succeeded", readback=note, outcome=outcome)
    elif observed == "absent":
        await _write(ctx, effect, state="intended", attempt=effect["attempt"] + 1, readback=note)
    else:
        await _write(ctx, effect, state="unknown", readback=note)


async def watch(ctx: Ctx) -> None:
    """``effect.watch {request_key, loop_id}`` (issue 20): a Loop polls the external system by the effect's request
    key and commits ``effect.readback`` through the Loop bridge when it learns the outcome."""
    effect = await _load(ctx, ctx.command["request_key"])
    if effect is None:
        raise ControlRefused("not_found", f"no effect with request key {ctx.command['request_key']}",
                             resource="effect")
    _may_act(ctx, effect)
    if effect["state"] not in ("intended", "unknown"):
        raise ControlRefused("illegal_transition", f"the effect is {effect['state']}", state=effect["state"])
    from wakeful.control.cmd_work import check_loop

    await check_loop(ctx, ctx.command["loop_id"])
    watching = {**(effect.get("readback") or {}), "loop_id": ctx.command["loop_id"], "watch_since_ms": ctx.now}
    await _write(ctx, effect, readback=watching)


async def record_validation(ctx: Ctx) -> None:
    """``validator.record`` (the plane's own, control/validators.py): the run's evidence and its effect settled
    ``succeeded`` in one commit, so a crash leaves either both or neither."""
    from wakeful.control.cmd_evidence import record_evidence
    from wakeful.control.validators import RUN_KIND, evidence_ref

    cmd = ctx.command
    effect = await _current(ctx)
    if effect["kind"] != RUN_KIND or effect["state"] != "intended":
        raise ControlRefused("illegal_transition", f"effect {cmd['request_key']} is not an intended validator run",
                             state=effect["state"])
    contract = await ctx.contract()
    criterion = next((c for c in (contract or {}).get("criteria", []) if c["id"] == cmd["criterion_id"]), None)
    if criterion is None or not criterion.get("validator"):
        raise ControlRefused("not_found", f"criterion {cmd['criterion_id']} names no validator",
                             field="command.criterion_id")
    fields = {"kind": "validator", "verdict": cmd["verdict"], "summary": cmd.get("summary", ""),
              "criterion_ids": [cmd["criterion_id"]], "subject": cmd["subject"],
              "artifact_revision": cmd["artifact_revision"], "details_url": evidence_ref(cmd["request_key"])}
    if criterion.get("workload") is not None:
        fields["workload"] = criterion["workload"]
    ev_id = await record_evidence(ctx, fields, item_id=None)
    ctx.receipt_extra["evidence"] = ev_id
    await _write(ctx, effect, state="succeeded", outcome={"detail": f"validator {cmd['verdict']}",
                                                          "external_ref": ev_id})
