"""`wakeful loop …` in remote mode: the HTTP API of interfaces.md §2.2 with the key.

Each function answers what the local command prints, in the local `--json` shape where the API returns the same
data (pages are followed into one list); the differences are written down in docs/decisions-cli-remote.md.
"""

from __future__ import annotations

import json
from typing import Any

from wakeful.cli.output import UsageError
from wakeful.cli.remote import Remote, RemoteError, segment

__all__ = [
    "create", "delete", "discard", "events", "get", "list_loops", "logs", "retry", "send", "steer",
    "webhook",
]

MAX_LOG_PAGES = 500  # 200 lines a page: the stored log of a Loop is bounded well below this


def _loop(r: Remote, loop_id: str, tail: str = "") -> str:
    return f"{r.prefix()}/loops/{segment(loop_id, 'Loop')}{tail}"


def create(r: Remote, *, agent: str, session: str, artifact: str | None, elf: bytes | None, config: Any,
           capabilities: Any, name: str | None) -> dict[str, Any]:
    """``POST G/artifacts`` (with ``--elf``) then ``POST G/loops``: the Loop object."""
    ref = artifact
    if elf is not None:
        uploaded = r.request("POST", f"{r.prefix()}/artifacts", params={"agent_id": agent}, content=elf,
                             headers={"Content-Type": "application/octet-stream"})
        ref = str(uploaded["artifact"])
    body: dict[str, Any] = {"agent_id": agent, "session_id": session, "artifact": ref}
    body.update({k: v for k, v in (("name", name), ("config", config), ("capabilities", capabilities))
                 if v is not None})
    return dict(r.request("POST", f"{r.prefix()}/loops", json=body))


def list_loops(r: Remote, *, agent: str | None, state: str | None) -> list[dict[str, Any]]:
    """Every page of ``GET G/loops`` as one list (the local command prints a list)."""
    return r.pages(f"{r.prefix()}/loops", agent_id=agent, state=state)


def get(r: Remote, loop_id: str) -> dict[str, Any]:
    """``GET G/loops/{id}``: the Loop object."""
    return dict(r.get(_loop(r, loop_id)))


def steer(r: Remote, loop_id: str, op: str) -> dict[str, Any]:
    """``get``, ``pause``, ``resume`` or ``delete`` of one Loop."""
    if op == "get":
        return get(r, loop_id)
    if op == "delete":
        return delete(r, loop_id)
    return dict(r.request("POST", _loop(r, loop_id, f"/{op}")))


def delete(r: Remote, loop_id: str) -> dict[str, Any]:
    """``DELETE G/loops/{id}`` (204) as the local answer ``{loop_id, deleted: true}``; an absent Loop is the API's
    ``404 loop_not_found`` (locally, ``deleted: false``)."""
    r.request("DELETE", _loop(r, loop_id))
    return {"loop_id": loop_id, "deleted": True}


def logs(r: Remote, loop_id: str) -> list[dict[str, Any]]:
    """Every stored log line (``GET G/loops/{id}/logs``, followed by ``after_seq``), oldest first."""
    lines: list[dict[str, Any]] = []
    after: int | None = None
    for _ in range(MAX_LOG_PAGES):
        page = r.get(_loop(r, loop_id, "/logs"), after_seq=after, limit=200)
        items = page.get("items") if isinstance(page, dict) else None
        if not isinstance(items, list):
            raise RemoteError("invalid_response", "GET …/logs did not answer {items}", status=200)
        lines.extend(items)
        following = page.get("next_after_seq")
        if len(items) < 200 or not isinstance(following, int) or following == after:
            break
        after = following
    return lines


def webhook(r: Remote, loop_id: str, action: str) -> dict[str, Any]:
    """``POST G/loops/{id}/webhook``: ``{enabled, url?, hint?}``."""
    return dict(r.request("POST", _loop(r, loop_id, "/webhook"), json={"action": action}))


def events(r: Remote, loop_id: str, *, payloads: bool, status: str | None, limit: int) -> dict[str, Any]:
    """One page of ``GET G/loops/{id}/events`` in the local shape ``{loop_id, events, next_cursor,
    pending_count}``."""
    page = r.get(_loop(r, loop_id, "/events"), status=status, payloads=str(payloads).lower(),
                 limit=max(1, min(limit, 200)))
    return {"loop_id": loop_id, "events": page.get("items", []), "next_cursor": page.get("next_cursor"),
            "pending_count": page.get("pending_count")}


def retry(r: Remote, loop_id: str, event_ids: list[str] | None) -> dict[str, Any]:
    """``POST G/loops/{id}/pending/retry``: ``{retried, loop}``."""
    return dict(r.request("POST", _loop(r, loop_id, "/pending/retry"), json={"event_ids": event_ids}))


def discard(r: Remote, loop_id: str, event_ids: list[str] | None) -> dict[str, Any]:
    """``POST G/loops/{id}/pending/discard``: ``{discarded}``."""
    return dict(r.request("POST", _loop(r, loop_id, "/pending/discard"), json={"event_ids": event_ids}))


def send(r: Remote, loop_id: str, *, topic: str, payload: bytes, event_id: str | None) -> dict[str, Any]:
    """Intake route 1 (``POST G/loops/{id}/events``): ``{status, event_id, duplicate, payload_mismatch?}``.

    The payload's own text is sent as it is, so the server applies the strict event rules (harness.md §10.1) to
    exactly what the file holds; it is checked to be one JSON value first, so it cannot add fields to the body.
    """
    head = {"topic": topic, **({"event_id": event_id} if event_id is not None else {})}
    body = json.dumps(head, ensure_ascii=False).encode()
    if payload.strip():
        try:
            text = payload.decode("utf-8")
            json.loads(text)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; nesting too deep
            raise UsageError(f"--payload is not one JSON value: {exc}") from None
        body = body[:-1] + b',"payload":' + text.strip().encode() + b"}"
    return dict(r.request("POST", _loop(r, loop_id, "/events"), content=body,
                          headers={"Content-Type": "application/json"}))
