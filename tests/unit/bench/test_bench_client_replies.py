"""The bench client answers every host.call {accepted: true} (benchmarks.md §1.3 step 1): the host calls of one
read go out in one write, wakeful's frame layout takes the id fast path, any other layout is parsed in full."""

from __future__ import annotations

import threading
from typing import Any

from wakeful.bench.stdio_client import BenchClient, Reply


def _client() -> tuple[Any, list[bytes]]:
    writes: list[bytes] = []
    client: Any = object.__new__(BenchClient)  # no child process: only the reader's dispatch is exercised
    client._write = writes.append
    client._acks, client._acks_changed = 0, threading.Condition()
    client._pending, client._slots = {}, threading.BoundedSemaphore(24)
    return client, writes


def test_host_calls_of_one_read_are_answered_in_one_write_whatever_the_layout() -> None:
    client, writes = _client()
    client._slots.acquire()
    reply = Reply()
    client._pending["b1"] = ("sf.stats", reply)
    lines = [
        b'{"jsonrpc":"2.0","id":"sf:s1:1","method":"host.call","params":{"object_id":"o1","arguments":{"a":1}}}',
        b'{"id":"sf:s1:2","jsonrpc":"2.0","method":"host.call","params":{}}',  # another key order
        b'{"jsonrpc":"2.0","id":"sf:\\u00e9\\"3","method":"host.call","params":{}}',  # escapes in the id
        b'{"jsonrpc":"2.0","id":"b1","result":{"objects":0}}',
        b'{"jsonrpc":"2.0","method":"sf.log","params":{"object_id":"o1","message":"hi"}}',
    ]
    client._dispatch_chunk(lines)
    assert writes == [
        b'{"jsonrpc":"2.0","id":"sf:s1:1","result":{"accepted":true}}\n'
        b'{"jsonrpc":"2.0","id":"sf:s1:2","result":{"accepted":true}}\n'
        b'{"jsonrpc":"2.0","id":"sf:\xc3\xa9\\"3","result":{"accepted":true}}\n'
    ]
    assert client._acks == 3 and reply.result(1) == {"objects": 0} and client._pending == {}
