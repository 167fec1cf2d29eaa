"""The HTTP fast path of the node's protocol (issue 16): the plain keep-alive POST of an event or of a Loop's
create, read and answered without h11's state machine — h11's parse and its answer were ~130 µs of the ~500 µs
of node CPU an ingested event cost.

**What it takes, and why it accepts nothing h11 refuses.** ``parse_head`` takes a complete request head only
when it matches a grammar stricter than h11's (``h11/_abnf.py``): the line ``POST <origin-form target> HTTP/1.1``;
header lines ``token ":" OWS value OWS`` with values of visible ASCII, spaces and tabs (h11 also allows obs-text
and control bytes); CRLF line ends only (h11 also takes bare LF), no obs-fold; exactly one ``Host`` (h11's rule
for HTTP/1.1); exactly one ``Content-Length`` of digits; no ``Transfer-Encoding``, ``Expect`` or ``Upgrade``;
``Connection`` absent or ``keep-alive``. It returns what h11 would have parsed (the method, the target, the
headers with lowercased names and values without OWS, the length). Any other head — and any head not complete in
the bytes at hand — is h11's, exactly as before: the protocol (``connections.py``) hands every byte to h11.

**The answer** (``FastCycle``): uvicorn's ``RequestResponseCycle`` with its own ``send``. A plain answer (status
200–599 but 204 and 304, one ``Content-Length`` of digits, no ``Transfer-Encoding``, ``Connection`` or ``Host``,
each header valid by h11's own regular expressions) is written as h11 writes it: ``HTTP/1.1 <status>
<reason>``, the headers in order, the body, and h11's errors when the body is longer or shorter than its
``Content-Length``. Any other answer (a chunked one, a ``Connection: close``, a header h11 would refuse) is
written by a fresh ``h11.Connection`` fed this request's head, so it gets h11's bytes and h11's errors.
"""

from __future__ import annotations

import re
from typing import Any

import h11
from h11._headers import CONTENT_LENGTH_MAX_DIGITS, _field_name_re, _field_value_re
from uvicorn.protocols.http.flow_control import CLOSE_HEADER
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, RequestResponseCycle
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

__all__ = ["FAST_BODY_MAX", "FAST_HEAD_MAX", "FastCycle", "parse_head", "plain_head"]

FAST_HEAD_MAX = 8192  # a longer head is h11's (its own limit is 16 KiB)
FAST_BODY_MAX = 65_536  # a longer body is h11's (uvicorn's HIGH_WATER_LIMIT: no read pause needed here)

_TOKEN = rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+"
_REQUEST_LINE = re.compile(rb"POST (/[\x21-\x7e]*) HTTP/1\.1\r\n")
# one header line, CRLF-ended: name, value (visible ASCII, inner spaces and tabs), optional whitespace around it
_FIELD = re.compile(rb"(" + _TOKEN + rb"):[ \t]*((?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?)[ \t]*\r\n")
_FIELDS = re.compile(rb"(?:" + _TOKEN + rb":[ \t]*(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?[ \t]*\r\n)*")
_DIGITS = re.compile(rb"[0-9]+")
_REFUSED = frozenset((b"transfer-encoding", b"expect", b"upgrade"))


def parse_head(data: bytes, end: int) -> tuple[bytes, list[tuple[bytes, bytes]], int] | None:
    """``data[:end]`` is a head ending in CRLFCRLF: (target, headers, content length) when the head is one the fast
    path takes (module docstring), else None."""
    line = _REQUEST_LINE.match(data, 0, end)
    if line is None:
        return None
    start, stop = line.end(), end - 2  # the header lines, each with its CRLF
    if _FIELDS.fullmatch(data, start, stop) is None:
        return None
    headers = [(name.lower(), value) for name, value in _FIELD.findall(data, start, stop)]
    hosts = 0
    length = -1
    for name, value in headers:
        if name == b"host":
            hosts += 1
        elif name == b"content-length":
            if length >= 0 or len(value) > CONTENT_LENGTH_MAX_DIGITS or not _DIGITS.fullmatch(value):
                return None
            length = int(value)
        elif name in _REFUSED or (name == b"connection" and value.lower() != b"keep-alive"):
            return None
    if hosts != 1 or length < 0:
        return None
    return line[1], headers, length


