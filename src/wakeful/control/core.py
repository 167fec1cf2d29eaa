"""``Control``: the control plane's public API on a harness ``Store`` (interfaces.md §5 ``h.control``).

``submit`` runs the commit kernel and then the resume conditions the commit fired; the reads return plain
JSON-able dicts; ``snapshot`` is the typed one-read view ``next`` and the projections are built on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from wakeful.control import projections, reads, resumes
from wakeful.control import schema as S
from wakeful.control.actor import Actor
from wakeful.control.errors import ControlRefused
from wakeful.control.kernel import commit_command
from wakeful.control.next import next_decision
from wakeful.control.snapshot import GoalSnapshot, read_snapshot
from wakeful.harness.errors import UpgradeRequired
from wakeful.harness.store.clock import WallClock
from wakeful.harness.store.core import Store

__all__ = ["CONTROL_SCHEMA_VERSION", "Control"]

log = logging.getLogger("wakeful.control")
CONTROL_SCHEMA_VERSION = 2  # the store migration that creates the control tables


class Control:
    """The kernel and reads of one store. ``claim_ttl_s`` is the default claim TTL (60–86,400);
    ``intent_grace_s`` how long an ``intended`` effect may stay unsettled before it needs a readback; ``clock``
    (``unix_ms()``) overrides the store clock for the control plane's time (tests)."""

    def __init__(self, store: Store, *, claim_ttl_s: int = 1800, intent_grace_s: int = 60,
                 clock: WallClock | None = None) -> None:
        if not 60 <= claim_ttl_s <= 86_400:
            raise ValueError("claim_ttl_s must be in 60..86400")
        self.store = store
        self.claim_ttl_s = claim_ttl_s
        self.intent_grace_s = intent_grace_s
        self.clock = clock

    async def open(self) -> None:
        """Check that the store carries the control tables (its migrations run at ``Store.open``)."""
        from wakeful.harness.store.migrations import stored_version

        version = await stored_version(self.store)
        if version is None or version < CONTROL_SCHEMA_VERSION:
            raise UpgradeRequired(
                f"the store is at schema version {version}; the control plane needs {CONTROL_SCHEMA_VERSION}: "
                "run `wakeful db upgrade`", stored=version, code_version=CONTROL_SCHEMA_VERSION)

    # ------------------------------------------------------------------ commands

    async def submit(self, actor: Actor, envelope: Mapping[str, Any]) -> dict[str, Any]:
        """Apply one command envelope (control-plane.md §3.1) as ``actor``; return its receipt (§2.9).

        A replayed ``operation_id`` returns the stored receipt with ``replayed: True``; refusals raise
        ``ControlRefused``; a store failure raises ``StoreUnavailable`` (outcome unknown: retry the envelope).
        """
        receipt = await commit_command(self.store, actor, envelope, claim_ttl_s=self.claim_ttl_s,
                                       intent_grace_s=self.intent_grace_s, clock=self.clock)
        if not receipt.get("replayed"):
            try:  # post-commit: the command is applied whatever happens here; the sweep catches up
                await self._resume_due(receipt["goal_id"], actor.group_id)
            except Exception:
                log.exception("resume conditions after %s could not be evaluated", receipt["operation_id"])
        return receipt

    async def _resume_due(self, goal_id: str, group_id: str) -> int:
        """Commit ``work.resume`` for every deferred item whose condition fired; returns how many."""
        async with self.store.tx(readonly=True) as tx:
            now = self.clock.unix_ms() if self.clock is not None else await tx.now_ms()
            due = await resumes.due_resumes(tx, goal_id, now)
        done = 0
        system = Actor("system", "system", group_id)
        for item_id, revision, condition in due:
            envelope = {"operation_id": f"resume:{item_id}:{revision}", "goal_id": goal_id,
                        "command": {"type": "work.resume", "item": item_id, "condition": condition}}
            try:
                await commit_command(self.store, system, envelope, claim_ttl_s=self.claim_ttl_s,
                                     intent_grace_s=self.intent_grace_s, clock=self.clock)
                done += 1
            except ControlRefused as exc:  # reopened or changed meanwhile: nothing to resume
                log.debug("resume of %s skipped: %s", item_id, exc.code)
        return done

    async def tick(self) -> int:
        """The 60 s sweep (§3.4): fire ``time:`` (and any missed) conditions of every active goal."""
        G, W = S.goal, S.work_item
        async with self.store.tx(readonly=True) as tx:
            stmt = sa.select(G.c.id, G.c.group_id).where(G.c.status == "active", G.c.id.in_(
                sa.select(W.c.goal_id).where(W.c.status == "deferred")))
            goals = [(str(m["id"]), str(m["group_id"])) for m in (await tx.execute(stmt)).mappings().all()]
        total = 0
        for goal_id, group_id in goals:
            total += await self._resume_due(goal_id, group_id)
        return total

    # ------------------------------------------------------------------ reads

    async def goal(self, goal_id: str) -> dict[str, Any]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.goal(tx, goal_id)

    async def goals(self, group_id: str, *, status: str | None = None,
                    agent_id: str | None = None) -> list[dict[str, Any]]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.goals(tx, group_id, status=status, agent_id=agent_id)

    async def items(self, goal_id: str, *, status: str | None = None, cls: str | None = None) -> list[dict[str, Any]]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.items(tx, goal_id, status=status, cls=cls)

    async def item(self, goal_id: str, item_id: str) -> dict[str, Any]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.item(tx, goal_id, item_id)

    async def acceptance(self, goal_id: str, *, revision: int | None = None) -> dict[str, Any]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.acceptance(tx, goal_id, revision=revision)

    async def evidence(self, goal_id: str, *, item: str | None = None,
                       criterion: str | None = None) -> list[dict[str, Any]]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.evidence(tx, goal_id, item=item, criterion=criterion)

    async def effects(self, goal_id: str, *, state: str | None = None) -> list[dict[str, Any]]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.effects(tx, goal_id, state=state)

    async def commits(self, goal_id: str, *, after_seq: int = 0, limit: int = 50) -> list[dict[str, Any]]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.commits(tx, goal_id, after_seq=after_seq, limit=limit)

    async def receipt(self, goal_id: str, operation_id: str) -> dict[str, Any]:
        async with self.store.tx(readonly=True) as tx:
            return await reads.receipt(tx, goal_id, operation_id)

    async def snapshot(self, goal_id: str) -> GoalSnapshot:
        """Everything about one goal at one revision, in one read transaction."""
        async with self.store.tx(readonly=True) as tx:
            snap = await read_snapshot(tx, goal_id, now_ms=None if self.clock is None else self.clock.unix_ms())
        if snap is None:
            raise ControlRefused("not_found", f"goal {goal_id} not found", resource="goal")
        return snap

    # ------------------------------------------------------------------ next and projections (§7, §8)

    async def next(self, agent_id: str, goal_id: str | None = None, *, claim: bool = False,
                   key: str | None = None, ttl_s: int | None = None) -> dict[str, Any]:
        """The §7 decision for ``agent_id`` (control/next.py); ``claim`` also acquires a ``start`` item."""
        return await next_decision(self.store, self.submit, agent_id, goal_id, claim=claim, key=key, ttl_s=ttl_s,
                                   intent_grace_s=self.intent_grace_s, clock=self.clock)

    async def status(self, goal_id: str) -> dict[str, Any]:
        """The §8 status summary (control/projections.py), from the cache when it is current."""
        return await projections.read(self.store, goal_id, "status")

    async def board(self, goal_id: str) -> dict[str, Any]:
        """The §8 board (control/projections.py), from the cache when it is current."""
        return await projections.read(self.store, goal_id, "board")

    async def rebuild(self, goal_id: str | None = None, *, check_log: bool = False) -> dict[str, Any]:
        """Drop the projection cache (of one goal or all) and recompute it (``wakeful goal rebuild``);
        ``check_log`` also compares each goal's projections with a rebuild from its commit log alone."""
        return await projections.rebuild(self.store, goal_id, check_log=check_log)
