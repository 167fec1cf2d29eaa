"""`wakeful loop webhook|events|retry|discard|send|tail` and `wakeful session watch` (interfaces.md §4.2).

events, retry, discard and send call the harness operations (``wakeful.harness.ops.events``) through one
``Backend`` (``cli/backend.py``): locally as the operator on the store — what they write is picked up by the running
node at its next tick — or over ``--server`` with the key. In remote mode send posts the payload file's own text
(``loop_remote.send``) and webhook calls the HTTP API (``loop_remote``); watch follows the session's SSE stream
(``session_remote``); tail refuses (exit 2): the API has no stream of a Loop's logs. `loop tail` and `session
watch` follow the store locally and print JSON Lines with `--json`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from wakeful.cli import backend, loop_remote, remote
from wakeful.cli.db_cmd import store_url
from wakeful.cli.output import Out, Unavailable, UsageError, escape, out_for, shown
from wakeful.errors import WakefulError

if TYPE_CHECKING:  # the harness (and SQLAlchemy) load when a command runs, not when the CLI starts
    from wakeful.harness import Harness
    from wakeful.harness.ops import Backend

__all__ = [
    "loop_discard", "loop_events", "loop_retry", "loop_send", "loop_tail", "loop_webhook", "register",
    "session_watch",
]

T = TypeVar("T")
OPERATOR = "operator"
POLL_S = 0.5

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
ForOpt = Annotated[float | None, typer.Option("--for", help="Stop following after this many seconds.")]


def register(loop_app: typer.Typer, session_app: typer.Typer) -> None:
    """Add these commands to `wakeful loop` and `wakeful session` (interfaces.md §4.2)."""
    for name, fn in (("webhook", loop_webhook), ("events", loop_events), ("retry", loop_retry),
                     ("discard", loop_discard), ("send", loop_send), ("tail", loop_tail)):
        loop_app.command(name)(fn)
    session_app.command("watch")(session_watch)


def _run(out: Out, body: Callable[[Harness], Awaitable[T]]) -> T:
    """The configured store as the operator (``Harness.offline``: nothing runs here), ``body``, close; typed
    errors exit 1, unavailable 3."""
    from wakeful.harness import Harness
    from wakeful.harness.config import load_config
    from wakeful.harness.errors import StoreUnavailable

    async def go() -> T:
        harness = Harness(load_config(), db_url=store_url())
        async with harness.offline():
            return await body(harness)

    try:
        return asyncio.run(go())
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))
    except WakefulError as exc:
        out.fail(exc)


def _show(out: Out, value: Any, lines: list[str]) -> None:
    if out.json:
        out.document(value)
        return
    for line in lines:
        out.text(escape(line))  # ids, topics and payloads are data (a sender's, a server's), never markup


# ---- webhook ----


def loop_webhook(
    ctx: typer.Context, loop_id: str,
    action: Annotated[str, typer.Argument(help="enable, rotate or revoke.")], json_: JsonOpt = False,
) -> None:
    """Manage the Loop's secret webhook URL (shown once, at enable or rotate)."""

    out = out_for(ctx, json_)

    async def body(site: backend.Site) -> dict[str, Any]:  # one code path in both modes (issue 15)
        group = await site.group(loop=loop_id)
        answer: dict[str, Any] = await site.backend.call("webhooks.webhook", group_id=group, loop_id=loop_id,
                                                         action=action)
        if site.local:
            from wakeful.cli.nodefile import live_node
            from wakeful.harness.config import load_config

            node = live_node(load_config().data_dir)
            return _absolute(answer, node["url"] if node else None)
        return _absolute(answer, remote.server_url())

    result = backend.run(out, body)
    lines = [f"enabled: {str(result['enabled']).lower()}"]
    if result.get("url"):
        lines.append(f"url: {result['url']}  (shown once; rotate for a new one)")
    if result.get("hint"):
        lines.append(f"hint: …{result['hint']}")
    _show(out, result, lines)


