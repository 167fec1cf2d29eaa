"""`wakeful session watch` in remote mode: the SSE stream `G/sessions/{id}/stream` of interfaces.md §2.2
(resumed with `Last-Event-ID`). The other `group | key | agent | session` commands run one code path over a
harness backend in both modes (`admin_cmd`).

Records keep the local `--json` shapes; docs/decisions-cli-remote.md.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from wakeful.cli.output import Unavailable
from wakeful.cli.remote import Remote, RemoteError, answer, read_bounded, segment

__all__ = ["watch"]

READ_IDLE_S = 45.0  # the stream sends a comment every 15 s: this long with nothing read is a dead connection
RECONNECTS = 10  # consecutive failed reconnects (1 s apart) before the watch gives up (exit 3)
START_PAGES = 1000  # pages of 200 read to find a session's newest message (the watch starts after it)
MAX_LINE = 1 << 20  # characters of one stream line: a message's content is at most 8 KiB (harness.md limits)
_CURSOR = re.compile(r"[\x21-\x7e]{1,512}")  # an event id sent back as Last-Event-ID: a plain header value


# ---- session watch


def watch(r: Remote, session_id: str, *, for_s: float | None, from_start: bool,
          emit: Callable[[dict[str, Any]], None]) -> None:
    """Follow ``G/sessions/{id}/stream`` and ``emit`` each new message in the local record shape; a dropped
    connection resumes after the last message seen (``Last-Event-ID``). Ctrl-C (SIGINT) or ``--for`` ends it."""
    path = f"{r.prefix()}/sessions/{segment(session_id, 'session')}"
    end = None if for_s is None else time.monotonic() + max(0.0, for_s)
    try:
        # the start point (from the start: one read), so an unknown session or a dead server ends it here
        last: str | None = None
        if from_start:
            r.get(f"{path}/messages", limit=1)
        else:
            last = _newest(r, path)
        failures = 0
        while end is None or time.monotonic() < end:
            try:
                for cursor, message in _stream(r, f"{path}/stream", last, end):
                    failures = 0
                    last = cursor or last
                    emit(_record(message))
                    if end is not None and time.monotonic() >= end:
                        return
                time.sleep(0.5)  # the server ended the stream (a restart): reconnect after the last message
            except Unavailable:
                failures += 1
                if failures > RECONNECTS:
                    raise
                time.sleep(1.0)
    except KeyboardInterrupt:  # Ctrl-C stops the watch cleanly (exit 0), as in local mode
        return


def _newest(r: Remote, path: str) -> str | None:
    """The cursor of the session's newest message (the watch starts after it), following the pages."""
    cursor: str | None = None
    newest: str | None = None
    for _ in range(START_PAGES):
        page = r.get(f"{path}/messages", limit=200, cursor=cursor)
        items = page.get("items") if isinstance(page, dict) else None
        if not isinstance(items, list):
            raise RemoteError("invalid_response", "GET …/messages did not answer a page", status=200)
        if items and isinstance(items[-1], dict):
            newest = str(items[-1].get("cursor") or newest)
            if not _CURSOR.fullmatch(newest):  # it is sent back as Last-Event-ID
                raise RemoteError("invalid_response", "GET …/messages answered a cursor no header can carry",
                                  status=200)
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return newest


def _record(message: dict[str, Any]) -> dict[str, Any]:
    """The local `session watch` record of one API message."""
    keys = ("id", "kind", "loop_id", "loop_name", "incarnation", "content", "created_ms", "handled_ms")
    return {"type": "message", **{k: message.get(k) for k in keys}}


def _stream(r: Remote, path: str, last: str | None, end: float | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """One connection to the SSE stream: ``(cursor, message)`` per ``message`` event; returns when the server
    ends the stream or ``end`` passes; a connection that fails or goes silent is ``Unavailable``."""
    import httpx

    headers = {"Authorization": f"Bearer {r.key}", "Accept": "text/event-stream",
               **({"Last-Event-ID": last} if last else {})}
    idle = READ_IDLE_S if end is None else max(0.05, min(READ_IDLE_S, end - time.monotonic()))
    timeout = httpx.Timeout(10.0, read=idle)
    try:
        with httpx.Client(base_url=r.url, timeout=timeout, trust_env=False) as http, \
                http.stream("GET", path, headers=headers) as response:
            if response.status_code != 200 or not response.headers.get("content-type", "").startswith(
                    "text/event-stream"):
                answer("GET", path, response, read_bounded(response, time.monotonic() + 30.0))
                raise RemoteError("invalid_response", f"GET {path} did not answer an event stream",
                                  status=response.status_code)
            yield from _events(_lines(response.iter_text(), end))
    except httpx.ReadTimeout:
        if end is not None and time.monotonic() >= end:
            return
        raise Unavailable(f"the stream of {r.shown} went silent for {idle:.0f} s") from None
    except httpx.TransportError as exc:
        raise Unavailable(f"the server {r.shown} is unreachable: {type(exc).__name__}") from None


def _lines(chunks: Iterator[str], end: float | None) -> Iterator[str]:
    """The stream's lines (CR, LF or CRLF ends one); a line longer than ``MAX_LINE`` is ``invalid_response`` — an
    endless line must not fill the memory — and the ``--for`` end is checked with every chunk, not every line."""
    pending = ""
    for chunk in chunks:
        if end is not None and time.monotonic() >= end:
            return
        text, held = pending + chunk, ""
        if text.endswith("\r"):  # a CR ending a chunk may be the first half of a CRLF
            text, held = text[:-1], "\r"
        parts = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        pending = parts.pop() + held
        if len(pending) > MAX_LINE:
            raise RemoteError("invalid_response", f"the event stream sent a line longer than {MAX_LINE} "
                              "characters", status=200)
        yield from parts
    if pending.rstrip("\r"):
        yield pending.rstrip("\r")


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Server-sent events (the WHATWG framing): ``id``/``event``/``data`` fields, a blank line dispatches,
    ``:`` lines are comments; only ``message`` events carrying a JSON object are answered."""
    event_id, kind = "", "message"
    data: list[str] = []
    for line in lines:
        if not line:
            if data and kind == "message":
                try:
                    value = json.loads("\n".join(data), parse_constant=_not_json)
                except (ValueError, RecursionError):
                    value = None
                if isinstance(value, dict):
                    cursor = event_id or str(value.get("cursor") or "")
                    yield (cursor if _CURSOR.fullmatch(cursor) else ""), value
            kind, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, text = line.partition(":")
        text = text[1:] if text.startswith(" ") else text
        if name == "id":
            event_id = text
        elif name == "event":
            kind = text
        elif name == "data":
            data.append(text)
