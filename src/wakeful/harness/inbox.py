"""A session's messages as the faces show them (interfaces.md §2.2 ``G/sessions/{id}/messages``, MCP
``session.messages``): oldest first after a cursor, the message JSON, and marking handled by ids or up to a cursor.

The cursor is the URL-safe base64 (no padding) of ``<created_ms:016d>:<message id>``, ordered like the messages.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from wakeful.harness.errors import InvalidRequest
from wakeful.harness.store import schema, sessions
from wakeful.harness.store.core import Tx
from wakeful.harness.store.sessions import Message

__all__ = ["mark_handled", "message_cursor", "message_view", "messages_after", "parse_message_cursor"]

M = schema.message


def message_cursor(message: Message) -> str:
    """Opaque, ordered like the messages: (created_ms, id)."""
    return base64.urlsafe_b64encode(f"{message.created_ms:016d}:{message.id}".encode()).decode().rstrip("=")


def parse_message_cursor(cursor: str | None, *, field: str = "after") -> tuple[int, str] | None:
    if cursor is None or cursor == "":
        return None
    refused = InvalidRequest("the message cursor is not one this server issued", field=field)
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise refused from None
    ms, sep, message_id = text.partition(":")
    if not sep or not ms.isascii() or not ms.isdigit() or len(ms) > 18 or not 1 <= len(message_id) <= 200:
        raise refused
    if not message_id.isprintable():
        raise refused
    return int(ms), message_id


def message_view(message: Message) -> dict[str, Any]:
    return {"id": message.id, "cursor": message_cursor(message), "session_id": message.session_id,
            "agent_id": message.agent_id, "group_id": message.group_id, "kind": message.kind, "role": message.role,
            "loop_id": message.loop_id, "loop_name": message.loop_name, "incarnation": message.incarnation,
            "dedup_key": message.dedup_key, "content": message.content, "created_ms": message.created_ms,
            "handled_ms": message.handled_ms, "handled_by": message.handled_by, "handled": message.handled_ms is not None}


async def messages_after(tx: Tx, session_id: str, after: tuple[int, str] | None, *, unhandled: bool,
                         limit: int) -> list[Message]:
    """Up to ``limit`` messages of the session after the cursor position, oldest first."""
    stmt = sa.select(M).where(M.c.session_id == session_id).order_by(M.c.created_ms, M.c.id).limit(limit)
    if after is not None:
        ms, message_id = after
        stmt = stmt.where(sa.or_(M.c.created_ms > ms, sa.and_(M.c.created_ms == ms, M.c.id > message_id)))
    if unhandled:
        stmt = stmt.where(M.c.handled_ms.is_(None))
    return [Message(**{n: getattr(r, n) for n in Message.__dataclass_fields__}) for r in await tx.execute(stmt)]


async def mark_handled(tx: Tx, session_id: str, *, message_ids: Sequence[str] | None, up_to: str | None,
                       handled_by: str) -> list[str]:
    """Mark the named messages (or all unhandled up to a cursor) handled; the ids this call marked."""
    if (message_ids is None) == (up_to is None):
        raise InvalidRequest("give exactly one of message_ids or up_to", field="message_ids")
    if up_to is not None:
        position = parse_message_cursor(up_to, field="up_to")
        assert position is not None
        ms, last_id = position
        stmt = sa.select(M.c.id).where(
            M.c.session_id == session_id, M.c.handled_ms.is_(None),
            sa.or_(M.c.created_ms < ms, sa.and_(M.c.created_ms == ms, M.c.id <= last_id)))
    else:
        stmt = sa.select(M.c.id).where(M.c.session_id == session_id, M.c.id.in_(list(message_ids or [])))
    ids = [r.id for r in await tx.execute(stmt)]
    return [message_id for message_id in ids if await sessions.mark_handled(tx, message_id, handled_by=handled_by)]