def _absolute(made: dict[str, Any], base: str | None) -> dict[str, Any]:
    """issue 19: a URL to hand a provider. Without ``server.public_base_url`` the harness answers the bare path;
    the node this command reaches (``--server``, or the one running on the data directory) supplies the rest."""
    url = made.get("url")
    if isinstance(url, str) and url.startswith("/") and base:
        return {**made, "url": base.rstrip("/") + url}
    return made


# ---- pending events ----


def _event_line(e: dict[str, Any]) -> str:
    when = e.get("deadline_ms")
    tail = f"  deadline {_at(when)}" if when else ""
    payload = f"  {json.dumps(e['payload'], ensure_ascii=False)}" if "payload" in e else ""
    return f"{e['event_id']}  {e['status']}  {e['topic']}  {e['envelope_bytes']} B  received {_at(e['received_ms'])}{tail}{payload}"


def loop_events(
    ctx: typer.Context, loop_id: str,
    payloads: Annotated[bool, typer.Option("--payloads", help="Include payloads.")] = False,
    status: Annotated[Literal["pending", "acked", "discarded"] | None, typer.Option("--status", help="Only events in this status.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1..200).")] = 200,
    json_: JsonOpt = False,
) -> None:
    """Pending and recently settled events of a Loop, in delivery order."""
    out = out_for(ctx, json_)

    async def body(backend: Backend, group: str | None) -> dict[str, Any]:
        page = await backend.call("events.list", group_id=group, loop_id=loop_id, payloads=payloads or None,
                                  status=status, limit=limit if group is None else max(1, min(limit, 200)))
        return {"loop_id": loop_id, "events": page.get("items", []), "next_cursor": page.get("next_cursor"),
                "pending_count": page.get("pending_count")}

    result = backend.run_plain(out, body)
    lines = [_event_line(e) for e in result["events"]] or ["no events"]
    _show(out, result, [*lines, f"pending: {result['pending_count']}"])


def _settle(action: str, loop_id: str, events: list[str] | None) -> Callable[[Backend, str | None],
                                                                            Awaitable[dict[str, Any]]]:
    async def body(backend: Backend, group: str | None) -> dict[str, Any]:
        return dict(await backend.call(f"events.{action}", group_id=group, loop_id=loop_id, event_ids=events))

    return body


