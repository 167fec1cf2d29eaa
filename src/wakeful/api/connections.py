"""Connection limits of the HTTP server (issue 14; docs/decisions-api.md "Slow clients"): uvicorn's h11 protocol
with per-connection read deadlines and a per-node connection limit.

- **Headers:** a request's line and headers must arrive within ``header_timeout_s`` of the connection opening
  (or of the previous response ending); a trickle of bytes does not extend it. A connection that sent part of a
  request is answered ``408 request_timeout`` and closed; one that sent nothing is closed silently.
- **Body:** once the headers are in, the whole body must arrive within ``body_timeout_s``, also when the route
  answered early; the connection is then closed (the route, if still reading, sees a disconnect).
- **Keep-alive:** uvicorn's ``timeout_keep_alive`` (``keep_alive_s``) closes idle connections.
- **Fast path** (issue 16, ``fastpath.py``): the plain keep-alive POST of an event or of a Loop's create is read
  and answered without h11's state machine, under the same deadlines, limits and shutdown; every other request is
  h11's as before (``fast_path = False`` turns it off).
- **Connections:** beyond ``max_connections`` open connections, a new one is answered ``503 unavailable`` at once,
  its write side shut, and closed after ``LINGER_S`` (so the client reads the answer instead of a reset).

The deadline is one timer per connection. A change of the h11 state's phase moves the phase's due time; the
timer is re-armed only when the new due time is earlier than the armed one, and a timer that fires before its
phase's due time (or with no phase) re-arms for what is left (issue 16: a keep-alive request used to cancel its
head deadline and arm a new one, two timer-heap operations per request). A request being processed by the app
(and a streamed response such as SSE) has no client deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote

import h11
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.h11_impl import H11Protocol

from wakeful.api.fastpath import FAST_BODY_MAX, FAST_HEAD_MAX, FastCycle, parse_head
from wakeful.api.middleware import direct_post
from wakeful.harness.config import HttpLimits

__all__ = ["LINGER_S", "CoalescingTransport", "Guard", "guarded_protocol", "raw_answer"]

LINGER_S = 1.0  # a refused connection stays this long after its 503, for the client to read it


@dataclass(frozen=True, slots=True)
class Guard:
    """The limits one server's connections share; ``on_refusal(status)`` counts the limit's 503s."""

    limits: HttpLimits
    max_connections: int
    on_refusal: Callable[[int], None] = lambda status: None


class CoalescingTransport(asyncio.Transport):
    """A connection's transport that sends a response's head together with its body (issue 16): uvicorn's h11
    protocol writes them with two ``write`` calls, two system calls and, on loopback, two wake-ups of the client
    per answer. A head is held until the next write, which sends both at once (the body after the head; an empty
    write, such as the end of a body, sends what is held); a head that nothing follows goes out at the end of
    the event-loop turn (the head of a streamed answer). Any other write with nothing held — a chunk of a streamed
    answer, such as a session's SSE message — goes out at once: held to the end of the turn, an SSE message waited
    for every callback queued before it (on the wake's path: the guest resumed by the wake's answer, its next host
    call, a store read). Nothing waits for a later turn when the response is
    complete, so an answer leaves no later than before. ``close`` and ``write_eof`` send what is held first,
    ``abort`` drops it."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport, self._loop = transport, loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is None:
            if data[:5] == b"HTTP/":  # a response's head: held for its body
                self._held = bytes(data)
                self._loop.call_soon(self.flush)
            elif data:  # issue 16 (event → wake p50): a streamed answer's chunk (an SSE message) goes out now
                self._transport.write(data)
            return
        self._held = None
        self._transport.write(held + bytes(data) if data else held)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()


