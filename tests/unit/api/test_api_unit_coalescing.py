"""``CoalescingTransport`` (issue 16): what the h11 protocol writes in one event-loop turn (a response's head and
body) reaches the socket in one ``write`` at the end of the turn, in order; ``close``/``write_eof`` send the rest
first, ``abort`` drops it, and a streamed answer is not held past its turn. The socket side here records the
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


def test_writes_of_one_turn_go_out_as_one_write_after_it() -> None:
    async def main() -> list[tuple[str, Any]]:
        sock = _Socket()
        t = CoalescingTransport(sock, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 202 Accepted\r\n\r\n")
        t.write(b"")
        t.write(bytearray(b'{"status":"accepted"}'))
        assert sock.calls == [] and t.get_write_buffer_size() == 46  # nothing sent during the turn
        await asyncio.sleep(0)
        first = list(sock.calls)
        t.write(b"data: 1\n\n")  # a streamed answer: the next turn's bytes go out on their own
        await asyncio.sleep(0)
        assert sock.calls[len(first):] == [("write", b"data: 1\n\n")]
        return first

    assert asyncio.run(main()) == [("write", b'HTTP/1.1 202 Accepted\r\n\r\n{"status":"accepted"}')]


def test_close_and_eof_send_the_rest_first_and_abort_drops_it() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        sock = _Socket()
        t = CoalescingTransport(sock, loop)
        t.write(b"a")
        t.write_eof()
        t.write(b"b")
        t.close()
        assert sock.calls == [("write", b"a"), ("write_eof", None), ("write", b"b"), ("close", None)]
        assert t.is_closing()
        await asyncio.sleep(0)  # the flush scheduled for the turn finds nothing left
        assert len(sock.calls) == 4
        dropped = _Socket()
        u = CoalescingTransport(dropped, loop)
        u.write(b"never")
        u.abort()
        await asyncio.sleep(0)
        assert dropped.calls == [("abort", None)]

    asyncio.run(main())