def loop_retry(
    ctx: typer.Context, loop_id: str,
    events: Annotated[list[str] | None, typer.Argument(help="Event ids (default: every pending event).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Clear deadlines of pending events; an active Loop is reloaded by its node at a new incarnation."""
    out = out_for(ctx, json_)
    result = backend.run_plain(out, _settle("retry", loop_id, events or None))
    _show(out, result, [f"retried: {', '.join(result['retried']) or 'none'}",
                        f"loop: {result['loop']['state']}  incarnation {result['loop']['incarnation']}"])


def loop_discard(
    ctx: typer.Context, loop_id: str,
    events: Annotated[list[str] | None, typer.Argument(help="Event ids (default: every pending event).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Discard pending events (their ids stay known for dedup)."""
    out = out_for(ctx, json_)
    result = backend.run_plain(out, _settle("discard", loop_id, events or None))
    _show(out, result, [f"discarded: {', '.join(result['discarded']) or 'none'}"])


def loop_send(
    ctx: typer.Context, loop_id: str,
    topic: Annotated[str, typer.Option("--topic", help="Event topic (1-128 bytes).")],
    payload: Annotated[Path | None, typer.Option("--payload", help="JSON file with the payload ('-': stdin).")] = None,
    event_id: Annotated[str | None, typer.Option("--event-id", help="Event id (default: the payload hash).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Admit an event as the operator (same rules as the intake routes)."""
    out = out_for(ctx, json_)
    raw = _read(payload) if payload is not None else b""
    if remote.server_url() is not None:  # the file's own text travels, so the server's strict rules judge it
        result = remote.call(out, lambda: loop_remote.send(remote.connect(), loop_id, topic=topic, payload=raw,
                                                           event_id=event_id))
    else:
        async def send(backend: Backend, group: str | None) -> dict[str, Any]:
            from wakeful.harness import parse_event_payload

            value = parse_event_payload(raw) if raw.strip() else None  # strict-rule flaws: refused by admission
            return dict(await backend.call("events.send", group_id=group, loop_id=loop_id, topic=topic,
                                           payload=value, event_id=event_id))

        result = backend.run_plain(out, send)
    dup = " (duplicate)" if result["duplicate"] else ""
    mismatch = "; payload differs from the stored one" if result.get("payload_mismatch") else ""
    _show(out, result, [f"accepted {result['event_id']}{dup}{mismatch}"])


def _read(path: Path) -> bytes:
    try:
        if str(path) == "-":
            import sys

            return sys.stdin.buffer.read(1 << 20)
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


# ---- following ----


async def _follow(seconds: float | None, poll: Callable[[], Awaitable[None]]) -> None:
    end = None if seconds is None else time.monotonic() + seconds
    while True:
        await poll()
        if end is not None and time.monotonic() >= end:
            return
        await asyncio.sleep(POLL_S if end is None else min(POLL_S, max(0.0, end - time.monotonic())))


def loop_tail(ctx: typer.Context, loop_id: str, for_: ForOpt = None, json_: JsonOpt = False) -> None:
    """Follow a Loop's log lines and transitions live (Ctrl-C stops); JSON Lines with --json."""
    remote.refuse_local("wakeful loop tail")  # the API has no log stream to follow (interfaces.md §2.2)
    out = out_for(ctx, json_)

    async def body(harness: Harness) -> None:
        from wakeful.harness.ops import follow

        cursor = await follow.loop_cursor(harness, loop_id)  # context first: the last 20 lines, 5 transitions

        async def poll() -> None:
            for record in await follow.loop_records(harness, loop_id, cursor):
                _emit(out, record)

        await _follow(for_, poll)

    _stream(out, body)


def session_watch(
    ctx: typer.Context, session_id: str, for_: ForOpt = None,
    from_start: Annotated[bool, typer.Option("--from-start", help="Print the session's earlier messages first.")]
    = False,
    json_: JsonOpt = False,
) -> None:
    """Follow the wakes arriving in a session (Ctrl-C stops); JSON Lines with --json."""
    if remote.server_url() is not None:  # the SSE stream G/sessions/{id}/stream (session_remote)
        from wakeful.cli import session_remote

        out = out_for(ctx, json_)
        remote.call(out, lambda: session_remote.watch(remote.connect(), session_id, for_s=for_, from_start=from_start,
                                                      emit=lambda record: _emit(out, record)))
        return
    out = out_for(ctx, json_)

    async def body(harness: Harness) -> None:
        from wakeful.harness.ops import follow

        cursor = await follow.session_cursor(harness, session_id, from_start=from_start)

        async def poll() -> None:
            nonlocal cursor
            records, cursor = await follow.session_records(harness, session_id, cursor)
            for record in records:
                _emit(out, record)

        await _follow(for_, poll)

    _stream(out, body)


def _emit(out: Out, record: dict[str, Any]) -> None:
    if out.json:
        out.line(record)
    else:  # guest and server text: its control characters are shown, never sent to the terminal
        out.plain(shown(_human(record)))


def _human(record: dict[str, Any]) -> str:
    if record["type"] == "log":
        return f"{_at(record['at_ms'])} #{record['incarnation']} {record['source']}: {record['text']}\n"
    if record["type"] == "transition":
        frm = (record["from"] or "-") + (f"({record['from_reason']})" if record["from_reason"] else "")
        to = record["to"] + (f"({record['to_reason']})" if record["to_reason"] else "")
        return (f"{_at(record['at_ms'])} #{record['incarnation']} {frm} -> {to} by {record['actor']}"
                f"{': ' + record['detail'] if record['detail'] else ''}\n")
    return (f"{_at(record['created_ms'])} {record['kind']} {record['loop_name'] or ''} {record['id']}: "
            f"{record['content']}\n")


def _at(ms: Any) -> str:
    """issue 19: times for people are ISO-8601 UTC (``--json`` keeps the epoch milliseconds)."""
    from wakeful.cli.tables import iso_ms

    return iso_ms(ms) if isinstance(ms, int) else str(ms)


def _stream(out: Out, body: Callable[[Harness], Awaitable[None]]) -> None:
    try:
        _run(out, body)
    except KeyboardInterrupt:
        return
