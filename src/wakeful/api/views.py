"""JSON shapes of the face's resources (agents, sessions, messages) and the message cursor."""

from __future__ import annotations

from typing import Any

from wakeful.api.pages import decode_cursor, encode_cursor
from wakeful.harness.errors import InvalidRequest
from wakeful.harness.store.agents import Agent
from wakeful.harness.store.sessions import Message, Session

__all__ = ["agent_view", "message_cursor", "message_view", "parse_message_cursor", "session_view"]


def agent_view(agent: Agent) -> dict[str, Any]:
    return {"id": agent.id, "group_id": agent.group_id, "name": agent.name, "status": agent.status,
            "created_ms": agent.created_ms, "archived_ms": agent.archived_ms, "metadata": agent.metadata}


def session_view(session: Session) -> dict[str, Any]:
    return {"id": session.id, "agent_id": session.agent_id, "group_id": session.group_id, "title": session.title,
            "created_ms": session.created_ms}


def message_cursor(message: Message) -> str:
    """Opaque, ordered like the messages: (created_ms, id)."""
    return encode_cursor(f"{message.created_ms:016d}:{message.id}")


def parse_message_cursor(cursor: str | None, *, field: str = "after") -> tuple[int, str] | None:
    if cursor is None or cursor == "":
        return None
    try:
        text = decode_cursor(cursor)
    except InvalidRequest:
        raise InvalidRequest("the message cursor is not one this server issued", field=field) from None
    ms, sep, message_id = (text or "").partition(":")
    if not sep or not ms.isascii() or not ms.isdigit() or len(ms) > 18 or not 1 <= len(message_id) <= 200:
        raise InvalidRequest("the message cursor is not one this server issued", field=field)
    return int(ms), message_id


def message_view(message: Message) -> dict[str, Any]:
    return {"id": message.id, "cursor": message_cursor(message), "session_id": message.session_id,
            "agent_id": message.agent_id, "group_id": message.group_id, "kind": message.kind, "role": message.role,
            "loop_id": message.loop_id, "loop_name": message.loop_name, "incarnation": message.incarnation,
            "dedup_key": message.dedup_key, "content": message.content, "created_ms": message.created_ms,
            "handled_ms": message.handled_ms, "handled_by": message.handled_by, "handled": message.handled_ms is not None}
