"""Sessions (an agent's inbox) and their messages, with insert-if-absent wakes (harness.md §2.3).

Message ids: ``loop:<loop_id>:<dedup_key>`` for wakes, ``loop:<loop_id>:lifecycle:<kind>:<incarnation>`` for
lifecycle notices, ``msg_<ulid>`` otherwise. A second insert with the same id is a ``duplicate``, never a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from wakeful.harness.errors import InvalidRequest, SessionInUse, SessionNotFound
from wakeful.harness.store import schema
from wakeful.harness.store.agents import get_agent
from wakeful.harness.store.core import Tx
from wakeful.harness.store.groups import refuse_controls
from wakeful.harness.store.ids import lookup_text, new_id, shown
from wakeful.harness.store.reads import by_keys

__all__ = [
    "Message",
    "MessageInsert",
    "Session",
    "count_messages",
    "create_session",
    "delete_session",
    "find_sessions",
    "get_message",
    "get_session",
    "insert_message",
    "lifecycle_message_id",
    "list_messages",
    "list_sessions",
    "mark_handled",
    "message_exists",
    "wake_message_id",
]

MAX_TITLE = 200
MAX_CONTENT_BYTES = 8192
KINDS = ("loop", "lifecycle", "user", "system")
S = schema.session
M = schema.message


@dataclass(frozen=True)
class Session:
    id: str
    agent_id: str
    group_id: str
    title: str
    created_ms: int


@dataclass(frozen=True)
class Message:
    id: str
    session_id: str
    agent_id: str
    group_id: str
    kind: str
    role: str
    loop_id: str | None
    loop_name: str | None
    incarnation: int | None
    dedup_key: str | None
    content: str
    created_ms: int
    handled_ms: int | None
    handled_by: str | None


@dataclass(frozen=True)
class MessageInsert:
    """The outcome of an insert-if-absent: ``queued`` (written now) or ``duplicate`` (the id existed)."""

    status: Literal["queued", "duplicate"]
    message_id: str


INSERTED = tuple(n for n in Message.__dataclass_fields__ if n not in ("handled_ms", "handled_by"))


def _session(row: Any) -> Session:
    return Session(row.id, row.agent_id, row.group_id, row.title, row.created_ms)


def _message(row: Any) -> Message:
    return Message(**{name: getattr(row, name) for name in Message.__dataclass_fields__})


# §2.3: Loop wakes are keyed by the Loop and the guest's dedup key
def wake_message_id(loop_id: str, dedup_key: str) -> str:
    return f"loop:{loop_id}:{dedup_key}"


# §4.4: one notice per outcome kind per incarnation
def lifecycle_message_id(loop_id: str, kind: str, incarnation: int) -> str:
    return f"loop:{loop_id}:lifecycle:{kind}:{incarnation}"


async def create_session(tx: Tx, *, agent_id: str, title: str = "") -> Session:
    if not isinstance(title, str) or len(title) > MAX_TITLE:
        raise InvalidRequest(f"title must be a string of at most {MAX_TITLE} characters", field="title")
    refuse_controls(title, "title")  # issue 19: one line; U+0000 also cannot live in PostgreSQL text
    agent = await get_agent(tx, agent_id)
    now = await tx.now_ms()
    session = Session(new_id("ses", now), agent_id, agent.group_id, title, now)
    await tx.execute(S.insert().values(**session.__dict__))
    return session


async def find_sessions(tx: Tx, session_ids: Iterable[str]) -> dict[str, Session]:
    """The sessions of ``session_ids`` that exist, by id (one statement; issue 16: a batch of creates' reads)."""
    ids = sorted({i for i in session_ids if lookup_text(i) is not None})
    if not ids:
        return {}
    stmt, params = by_keys(tx.dialect, "sessions.find", sa.select(S).where, S.c.id, ids)
    return {r.id: _session(r) for r in await tx.execute(stmt, params)}


async def get_session(tx: Tx, session_id: str) -> Session:
    row = None
    if lookup_text(session_id) is not None:
        row = (await tx.execute(sa.select(S).where(S.c.id == session_id))).first()
    if row is None:
        raise SessionNotFound(f"session {shown(session_id)} not found", id=shown(session_id))
    return _session(row)


async def list_sessions(tx: Tx, *, agent_id: str | None = None, group_id: str | None = None) -> list[Session]:
    stmt = sa.select(S).order_by(S.c.created_ms, S.c.id)
    if agent_id is not None:
        stmt = stmt.where(S.c.agent_id == agent_id)
    if group_id is not None:
        stmt = stmt.where(S.c.group_id == group_id)
    return [_session(r) for r in await tx.execute(stmt)]


# §2.3: a session that is the target of any Loop cannot be deleted (409 session_in_use)
async def delete_session(tx: Tx, session_id: str) -> None:
    await get_session(tx, session_id)
    L = schema.loop
    users = (await tx.execute(sa.select(sa.func.count()).where(L.c.session_id == session_id))).scalar_one()
    if users:
        raise SessionInUse(
            f"session {session_id} is the target of {users} Loop(s)", id=session_id, loops=users
        )
    await tx.execute(S.delete().where(S.c.id == session_id))


def _check_message(kind: str, content: object) -> str:
    if kind not in KINDS:
        raise InvalidRequest(f"kind must be one of {', '.join(KINDS)}", field="kind")
    if not isinstance(content, str):
        raise InvalidRequest("content must be a string", field="content")
    if kind in ("loop", "user") and len(content.encode("utf-8", "surrogatepass")) > MAX_CONTENT_BYTES:
        raise InvalidRequest(f"content is over {MAX_CONTENT_BYTES} bytes", field="content")
    return content


# §2.3: insert-if-absent — the primary key makes a wake idempotent
async def insert_message(
    tx: Tx,
    *,
    session_id: str,
    agent_id: str,
    group_id: str,
    kind: str,
    content: str,
    message_id: str | None = None,
    loop_id: str | None = None,
    loop_name: str | None = None,
    incarnation: int | None = None,
    dedup_key: str | None = None,
    along: sa.Update | None = None,
) -> MessageInsert:
    """Insert the message unless its id exists; ``along``: an UPDATE made only when it is inserted (one statement
    with the insert on PostgreSQL, ``Tx.insert_if_absent``)."""
    _check_message(kind, content)  # (before the store clock: on PostgreSQL a statement of its own)
    message = message_of(await tx.now_ms(), session_id=session_id, agent_id=agent_id, group_id=group_id, kind=kind,
                         content=content, message_id=message_id, loop_id=loop_id, loop_name=loop_name,
                         incarnation=incarnation, dedup_key=dedup_key)
    inserted = await tx.insert_if_absent(M, inserted_values(message), along=along)
    if inserted:
        ring_after_commit(tx, message)
    return MessageInsert("queued" if inserted else "duplicate", message.id)


def message_of(now: int, *, session_id: str, agent_id: str, group_id: str, kind: str, content: str,
               message_id: str | None = None, loop_id: str | None = None, loop_name: str | None = None,
               incarnation: int | None = None, dedup_key: str | None = None) -> Message:
    """The message ``insert_message`` writes at store time ``now`` (its checks raise before anything is written)."""
    _check_message(kind, content)
    # §2.3: loop and lifecycle messages always have role user, so an LLM host feeds them as input
    return Message(id=message_id or new_id("msg", now), session_id=session_id, agent_id=agent_id, group_id=group_id,
                   kind=kind, role="system" if kind == "system" else "user", loop_id=loop_id, loop_name=loop_name,
                   incarnation=incarnation, dedup_key=dedup_key, content=content, created_ms=now, handled_ms=None,
                   handled_by=None)


def inserted_values(message: Message) -> dict[str, Any]:
    """The columns a new message is inserted with (``INSERTED``)."""
    return {n: getattr(message, n) for n in INSERTED}


def ring_after_commit(tx: Tx, message: Message) -> None:
    """Once ``tx`` commits, hand the inserted message to its session's readers (the committed row as a read returns
    it: the session's stream sends it without that read)."""
    bell = tx.store.bell
    tx.after_commit(lambda: bell.ring(message.session_id, message))


async def message_exists(tx: Tx, message_id: str) -> bool:
    if lookup_text(message_id) is None:
        return False
    return (await tx.execute(sa.select(M.c.id).where(M.c.id == message_id))).first() is not None


async def get_message(tx: Tx, message_id: str) -> Message | None:
    if lookup_text(message_id) is None:
        return None
    row = (await tx.execute(sa.select(M).where(M.c.id == message_id))).first()
    return None if row is None else _message(row)


async def list_messages(
    tx: Tx,
    *,
    session_id: str | None = None,
    agent_id: str | None = None,
    loop_id: str | None = None,
    kinds: Sequence[str] | None = None,
    unhandled: bool = False,
    after_ms: int | None = None,
    limit: int = 100,
) -> list[Message]:
    """Messages oldest first, filtered; ``unhandled`` keeps those no consumer acknowledged yet."""
    stmt = sa.select(M).order_by(M.c.created_ms, M.c.id).limit(limit)
    for column, value in ((M.c.session_id, session_id), (M.c.agent_id, agent_id), (M.c.loop_id, loop_id)):
        if value is not None:
            stmt = stmt.where(column == value)
    if kinds is not None:
        stmt = stmt.where(M.c.kind.in_(list(kinds)))
    if unhandled:
        stmt = stmt.where(M.c.handled_ms.is_(None))
    if after_ms is not None:
        stmt = stmt.where(M.c.created_ms > after_ms)
    return [_message(r) for r in await tx.execute(stmt)]


async def count_messages(tx: Tx, *, session_id: str | None = None, loop_id: str | None = None) -> int:
    stmt = sa.select(sa.func.count()).select_from(M)
    if session_id is not None:
        stmt = stmt.where(M.c.session_id == session_id)
    if loop_id is not None:
        stmt = stmt.where(M.c.loop_id == loop_id)
    return int((await tx.execute(stmt)).scalar_one())


# §2.3: handled_* is set when a wake handler or API consumer acknowledges the message
async def mark_handled(tx: Tx, message_id: str, *, handled_by: str) -> bool:
    """True when this call marked it; False when it was already handled or does not exist."""
    if lookup_text(message_id) is None:
        return False
    result = await tx.execute(
        M.update()
        .where(M.c.id == message_id, M.c.handled_ms.is_(None))
        .values(handled_ms=await tx.now_ms(), handled_by=handled_by[:200])
    )
    return bool(result.rowcount == 1)