def plain_head(status: Any, reason: bytes, headers: list[tuple[Any, Any]]) -> tuple[bytes, int] | None:
    """The bytes h11 writes for this response's head and its content length, for a plain answer (module
    docstring); None for any other."""
    if type(status) is not int or status < 200 or status in (204, 304):
        return None
    parts = [b"HTTP/1.1 %d %s\r\n" % (status, reason)]
    length = -1
    for name, value in headers:
        if type(name) is not bytes or type(value) is not bytes:
            return None
        if _field_name_re.fullmatch(name) is None or _field_value_re.fullmatch(value) is None:
            return None
        lower = name.lower()
        if lower == b"content-length":
            if length >= 0 or len(value) > CONTENT_LENGTH_MAX_DIGITS or not _DIGITS.fullmatch(value):
                return None
            length = int(value)
        elif lower in (b"transfer-encoding", b"connection", b"host"):
            return None
        parts.append(b"%s: %s\r\n" % (name, value))
    if length < 0:
        return None
    parts.append(b"\r\n")
    return b"".join(parts), length


class FastCycle(RequestResponseCycle):
    """A fast-path request's cycle: uvicorn's, with ``send`` writing the answer itself (module docstring). The
    protocol's h11 connection stays idle throughout; ``head`` is the request's head, for the h11 that writes an
    answer that is not plain."""

    def __init__(self, head: bytes, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.head = head
        self.writer: h11.Connection | None = None  # the h11 writing an answer that is not plain
        self.left = 0  # the body bytes the plain answer still owes

    async def send(self, message: Any) -> None:
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        if not self.response_started:
            if message["type"] != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{message['type']}'.")
            self.response_started = True
            self.waiting_for_100_continue = False
            status = message["status"]
            headers = self.default_headers + list(message.get("headers", []))
            if CLOSE_HEADER in self.scope["headers"] and CLOSE_HEADER not in headers:
                headers = headers + [CLOSE_HEADER]
            if self.access_log:
                self.access_logger.info('%s - "%s %s HTTP/%s" %d', get_client_addr(self.scope),  # type: ignore[arg-type]
                                        self.scope["method"], get_path_with_query_string(self.scope),  # type: ignore[arg-type]
                                        self.scope["http_version"], status)
            reason = STATUS_PHRASES[status]
            plain = plain_head(status, reason, headers)
            if plain is None:
                fresh = self.writer = h11.Connection(h11.SERVER)
                fresh.receive_data(self.head)
                fresh.next_event()
                self.transport.write(fresh.send(h11.Response(status_code=status, headers=headers, reason=reason)))
            else:
                self.left = plain[1]
                self.transport.write(plain[0])
        elif not self.response_complete:
            if message["type"] != "http.response.body":
                raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{message['type']}'.")
            body = message.get("body", b"")
            more_body = message.get("more_body", False)
            writer = self.writer
            if writer is not None:
                self.transport.write(writer.send(h11.Data(data=body)))
            else:
                if len(body) > self.left:
                    raise h11.LocalProtocolError("Too much data for declared Content-Length")
                self.left -= len(body)
                self.transport.write(body)
            if not more_body:
                self.response_complete = True
                self.message_event.set()
                if writer is not None:
                    self.transport.write(writer.send(h11.EndOfMessage()))
                elif self.left:
                    raise h11.LocalProtocolError("Too little data for declared Content-Length")
        else:
            raise RuntimeError(f"Unexpected ASGI message '{message['type']}' sent, after response already completed.")
        if self.response_complete:
            if not self.keep_alive or (self.writer is not None and self.writer.our_state is h11.MUST_CLOSE):
                self.transport.close()
            self.on_response()
