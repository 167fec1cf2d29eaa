"""JSON shapes of the face's resources (agents, sessions, messages) and the message cursor — the operations'
(``wakeful.harness.ops``), named here for the routes that still render them."""

from __future__ import annotations

from wakeful.harness.ops.agents import agent_view
from wakeful.harness.ops.messages import message_cursor, message_view, parse_message_cursor
from wakeful.harness.ops.sessions import session_view

__all__ = ["agent_view", "message_cursor", "message_view", "parse_message_cursor", "session_view"]
