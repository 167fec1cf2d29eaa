"""Loop lifecycle in the store: the states of harness.md §4.1, fenced row access (§5), state moves with
their transition rows, harness log lines and lifecycle notices (§4.4), each inside the caller's transaction.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from wakeful.harness import notices
from wakeful.harness.config import Limits
from wakeful.harness.errors import HostCallRefused
from wakeful.harness.store import loops, quota, schema, sessions
from wakeful.harness.store.core import Tx
from wakeful.harness.store.loops import LogLine, Loop

__all__ = [
    "ACTIVE",
    "FAILED",
    "PAUSED",
    "Loop",
    "admit",
    "append_log",
    "appended_failure",
    "fenced_loop",
    "move",
    "pending_count",
    "write_notice",
]

ACTIVE, PAUSED, FAILED = "active", "paused", "failed"
MAX_FAILURE_CHARS = 2000  # §2.5
_REPEATED = re.compile(r"(.*) \((\d+) times\)", re.DOTALL)


# §5: every durable effect is conditional on id, incarnation and state = 'active'
async def fenced_loop(tx: Tx, loop_id: str, incarnation: int) -> Loop:
    """The locked row of the current incarnation, or a ``stale_incarnation`` / ``not_active`` refusal (read with
    the transaction's store clock: ``loops.find_loop_locked``)."""
    return (await fenced_loop_message(tx, loop_id, incarnation, None))[0]


async def fenced_loop_message(tx: Tx, loop_id: str, incarnation: int, message_id: str | None) -> tuple[Loop, bool]:
    """``fenced_loop``, and whether the message ``message_id`` exists, in one statement."""
    row, exists = await loops.find_loop_locked(tx, loop_id, message_id=message_id)
    if row is None or row.incarnation != incarnation:
        raise HostCallRefused("stale_incarnation", f"incarnation {incarnation} of {loop_id} is retired")
    if row.state != ACTIVE:
        raise HostCallRefused("not_active", f"Loop {loop_id} is {row.state}")
    return row, exists


# §4.2: one transaction updates the row and appends a transition row
async def move(tx: Tx, row: Loop, state: str, reason: str | None, *, actor: str, detail: str | None = None,
               **values: Any) -> None:
    """Set the Loop's state (and other columns) and record the transition."""
    if state == ACTIVE and row.state != ACTIVE:
        values.setdefault("activated_ms", await tx.now_ms())
    await loops.update_loop(tx, row.id, state=state, pause_reason=reason, **values)
    await loops.add_transition(
        tx, row.id, from_state=row.state, from_reason=row.pause_reason, to_state=state, to_reason=reason,
        incarnation=row.incarnation, actor=actor, detail=detail,
    )


# §15: every entry into active counts under the group lock (taken first: the store's lock order)
async def admit(tx: Tx, group_id: str, agent_id: str, limits: Limits) -> None:
    defaults = quota.QuotaLimits(limits.loops_per_agent, limits.loops_per_group)
    await quota.admit_active(tx, group_id=group_id, agent_id=agent_id, defaults=defaults)


# §2.7 / §9.4: harness lines go to loop_log with source "harness"
async def append_log(tx: Tx, loop_id: str, incarnation: int, source: str, text: str) -> None:
    await loops.append_logs(tx, loop_id, [LogLine(await tx.now_ms(), incarnation, source, text)])


# §4.4: kind "lifecycle", id loop:<id>:lifecycle:<kind>:<incarnation>; at most once per incarnation
async def write_notice(tx: Tx, row: Loop, kind: str, content: str) -> str | None:
    """Insert the notice unless it exists; its id when it was written now, else None."""
    inserted = await sessions.insert_message(
        tx, session_id=row.session_id, agent_id=row.agent_id, group_id=row.group_id, kind="lifecycle",
        content=content, message_id=notices.notice_id(row.id, kind, row.incarnation), loop_id=row.id,
        loop_name=row.name, incarnation=row.incarnation, dedup_key=f"lifecycle:{kind}",
    )
    return inserted.message_id if inserted.status == "queued" else None


async def pending_count(tx: Tx, loop_id: str) -> int:
    E = schema.loop_event
    stmt = sa.select(sa.func.count()).select_from(E).where(E.c.loop_id == loop_id, E.c.status == "pending")
    return int((await tx.execute(stmt)).scalar_one())


def appended_failure(old: str | None, text: str) -> str:
    """§7: each fault appends its text to ``failure`` (≤ 2000 chars, the newest kept); issue 18: the same text as
    the last line is counted on that line (``… (3 times)``) instead of repeated."""
    lines = old.split("\n") if old else []
    last = lines[-1] if lines else None
    repeat = _REPEATED.fullmatch(last) if last is not None else None
    if last == text or (repeat is not None and repeat.group(1) == text):
        count = int(repeat.group(2)) + 1 if repeat is not None and repeat.group(1) == text else 2
        lines[-1] = f"{text} ({count} times)"
    else:
        lines.append(text)
    return "\n".join(lines)[-MAX_FAILURE_CHARS:]
