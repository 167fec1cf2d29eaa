"""Retention (harness.md §3): settled events after the dedup window, idle rate buckets, unreferenced
artifacts after 30 days, and messages only when the operator asks (`wakeful db prune`).

Log (200) and transition (100) retention is applied on insert by ``loops``.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from wakeful.harness.store import schema
from wakeful.harness.store.core import Tx

__all__ = [
    "PruneReport",
    "prune_all",
    "prune_artifacts",
    "prune_messages",
    "prune_rate_buckets",
    "prune_settled_events",
]

DAY_MS = 86_400_000
E = schema.loop_event


@dataclass(frozen=True)
class PruneReport:
    events: int
    rate_buckets: int
    artifacts: int
    messages: int


# §2.6: settled rows are kept for events.dedup_retention_s so a repeated id is still a duplicate
async def prune_settled_events(tx: Tx, *, retention_s: int = 86_400) -> int:
    cutoff = await tx.now_ms() - retention_s * 1000
    settled_ms = sa.func.coalesce(E.c.acked_ms, E.c.discarded_ms)
    result = await tx.execute(E.delete().where(E.c.status != "pending", settled_ms < cutoff))
    return int(result.rowcount)


# §3: rate buckets idle for an hour are deleted
async def prune_rate_buckets(tx: Tx, *, idle_s: int = 3600) -> int:
    R = schema.rate_bucket
    result = await tx.execute(R.delete().where(R.c.refreshed_ms < await tx.now_ms() - idle_s * 1000))
    return int(result.rowcount)


# §8: unreferenced artifacts (no Loop, no path) older than 30 days may be removed
async def prune_artifacts(tx: Tx, *, older_than_days: int = 30) -> int:
    A, L, P = schema.artifact, schema.loop, schema.artifact_path
    used_by_loop = sa.exists().where(L.c.group_id == A.c.group_id, L.c.artifact_sha256 == A.c.sha256)
    named = sa.exists().where(P.c.group_id == A.c.group_id, P.c.sha256 == A.c.sha256)
    cutoff = await tx.now_ms() - older_than_days * DAY_MS
    result = await tx.execute(A.delete().where(A.c.created_ms < cutoff, ~used_by_loop, ~named))
    return int(result.rowcount)


# §3: messages are kept forever unless the operator prunes them
async def prune_messages(tx: Tx, *, older_than_days: int) -> int:
    M = schema.message
    result = await tx.execute(M.delete().where(M.c.created_ms < await tx.now_ms() - older_than_days * DAY_MS))
    return int(result.rowcount)


async def prune_all(
    tx: Tx, *, retention_s: int = 86_400, messages_older_than_days: int | None = None
) -> PruneReport:
    """Everything `wakeful db prune` removes, in one transaction."""
    messages = (
        0
        if messages_older_than_days is None
        else await prune_messages(tx, older_than_days=messages_older_than_days)
    )
    return PruneReport(
        events=await prune_settled_events(tx, retention_s=retention_s),
        rate_buckets=await prune_rate_buckets(tx),
        artifacts=await prune_artifacts(tx),
        messages=messages,
    )