class GuardedH11Protocol(H11Protocol):
    """``H11Protocol`` with the read deadlines and the connection limit of the module docstring."""

    guard: ClassVar[Guard]  # set by ``guarded_protocol``
    fast_path: ClassVar[bool] = True  # the fast path of fastpath.py (False: h11 reads every request)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase = ""  # "head" | "body" | "" (the app's time: no client deadline)
        self._due = 0.0  # the loop time the phase's deadline is due (for a phase, not "")
        self._refused = False
        self._fast: FastCycle | None = None  # the fast path's request (fastpath.py) until it is done
        self._fast_left = 0  # the bytes of its body still to come
        self._fast_pending = b""  # bytes after its body (a pipelined request), for when it is done
        self.fast_served = 0  # requests this connection served on the fast path

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = CoalescingTransport(transport, self.loop)  # (FlowControl keeps the socket's own)
        if len(self.connections) > self.guard.max_connections:
            self._refuse_busy()
            return
        self._watch()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # a refused connection's request is read and dropped while its 503 is delivered
        if self._fast is not None:
            self._unset_keepalive_if_required()
            self._fast_feed(data)
        elif not (self.fast_path and self._fast_start(data)):
            super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    # ------------------------------------------------------------------ the fast path (fastpath.py)

    def _fast_start(self, data: bytes) -> bool:
        """Serve the request at the start of ``data`` on the fast path when it may (fastpath.py); False leaves
        every byte to h11. Only on a connection h11 has idle on both sides with nothing buffered."""
        conn = self.conn
        if conn.their_state is not h11.IDLE or conn.our_state is not h11.IDLE or self.root_path:
            return False
        if (self.cycle is not None and not self.cycle.response_complete) or conn.trailing_data[0]:
            return False
        end = data.find(b"\r\n\r\n", 0, FAST_HEAD_MAX) + 4
        if end < 4:
            return False
        parsed = parse_head(data, end)
        if parsed is None:
            return False
        target, headers, length = parsed
        if length > FAST_BODY_MAX:
            return False
        raw_path, _, query_string = target.partition(b"?")
        scope: Any = {
            "type": "http",
            "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
            "http_version": "1.1",
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,
            "method": "POST",
            "root_path": "",
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query_string,
            "headers": headers,
            "state": self.app_state.copy(),
        }
        if not direct_post(scope):
            return False
        self._unset_keepalive_if_required()
        self.scope, self.headers = scope, headers
        if self.limit_concurrency is not None and (
                len(self.connections) >= self.limit_concurrency or len(self.tasks) >= self.limit_concurrency):
            app = service_unavailable
            self.logger.warning("Exceeded concurrency limit.")
        else:
            app = self.app
        cycle = self.cycle = self._fast = FastCycle(
            data[:end], scope=scope, conn=conn, transport=self.transport, flow=self.flow, logger=self.logger,
            access_logger=self.access_logger, access_log=self.access_log,
            default_headers=self.server_state.default_headers, message_event=asyncio.Event(),
            on_response=self._fast_response_complete)
        self.fast_served += 1
        self._fast_left = length
        self._fast_pending = b""
        if length == 0:
            cycle.more_body = False
            cycle.message_event.set()
        if len(data) > end:
            self._fast_feed(data[end:])
        if self.config.reset_contextvars:
            task = self.loop.create_task(cycle.run_asgi(app), context=contextvars.Context())
        else:
            task = self.loop.create_task(cycle.run_asgi(app))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)
        return True

    def _fast_feed(self, data: bytes) -> None:
        """Bytes for the fast path's request: its body (dropped once the answer is complete, as uvicorn drops a
        body h11 reads after the answer), then what follows it, held (and reading paused, as h11 pauses on a
        pipelined request) until the request is done."""
        cycle = self._fast
        assert cycle is not None
        left = self._fast_left
        if left:
            body = data[:left] if len(data) > left else data
            self._fast_left = left = left - len(body)
            if not cycle.response_complete:
                cycle.body += body
                if not left:
                    cycle.more_body = False
                cycle.message_event.set()
            data = data[len(body):]
        if data:
            self._fast_pending += data
            self.flow.pause_reading()
        if not left and cycle.response_complete:
            self._fast_done()

    def _fast_response_complete(self) -> None:
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)
        self.flow.resume_reading()
        if not self._fast_left:
            self._fast_done()
        self._watch()

    def _fast_done(self) -> None:
        """The fast path's request is read and answered: the bytes after it are the next request's."""
        self._fast, pending, self._fast_pending = None, self._fast_pending, b""
        if pending and not self.transport.is_closing():
            self.data_received(pending)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    # ------------------------------------------------------------------ deadlines

    def _watch(self) -> None:
        if self.transport.is_closing():
            self._disarm()
            return
        if self._fast is not None:
            phase = "body" if self._fast_left else ""
        else:
            state = self.conn.their_state
            phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else ""
        if phase == self._phase:
            return  # the same phase goes on: its deadline stands however many bytes trickle in
        self._phase = phase
        if not phase:
            return  # the app's time: an armed timer finds no phase when it fires
        seconds = self.guard.limits.header_timeout_s if phase == "head" else self.guard.limits.body_timeout_s
        self._due = self.loop.time() + seconds
        timer = self._deadline
        if timer is None or timer.when() > self._due:
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_at(self._due, self._fired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _fired(self) -> None:
        self._deadline = None
        if not self._phase or self.transport.is_closing():
            return  # (the next phase arms a timer again)
        if self.loop.time() < self._due:
            self._arm()  # armed for an earlier phase: what is left of this one
            return
        self._expired(self._phase)

    def _expired(self, phase: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if phase == "head":
            if self.conn.trailing_data[0]:  # part of a request came: say why it ends
                seconds = self.guard.limits.header_timeout_s
                self._write_answer(408, "request_timeout",
                                   f"the request headers did not arrive within {seconds} s")
            self.transport.close()
            return
        cycle = self.cycle
        if cycle is not None:  # the app sees a disconnect; its late answer goes nowhere
            cycle.disconnected = True
            cycle.message_event.set()
            if not cycle.response_started:
                self._write_answer(408, "request_timeout",
                                   f"the request body did not arrive within {self.guard.limits.body_timeout_s} s")
        self.transport.close()

    # ------------------------------------------------------------------ the connection limit

    def _refuse_busy(self) -> None:
        self._refused = True
        self._write_answer(503, "unavailable",
                           f"the node has too many open connections (limit {self.guard.max_connections}); retry shortly",
                           retry_after=1)
        self.guard.on_refusal(503)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._deadline = self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()

    def _write_answer(self, status: int, code: str, message: str, *, retry_after: int | None = None) -> None:
        self.transport.write(raw_answer(status, code, message, retry_after=retry_after))


_REASONS = {408: b"Request Timeout", 503: b"Service Unavailable"}


def raw_answer(status: int, code: str, message: str, *, retry_after: int | None = None) -> bytes:
    """A complete ``Connection: close`` HTTP/1.1 answer with the API's error body (interfaces.md §2.1) and an
    ``X-Request-Id``, written straight to the transport (no request cycle exists to carry it)."""
    body = json.dumps({"error": code, "message": message}).encode()
    lines = [b"HTTP/1.1 %d %s" % (status, _REASONS.get(status, b"Error")),
             b"content-type: application/json", b"content-length: %d" % len(body), b"connection: close",
             b"x-request-id: req_" + secrets.token_hex(8).encode(),
             b"date: " + time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()).encode()]
    if retry_after is not None:
        lines.append(b"retry-after: %d" % retry_after)
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def guarded_protocol(limits: HttpLimits, max_connections: int,
                     on_refusal: Callable[[int], None] | None = None) -> type[GuardedH11Protocol]:
    """The protocol class for ``uvicorn.Config(http=…)`` with these limits."""
    guard = Guard(limits, max_connections, on_refusal) if on_refusal is not None else Guard(limits, max_connections)
    return type("WakefulH11Protocol", (GuardedH11Protocol,), {"guard": guard})
