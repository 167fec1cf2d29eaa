"""The commit kernel (control-plane.md §4.1): one store transaction per command — shape, goal lock, replay,
identity, then the command's own steps 4–8 through ``Ctx``, then the commit row with its events and receipt.

Commits of one goal are serial: the goal row is locked (``FOR UPDATE`` on PostgreSQL; SQLite's write
transaction is ``BEGIN IMMEDIATE``), so ``seq`` is gapless and equals the goal revision it produced.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from wakeful.control import rows
from wakeful.control import schema as S
from wakeful.control.actor import Actor
from wakeful.control.canonical import canonical, decode, digest
from wakeful.control.catalogue import CATALOGUE, parse_envelope
from wakeful.control.errors import ControlRefused
from wakeful.harness.store import agents as harness_agents
from wakeful.harness.store import loops as harness_loops
from wakeful.harness.store.clock import WallClock
from wakeful.harness.store.core import Store, Tx

__all__ = ["Ctx", "commit_command"]

CHANGE_KEYS = ("entity", "id", "revision", "status")


@dataclass
class Ctx:
    """One command inside its transaction: the locked goal, the actor, the parsed command and the delta."""

    tx: Tx
    now: int
    actor: Actor
    goal: dict[str, Any]
    command: dict[str, Any]
    expected: dict[str, Any]
    claim_ttl_s: int
    intent_grace_s: int
    command_type: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    goal_changes: dict[str, Any] = field(default_factory=dict)
    receipt_extra: dict[str, Any] = field(default_factory=dict)
    _contract: dict[str, Any] | None = None
    _contract_loaded: bool = False

    @property
    def seq(self) -> int:
        """The commit sequence this command will produce (the goal's next revision)."""
        return int(self.goal["revision"]) + 1

    @property
    def goal_id(self) -> str:
        return str(self.goal["id"])

    # ------------------------------------------------------------------ reads inside the transaction

    async def item(self, item_id: str, *, field_name: str = "item") -> dict[str, Any]:
        item = await rows.load_item(self.tx, self.goal_id, item_id, for_update=True)
        if item is None:
            raise ControlRefused("not_found", f"work item {item_id} is not in this goal", field=field_name,
                                 id=item_id)
        return item

    async def contract(self) -> dict[str, Any] | None:
        if not self._contract_loaded:
            rev = int(self.goal["acceptance_revision"])
            self._contract = await rows.load_contract(self.tx, self.goal_id, rev) if rev else None
            self._contract_loaded = True
        return self._contract

    async def claim(self, item_id: str) -> dict[str, Any] | None:
        C = S.work_claim
        stmt = self.tx.for_update(sa.select(C).where(C.c.item_id == item_id))
        row = (await self.tx.execute(stmt)).first()
        return None if row is None else rows.claim_row(row)

    async def agent_status(self, agent_id: str) -> str | None:
        GA = S.goal_agent
        stmt = sa.select(GA.c.status).where(GA.c.goal_id == self.goal_id, GA.c.agent_id == agent_id)
        value = (await self.tx.execute(stmt)).scalar()
        return None if value is None else str(value)

    # ------------------------------------------------------------------ §4.1 steps 5 and 6

    def expect_item_revision(self, item: Mapping[str, Any]) -> None:
        """Step 5: ``expected.item_revision`` is required and must equal the item's revision."""
        if self.actor.kind in ("system", "loop"):
            return
        want = self.expected.get("item_revision")
        if want is None:
            raise ControlRefused("invalid_command", "expected.item_revision is required for this command",
                                 field="expected.item_revision")
        if want != item["revision"]:
            raise ControlRefused("revision_conflict", f"item {item['id']} is at revision {item['revision']}",
                                 entity="item", id=item["id"], current=item["revision"], expected=want)

    def claim_live(self, claim: Mapping[str, Any] | None) -> bool:
        return claim is not None and claim["status"] == "active" and int(claim["expires_ms"]) > self.now

    async def check_claim(self, item: Mapping[str, Any], *, lifecycle: bool = True) -> dict[str, Any] | None:
        """Step 6 (§2.5): hard mode needs the acting agent's active unexpired claim on advancement, blocker and
        monitor items; in any mode a presented claim must be the current, unexpired one of the actor."""
        presented = self.expected.get("claim")
        hard = (
            self.goal["claim_mode"] == "hard" and lifecycle and self.actor.kind == "agent"
            and item["class"] in ("advancement", "blocker", "monitor")
        )
        if presented is None and not hard:
            return None
        claim = await self.claim(str(item["id"]))
        if presented is None:
            raise ControlRefused("claim_required", "this goal is in hard claim mode: present your claim",
                                 item=item["id"])
        if claim is None or claim["status"] != "active":
            if claim is not None and presented["epoch"] <= claim["epoch"]:
                raise ControlRefused("claim_stale", "the presented claim was released", item=item["id"],
                                     current_epoch=claim["epoch"])
            raise ControlRefused("claim_required", "the item has no active claim", item=item["id"])
        if presented["epoch"] != claim["epoch"] or presented["key"] != claim["key"]:
            raise ControlRefused("claim_stale", "the presented claim is not the current one", item=item["id"],
                                 current_epoch=claim["epoch"])
        if self.actor.kind == "agent" and claim["holder"] != self.actor.id:
            raise ControlRefused("claim_stale", "the current claim belongs to another agent", item=item["id"],
                                 current_epoch=claim["epoch"])
        if int(claim["expires_ms"]) <= self.now:
            raise ControlRefused("claim_expired", "the claim has expired", item=item["id"],
                                 expires_ms=claim["expires_ms"])
        return claim

    # ------------------------------------------------------------------ writes (step 9) with their events

    def _record(self, entity: str, row_id: str, op: str, old: Mapping[str, Any], new: Mapping[str, Any],
                revision: Any, status: Any) -> None:
        changed_old = {k: old.get(k) for k in new if old.get(k) != new[k]}
        changed_new = {k: new[k] for k in new if old.get(k) != new[k]}
        if op == "update" and not changed_new:
            return
        self.events.append({"entity": entity, "id": row_id, "op": op, "old": changed_old, "new": changed_new})
        entry = {"entity": entity, "id": row_id, "revision": revision, "status": status}
        self.changed = [c for c in self.changed if (c["entity"], c["id"]) != (entity, row_id)] + [entry]

    async def insert_item(self, item: dict[str, Any]) -> None:
        await self.tx.execute(S.work_item.insert().values(**rows.encode_item(item)))
        self._record("item", item["id"], "insert", {}, _public(item), 1, item["status"])

    async def write_item(self, item: dict[str, Any], *, bump: bool = True, **changes: Any) -> dict[str, Any]:
        """Apply ``changes`` to ``item`` (revision +1 unless ``bump`` is false, ``updated_ms``, ``status_seq``
        on a status change)."""
        new = {**item, **changes}
        if all(item.get(k) == v for k, v in changes.items()):
            return item
        if item["status"] == "done" and (new["status"], new["done_kind"]) != ("done", item["done_kind"]):
            # §4.3 #6, enforced here once for every command: a done item never changes status again
            raise ControlRefused("illegal_transition", f"item {item['id']} is done ({item['done_kind']})",
                                 status="done", done_kind=item["done_kind"])
        new["revision"] = int(item["revision"]) + (1 if bump else 0)
        new["updated_ms"] = self.now
        if new["status"] != item["status"]:
            new["status_seq"] = self.seq
        W = S.work_item
        await self.tx.execute(W.update().where(W.c.id == item["id"]).values(**rows.encode_item(new)))
        self._record("item", item["id"], "update", _public(item), _public(new), new["revision"], new["status"])
        item.clear()
        item.update(new)
        return item

    async def write_claim(self, item_id: str, old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
        C = S.work_claim
        if old is None:
            await self.tx.execute(C.insert().values(**new))
        else:
            await self.tx.execute(C.update().where(C.c.item_id == item_id).values(**new))
        merged = {**(old or {}), **new}
        self._record("claim", item_id, "insert" if old is None else "update", old or {}, merged,
                     merged["version"], merged["status"])
        return merged

    async def release_claim(self, item_id: str) -> None:
        """Release the item's active claim (expired or not) in this commit."""
        claim = await self.claim(item_id)
        if claim is not None and claim["status"] == "active":
            await self.write_claim(item_id, claim, {"status": "released", "version": claim["version"] + 1,
                                                    "renewed_ms": self.now})

    async def insert_row(self, entity: str, table: sa.Table, values: dict[str, Any], *, row_id: str,
                         revision: Any = 1, status: Any = None) -> None:
        await self.tx.execute(table.insert().values(**values))
        self._record(entity, row_id, "insert", {}, _decoded(values), revision, status)

    async def update_row(self, entity: str, table: sa.Table, where: Any, old: dict[str, Any],
                         new: dict[str, Any], *, row_id: str, revision: Any = None, status: Any = None) -> None:
        await self.tx.execute(table.update().where(where).values(**new))
        self._record(entity, row_id, "update", _decoded(old), _decoded({**old, **new}), revision, status)

    def event(self, entity: str, row_id: str, op: str, **data: Any) -> None:
        """A non-row event (e.g. ``reassessed``)."""
        self.events.append({"entity": entity, "id": row_id, "op": op, **data})

    def set_goal(self, **changes: Any) -> None:
        self.goal_changes.update(changes)


def _public(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("goal_id", "updated_ms", "status_seq", "revision")}


def _decoded(values: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in values.items():
        if isinstance(v, str) and v[:1] in "[{":
            try:
                out[k] = decode(v)
                continue
            except ValueError:
                pass
        out[k] = v
    return out


def request_digest(actor: Actor, envelope: Mapping[str, Any]) -> str:
    """§3.1: SHA-256 of the canonical ``{actor, goal_id, command, expected}``."""
    return digest({
        "actor": actor.to_dict(), "goal_id": envelope.get("goal_id"), "command": envelope["command"],
        "expected": envelope.get("expected") or {},
    })


def _advisory(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


async def _replay(tx: Tx, goal_id: str, operation_id: str, digest_now: str) -> dict[str, Any] | None:
    K = S.control_commit
    stmt = sa.select(K.c.request_digest, K.c.receipt).where(K.c.goal_id == goal_id, K.c.operation_id == operation_id)
    row = (await tx.execute(stmt)).first()
    if row is None:
        return None
    if row.request_digest != digest_now:
        raise ControlRefused("operation_id_conflict",
                             f"operation {operation_id} was already applied with a different request",
                             operation_id=operation_id)
    receipt: dict[str, Any] = decode(row.receipt)
    receipt["replayed"] = True
    return receipt


async def _identity(ctx: Ctx, command_type: str) -> None:
    """Step 3: the actor exists; agents registered and not excluded; the goal is active (except resume)."""
    actor, tx = ctx.actor, ctx.tx
    if actor.kind == "agent":
        agent = await harness_agents.find_agent(tx, actor.id)
        if agent is None or agent.group_id != actor.group_id or agent.status != "active":
            raise ControlRefused("unknown_actor", f"agent {actor.id} is not an active agent of this group")
        status = await ctx.agent_status(actor.id)
        if status == "excluded":
            raise ControlRefused("excluded", f"agent {actor.id} is excluded from this goal")
        if status is None and command_type != "agent.register":
            raise ControlRefused("not_registered", f"agent {actor.id} is not registered on this goal")
    elif actor.kind == "loop":
        loop = await harness_loops.find_loop(tx, actor.id)
        if loop is None or loop.group_id != actor.group_id:
            raise ControlRefused("unknown_actor", f"Loop {actor.id} is not a Loop of this group")
    elif not actor.id:
        raise ControlRefused("unknown_actor", "the actor has no id")
    status = ctx.goal["status"]
    if status == "active" or (status == "paused" and command_type == "goal.resume"):
        return
    # a pause stops agents, not facts: a person records what an external system did meanwhile
    # (docs/decisions-control.md "Paused goals")
    if status == "paused" and actor.kind == "person" and command_type in PAUSED_PERSON_COMMANDS:
        return
    raise ControlRefused("goal_not_active", f"goal {ctx.goal_id} is {status}", status=status)


PAUSED_PERSON_COMMANDS = frozenset({"effect.settle", "effect.readback"})


async def commit_command(
    store: Store, actor: Actor, envelope: Mapping[str, Any], *, claim_ttl_s: int, intent_grace_s: int,
    clock: WallClock | None = None,
) -> dict[str, Any]:
    """Run one command through §4.1 and return its receipt (or the stored one with ``replayed: True``)."""
    env = parse_envelope(envelope)  # step 0
    spec = CATALOGUE[env["command"]["type"]]
    command = spec.parse(env["command"])
    if actor.kind == "system" and "system" not in spec.who:  # the catalogue names the plane's own commands
        raise ControlRefused("forbidden", "system actors issue only kernel commands")
    digest_now = request_digest(actor, env)
    async with store.tx() as tx:
        now = clock.unix_ms() if clock is not None else await tx.now_ms()
        if spec.type == "goal.create":
            goal, replayed = await _create_goal_row(tx, actor, env, digest_now, now)
            if replayed is not None:
                return replayed
        else:
            found = await rows.load_goal(tx, env["goal_id"], for_update=True)  # step 1
            if found is None or found["group_id"] != actor.group_id:
                raise ControlRefused("not_found", f"goal {env['goal_id']} not found", resource="goal")
            goal = found
            replayed = await _replay(tx, goal["id"], env["operation_id"], digest_now)  # step 2
            if replayed is not None:
                return replayed
        ctx = Ctx(tx, now, actor, goal, command, env.get("expected") or {}, claim_ttl_s, intent_grace_s, spec.type)
        if spec.type != "goal.create":
            await _identity(ctx, spec.type)
        if actor.kind not in spec.who and not (actor.kind == "operator" and "person" in spec.who):
            article = "an" if actor.kind[:1] in "aeiou" else "a"
            raise ControlRefused("forbidden", f"{article} {actor.kind} may not issue {spec.type}")  # step 4 (kind)
        _check_goal_expected(ctx)
        await spec.handler(ctx)  # steps 4–8 of the command, then its row writes
        return await _finish(ctx, spec.type, env, digest_now)


def _check_goal_expected(ctx: Ctx) -> None:
    want = ctx.expected.get("goal_revision")
    if want is not None and want != ctx.goal["revision"]:
        raise ControlRefused("revision_conflict", f"the goal is at revision {ctx.goal['revision']}",
                             entity="goal", id=ctx.goal_id, current=ctx.goal["revision"], expected=want)
    want = ctx.expected.get("acceptance_revision")
    if want is not None and want != ctx.goal["acceptance_revision"]:
        raise ControlRefused("revision_conflict", f"the acceptance is at revision {ctx.goal['acceptance_revision']}",
                             entity="acceptance", id=ctx.goal_id, current=ctx.goal["acceptance_revision"],
                             expected=want)


async def _create_goal_row(
    tx: Tx, actor: Actor, env: Mapping[str, Any], digest_now: str, now: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """goal.create: operation ids are unique per group; the new goal starts at revision 0 (this commit → 1)."""
    if tx.dialect == "postgresql":
        key = _advisory(f"wakeful.goal_create:{actor.group_id}")
        await tx.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
    OPS = S.goal_create_op
    stmt = sa.select(OPS.c.goal_id).where(OPS.c.group_id == actor.group_id, OPS.c.operation_id == env["operation_id"])
    existing = (await tx.execute(stmt)).scalar()
    if existing is not None:
        replayed = await _replay(tx, str(existing), env["operation_id"], digest_now)
        assert replayed is not None
        return {}, replayed
    from wakeful.harness.store.ids import ulid

    goal_id = f"goal_{ulid(now)}"
    goal = {"id": goal_id, "group_id": actor.group_id, "revision": 0, "acceptance_revision": 0,
            "status": "active", "claim_mode": "soft", "subjects": {}, "budget": None, "title": "",
            "objective": "", "created_by": actor.ref, "created_ms": now, "updated_ms": now, "closed_ms": None}
    await tx.execute(OPS.insert().values(group_id=actor.group_id, operation_id=env["operation_id"], goal_id=goal_id))
    return goal, None


async def _finish(ctx: Ctx, command_type: str, env: Mapping[str, Any], digest_now: str) -> dict[str, Any]:
    """Step 9: the goal's revision becomes ``seq``; the commit row holds the events and the receipt."""
    seq, tx, goal = ctx.seq, ctx.tx, ctx.goal
    G = S.goal
    new_goal = {**goal, **ctx.goal_changes, "revision": seq, "updated_ms": ctx.now}
    values = goal_values(new_goal)
    if command_type == "goal.create":  # the handler inserted the row at revision 0 (rows referencing it follow)
        await tx.execute(G.update().where(G.c.id == goal["id"]).values(**values))
        ctx._record("goal", goal["id"], "insert", {}, _goal_public(new_goal), seq, new_goal["status"])
        ctx.changed.sort(key=lambda c: c["entity"] != "goal")
        ctx.events.insert(0, ctx.events.pop())  # the goal's insert comes first, as the rows were written
    else:
        await tx.execute(G.update().where(G.c.id == goal["id"]).values(**values))
        if ctx.goal_changes:
            ctx._record("goal", goal["id"], "update", _goal_public(goal), _goal_public(new_goal), seq,
                        new_goal["status"])
    receipt: dict[str, Any] = {
        "operation_id": env["operation_id"], "goal_id": goal["id"], "seq": seq, "goal_revision": seq,
        "command_type": command_type, "request_digest": digest_now, "result": "applied",
        "changed": [{k: c[k] for k in CHANGE_KEYS} for c in ctx.changed], "committed_ms": ctx.now,
        **ctx.receipt_extra,
    }
    await tx.execute(S.control_commit.insert().values(
        goal_id=goal["id"], seq=seq, operation_id=env["operation_id"], actor=canonical(ctx.actor.to_dict()),
        command_type=command_type, request_digest=digest_now,
        expected=None if not env.get("expected") else canonical(env["expected"]),
        events=canonical(ctx.events), receipt=canonical(receipt), committed_ms=ctx.now,
    ))
    goal.update(new_goal)
    return decode(canonical(receipt))  # type: ignore[no-any-return]


def goal_values(goal: Mapping[str, Any]) -> dict[str, Any]:
    """Column values of the ``goal`` table for a goal dict."""
    values = {k: goal[k] for k in (c.name for c in S.goal.columns)}
    for name in ("subjects", "budget"):
        values[name] = None if values[name] is None else canonical(values[name])
    return values


def _goal_public(goal: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in goal.items() if k not in ("revision", "updated_ms")}
