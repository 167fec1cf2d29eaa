"""A session's messages (interfaces.md §2.2 "Agents, sessions and wakes"): a page of them oldest first, marking
them handled, and :func:`follow` — the new messages as they arrive, for a face's live stream (the HTTP API's
server-sent events).

Each operation answers exactly what its HTTP route answers; see ``wakeful.harness.ops.table``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import InvalidRequest
from wakeful.harness.inbox import (
    mark_handled,
    message_cursor,
    message_view,
    messages_after,
    parse_message_cursor,
)
from wakeful.harness.ops.sessions import session_in_scope
from wakeful.harness.ops.table import operation

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = ["POLL_S", "follow", "handled", "list_messages", "message_cursor", "message_view", "open_stream",
           "parse_message_cursor"]

FOLLOW_PAGE = 100  # messages per read of a stream
POLL_S = 0.5  # the backup poll of a stream: a commit on this node rings the store's message bell at once
MAX_LIMIT = 200


@operation("messages.list")
async def list_messages(harness: Harness, principal: Principal, *, group_id: str, session_id: str, limit: int = 50,
                        after: str | None = None, unhandled: bool = False,
                        cursor: str | None = None) -> dict[str, Any]:
    """One page of the session's messages after ``cursor`` (or the message cursor ``after``), oldest first."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be an integer in 1..{MAX_LIMIT}", field="limit")
    start = parse_message_cursor(cursor if cursor else after, field="cursor" if cursor else "after")
    async with harness.store.tx(readonly=True) as tx:
        await session_in_scope(tx, principal, group_id, session_id)
        found = await messages_after(tx, session_id, start, unhandled=bool(unhandled), limit=limit + 1)
    items = found[:limit]
    return {"items": [message_view(m) for m in items],
            "next_cursor": message_cursor(items[-1]) if len(found) > limit else None}


@operation("messages.handled")
async def handled(harness: Harness, principal: Principal, *, group_id: str, session_id: str,
                  message_ids: Sequence[str] | None = None, up_to: str | None = None) -> dict[str, Any]:
    """Mark the named messages (or every unhandled one up to a cursor) handled: ``{handled: [ids marked]}``."""
    async with harness.store.tx() as tx:
        await session_in_scope(tx, principal, group_id, session_id)
        marked = await mark_handled(tx, session_id, message_ids=message_ids, up_to=up_to, handled_by=principal.actor)
    return {"handled": marked}


async def open_stream(harness: Harness, principal: Principal, *, group_id: str, session_id: str,
                      after: str | None, field: str = "after") -> tuple[int, str] | None:
    """Check a stream may start: the session in scope and the start cursor (``field`` names it in a refusal);
    the position to :func:`follow` from."""
    start = parse_message_cursor(after, field=field)
    async with harness.store.tx(readonly=True) as tx:
        await session_in_scope(tx, principal, group_id, session_id)
    return start


async def follow(harness: Harness, session_id: str, start: tuple[int, str] | None, *,
                 poll_s: float | None = None) -> AsyncGenerator[tuple[str, dict[str, Any]] | None, None]:
    """The session's messages after ``start`` as ``(cursor, message view)``, forever; ``None`` after each wait
    that found nothing (the face decides when to send a keepalive). A store that is away is waited out: the
    position is kept.

    Subscribed to the store's message bell for the whole follow, so a commit on this node is never missed while
    the store is read, and its message is yielded as the bell hands it over, before any read (issue 16: no read
    transaction between a wake's commit and its stream). The store is then read from the last position read, as
    the backup for messages of other nodes or processes; a message yielded already is not yielded again."""
    after = start  # the position of the last message read from the store
    ahead: set[tuple[int, str]] = set()  # positions yielded from the bell after ``after``: the read skips them
    wait_s = POLL_S if poll_s is None else poll_s
    with harness.store.bell.subscribe(session_id) as bell:
        while True:
            try:
                async with harness.store.tx(readonly=True) as tx:
                    found = await messages_after(tx, session_id, after, unhandled=False, limit=FOLLOW_PAGE)
            except Exception:  # the store is away: keep following, try again (the cursor keeps the place)
                found = []
            for message in found:
                position = (message.created_ms, message.id)
                if position not in ahead:
                    yield message_cursor(message), message_view(message)
                after = position
            if after is not None and ahead:
                ahead = {p for p in ahead if p > after}
            if len(found) == FOLLOW_PAGE:
                continue  # a full page: read on
            # a commit that landed during the read rang the subscription already: no wait then
            rung = await bell.wait(wait_s)  # rung by a commit on this node
            for message in sorted(bell.take(), key=lambda m: (m.created_ms, m.id)):
                position = (message.created_ms, message.id)
                if (after is None or position > after) and position not in ahead:
                    ahead.add(position)
                    yield message_cursor(message), message_view(message)
            if not rung:
                yield None
