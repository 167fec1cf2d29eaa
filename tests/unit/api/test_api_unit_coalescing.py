"""``CoalescingTransport`` (issue 16): a response's head reaches the socket in one ``write`` with its body, at the
moment the body is written; a head that nothing follows goes out at the end of the turn, a streamed answer's chunk
at once; ``close``/``write_eof``
send what is held first, ``abort`` drops it. The socket side here records the
calls it gets (the transport's contract is the sequence of calls); the server itself is exercised over real
loopback by tests/integration/api (test_api_slow_clients, test_api_intake)."""

from __future__ import annotations

import asyncio
from typing import Any

from wakeful.api.connections import CoalescingTransport


class _Socket(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any]] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.calls.append(("write", bytes(data)))

    def close(self) -> None:
        self.calls.append(("close", None))
        self.closing = True

    def write_eof(self) -> None:
        self.calls.append(("write_eof", None))

    def abort(self) -> None:
        self.calls.append(("abort", None))

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0


def test_a_head_goes_out_with_its_body_and_a_lone_write_at_the_end_of_the_turn() -> None:
    async def main() -> None:
        sock = _Socket()
        t = CoalescingTransport(sock, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 202 Accepted\r\n\r\n")
        assert sock.calls == [] and t.get_write_buffer_size() == 25  # the head waits for its body
        t.write(bytearray(b'{"status":"accepted"}'))  # ... which sends both at once, in this turn
        assert sock.calls == [("write", b'HTTP/1.1 202 Accepted\r\n\r\n{"status":"accepted"}')]
        t.write(b"")  # the end of the body: nothing held, nothing sent
        t.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        t.write(b"")  # an empty body sends the held head at once
        assert sock.calls[1:] == [("write", b"HTTP/1.1 204 No Content\r\n\r\n")]
        t.write(b"HTTP/1.1 200 OK\r\n\r\n")  # a streamed answer's head: out at the end of the turn
        await asyncio.sleep(0)
        assert sock.calls[2:] == [("write", b"HTTP/1.1 200 OK\r\n\r\n")]
        await asyncio.sleep(0)
        assert len(sock.calls) == 3

    asyncio.run(main())


def test_close_and_eof_send_the_rest_first_and_abort_drops_it() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        sock = _Socket()
        t = CoalescingTransport(sock, loop)
        t.write(b"HTTP/1.1 200 OK\r\n\r\n")  # (a head: held)
        t.write_eof()
        t.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        t.close()
        assert sock.calls == [("write", b"HTTP/1.1 200 OK\r\n\r\n"), ("write_eof", None),
                              ("write", b"HTTP/1.1 204 No Content\r\n\r\n"), ("close", None)]
        assert t.is_closing()
        await asyncio.sleep(0)  # the flush scheduled for the turn finds nothing left
        assert len(sock.calls) == 4
        dropped = _Socket()
        u = CoalescingTransport(dropped, loop)
        u.write(b"HTTP/1.1 200 OK\r\n\r\nnever")
        u.abort()
        await asyncio.sleep(0)
        assert dropped.calls == [("abort", None)]

    asyncio.run(main())


def test_a_streamed_answers_chunk_goes_out_at_once() -> None:
    """issue 16 (event → wake p50): once a streamed answer's head is out, each chunk (an SSE message) is written in
    the call that writes it — no wait for the end of the event-loop turn, behind every callback queued before it."""
    async def main() -> None:
        sock = _Socket()
        t = CoalescingTransport(sock, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await asyncio.sleep(0)  # the head alone: out at the end of the turn, as before
        assert len(sock.calls) == 1
        chunk = b"2b\r\nid: 1\nevent: message\ndata: {}\n\n\r\n"
        t.write(chunk)
        assert sock.calls[1:] == [("write", chunk)]  # now, in this turn
        t.write(bytearray(b"0\r\n\r\n"))  # the end of the chunked body
        assert sock.calls[2:] == [("write", b"0\r\n\r\n")]
        t.write(b"HTTP/1.1 202 Accepted\r\n\r\n")  # the next answer's head waits for its body again
        assert len(sock.calls) == 3
        t.write(b"{}")
        assert sock.calls[3:] == [("write", b"HTTP/1.1 202 Accepted\r\n\r\n{}")]

    asyncio.run(main())
