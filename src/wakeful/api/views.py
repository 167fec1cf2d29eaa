"""JSON shapes of the face's resources (agents, sessions, messages) and the message cursor."""

from __future__ import annotations

from typing import Any

from wakeful.harness.inbox import message_cursor, message_view, parse_message_cursor
from wakeful.harness.store.agents import Agent
from wakeful.harness.store.sessions import Session

__all__ = ["agent_view", "message_cursor", "message_view", "parse_message_cursor", "session_view"]


def agent_view(agent: Agent) -> dict[str, Any]:
    return {"id": agent.id, "group_id": agent.group_id, "name": agent.name, "status": agent.status,
            "created_ms": agent.created_ms, "archived_ms": agent.archived_ms, "metadata": agent.metadata}


def session_view(session: Session) -> dict[str, Any]:
    return {"id": session.id, "agent_id": session.agent_id, "group_id": session.group_id, "title": session.title,
            "created_ms": session.created_ms}
