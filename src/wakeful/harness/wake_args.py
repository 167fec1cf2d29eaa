"""Argument rules of the self-scoped host calls: agent.notify, loop.state.put, loop.ack, loop.log.

harness.md §9.5 and §9.6; a violation is the host-call reason ``invalid_arguments`` (guest: SF_HOST_ERROR).
"""

from __future__ import annotations

from typing import Any

from wakeful.harness.errors import HostCallRefused
from wakeful.runtime import jsonval
from wakeful.sdk.rules import AGENT_LIMITS

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_DEDUP_KEY_BYTES",
    "MAX_LOG_CHARS",
    "ack_event_id",
    "log_text",
    "notify_args",
    "state_arg",
]

MAX_CONTENT_BYTES = AGENT_LIMITS["wake_content_bytes"]  # §9.5
MAX_DEDUP_KEY_BYTES = AGENT_LIMITS["dedup_key_bytes"]  # §9.5
MAX_LOG_CHARS = 1024  # §9.6
MAX_EVENT_ID_BYTES = 128  # §2.6


def _refuse(message: str) -> HostCallRefused:
    return HostCallRefused("invalid_arguments", message)


def _object(args: Any, capability: str) -> dict[str, Any]:
    if not isinstance(args, dict):
        raise _refuse(f"{capability} takes a JSON object")
    return args


# §9.5: content (alias text) 1–8192 bytes, or an object/array stored as compact JSON; dedup_key 1–128 bytes
def notify_args(args: Any) -> tuple[str, str]:
    """Return ``(content, dedup_key)`` of an ``agent.notify`` call."""
    args = _object(args, "agent.notify")
    content = _content(args.get("content", args.get("text")))
    return content, _dedup_key(args.get("dedup_key"))


def _content(value: Any) -> str:
    if isinstance(value, dict | list):
        value = jsonval.dumps(value)
    if not isinstance(value, str):
        raise _refuse("agent.notify needs content (or text): a string, object or array")
    size = _utf8_len(value)
    if not 1 <= size <= MAX_CONTENT_BYTES:
        raise _refuse(f"agent.notify content is {size} bytes; 1..{MAX_CONTENT_BYTES} allowed")
    if "\x00" in value:  # message content is text; no store keeps U+0000 in text
        raise _refuse("agent.notify content must not contain U+0000")
    return value


def _dedup_key(value: Any) -> str:
    if not isinstance(value, str):
        raise _refuse("agent.notify needs dedup_key: a string")
    size = _utf8_len(value)
    if not 1 <= size <= MAX_DEDUP_KEY_BYTES:
        raise _refuse(f"dedup_key is {size} bytes; 1..{MAX_DEDUP_KEY_BYTES} allowed")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value):
        raise _refuse("dedup_key must not contain control characters")
    if value.startswith("lifecycle:"):
        raise _refuse("dedup_key must not start with 'lifecycle:' (reserved for notices)")
    return value


# §6: loop.state.put {state}; when state is absent, the whole argument object is the state (Salix)
def state_arg(args: Any) -> Any:
    args = _object(args, "loop.state.put")
    return args.get("state", args)


# §9.6: loop.ack {event_id}; empty id → invalid_arguments
def ack_event_id(args: Any) -> str:
    event_id = _object(args, "loop.ack").get("event_id")
    if not isinstance(event_id, str) or not 1 <= _utf8_len(event_id) <= MAX_EVENT_ID_BYTES:
        raise _refuse(f"loop.ack needs event_id: a string of 1..{MAX_EVENT_ID_BYTES} bytes")
    return event_id


# §9.6: loop.log {message | text}, longer than 1024 chars is cut with a … mark
def log_text(args: Any) -> str:
    args = _object(args, "loop.log")
    text = args.get("message", args.get("text"))
    if not isinstance(text, str):
        raise _refuse("loop.log needs message (or text): a string")
    if "\x00" in text:  # log lines are text; no store keeps U+0000 in text
        raise _refuse("loop.log message must not contain U+0000")
    if len(text) > MAX_LOG_CHARS:
        text = text[: MAX_LOG_CHARS - 1] + "…"
    return text


def _utf8_len(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise _refuse("text is not valid Unicode (lone surrogate)") from None
