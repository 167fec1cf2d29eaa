"""Dispatch of incoming frames, step by step (runtime-protocol.md §4, §5, §16 item 1 and 4)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import stdio_guests as g

from wakeful.errors import Busy, InvalidParams
from wakeful.runtime.client import RpcError


def _err(frame: dict[str, Any]) -> tuple[Any, int, str]:
    return frame["id"], frame["error"]["code"], frame["error"]["data"]["kind"]


# §4 steps 1-5, 7: each early error with its exact code, kind and id null; the session keeps working
EARLY = [
    (b"{not json", -32700, "PARSE_ERROR"),
    (b"", -32700, "PARSE_ERROR"),
    (b'{"jsonrpc":"2.0","id":"a","method":"sf.stats","params":{"x":NaN}}', -32700, "PARSE_ERROR"),
    (b'{"jsonrpc":"2.0","id":"a","method":"\\ud800"}', -32700, "PARSE_ERROR"),
    (b'{"jsonrpc":"2.0","id":"a","method":"sf.stats\xff"}', -32700, "PARSE_ERROR"),
    (b"[1,2]", -32600, "INVALID_REQUEST"),
    (b'{"jsonrpc":"1.0","id":"a","method":"sf.stats"}', -32600, "INVALID_REQUEST"),
    (b'{"id":"a","method":"sf.stats"}', -32600, "INVALID_REQUEST"),
    (b'{"jsonrpc":"2.0","id":"a"}', -32600, "INVALID_REQUEST"),
    (b'{"jsonrpc":"2.0","id":"a","method":7}', -32600, "INVALID_REQUEST"),
    (b'{"jsonrpc":"2.0","id":7,"method":"sf.stats"}', -32600, "INVALID_REQUEST"),
    (b'{"jsonrpc":"2.0","id":null,"method":"sf.stats"}', -32600, "INVALID_REQUEST"),
    (('{"jsonrpc":"2.0","id":"' + "i" * 129 + '","method":"sf.stats"}').encode(), -32600, "INVALID_REQUEST"),
]


def test_early_errors_have_id_null() -> None:
    async def body() -> None:
        async with g.session() as c:
            for line, code, kind in EARLY:
                frame = await g.raw(c, line)
                assert _err(frame) == (None, code, kind), line
                assert (await c.stats())["objects"] == 0  # the session keeps working

    g.run(body)


def test_deep_nesting_is_a_parse_error_and_session_survives() -> None:
    # §16 item 2 / §4.1: 262,143 '[' (a full frame) answers -32700, never a traceback
    async def body() -> None:
        async with g.session() as c:
            frame = await g.raw(c, b"[" * 262_143)
            assert _err(frame) == (None, -32700, "PARSE_ERROR")
            assert (await c.stats())["execution_threads"] == 1

    g.run(body)


def test_id_of_exactly_128_bytes_is_accepted() -> None:
    async def body() -> None:
        async with g.session() as c:
            rid = "é" * 64  # 128 bytes in UTF-8
            frame = await g.raw(c, json.dumps({"jsonrpc": "2.0", "id": rid, "method": "sf.stats"}))
            assert frame["id"] == rid and frame["result"]["objects"] == 0

    g.run(body)


def test_notifications_are_ignored_and_absent_params_are_empty() -> None:
    async def body() -> None:
        async with g.session() as c:
            await c.write_raw(b'{"jsonrpc":"2.0","method":"sf.shutdown"}\n')  # step 7: ignored
            frame = await g.raw(c, '{"jsonrpc":"2.0","id":"s","method":"sf.stats"}')  # step 6: {}
            assert frame["id"] == "s" and "result" in frame
            assert c.proc.returncode is None

    g.run(body)


def test_not_initialized_comes_before_method_not_found() -> None:
    async def body() -> None:
        async with g.session(init=False) as c:
            for method in ("no.such.method", "sf.stats", "wakeful.stats", "sf.build.submit"):
                with pytest.raises(RpcError) as info:
                    await c.request(method, {"bogus": 1})
                assert (info.value.rpc_code, info.value.kind) == (-32000, "NOT_INITIALIZED")
            await c.initialize()
            with pytest.raises(RpcError) as info:
                await c.request("no.such.method", {})
            assert (info.value.rpc_code, info.value.kind) == (-32601, "METHOD_NOT_FOUND")

    g.run(body)


def test_retired_build_methods_are_not_found() -> None:
    async def body() -> None:
        async with g.session() as c:
            for method in ("sf.build.submit", "sf.build.status", "sf.build.cancel", "sf.artifact.get"):
                with pytest.raises(RpcError) as info:
                    await c.request(method, {})
                assert info.value.rpc_code == -32601

    g.run(body)


STRICT = [
    ("sf.stats", {"x": 1}),
    ("sf.shutdown", {"now": True}),
    ("sf.stats", []),
    ("sf.stats", None),
    ("sf.object.get", {}),
    ("sf.object.get", {"object_id": 1}),
    ("sf.object.get", {"object_id": "o1", "extra": 1}),
    ("sf.object.list", {"limit": "5"}),
    ("sf.object.list", {"limit": True}),
    ("sf.object.load", {"elf": "AAAA", "artifact_id": "a1"}),
    ("sf.event.deliver", {"object_id": "o1", "event_id": "e", "topic": "t"}),
    ("wakeful.object.inspect", {"object_id": "o1", "x": 0}),
    ("wakeful.elf.verify", {}),
    ("sf.build.compile", {"sdk_version": 1, "entry": "a.c", "files": {}, "artifact": 1}),
    # issue 21: the strictness rules of protocol v1 rechecked (spinfoam's typed decoding)
    ("sf.object.load", {"elf": "AAAA", "capabilities": None}),
    ("sf.object.load", {"elf": "AAAA", "capabilities": {"name": "a"}}),
    ("sf.object.load", {"elf": None}),
    ("sf.object.load", {"elf": "AAAA", "wakeful": None}),
    ("sf.initialize", {"protocol_version": True}),
    ("sf.initialize", {"protocol_version": 1.0}),
    ("sf.initialize", {"protocol_version": "1"}),
    ("sf.initialize", {}),
    ("sf.object.list", {"limit": 0}),
    ("sf.object.list", {"limit": 257}),
    ("sf.object.list", {"limit": None}),
    ("sf.object.list", {"after": 5}),
    ("sf.object.start", {"object_id": None}),
    ("sf.event.deliver", {"object_id": "o1", "event_id": 1, "topic": "t", "payload": 1}),
    ("sf.event.deliver", {"object_id": "o1", "event_id": "e", "topic": None, "payload": 1}),
    ("sf.build.compile", {"sdk_version": 1, "entry": "a.c"}),
    ("sf.build.compile", {"sdk_version": True, "entry": "a.c", "files": {"a.c": ""}}),
]


def test_params_are_decoded_strictly() -> None:
    # §4 step 12: wrong types, missing fields, params not an object, unknown fields → -32602
    async def body() -> None:
        async with g.session() as c:
            for method, params in STRICT:
                msg = {"jsonrpc": "2.0", "id": "p", "method": method, "params": params}
                frame = await g.raw(c, json.dumps(msg))
                assert _err(frame) == ("p", -32602, "INVALID_PARAMS"), msg

    g.run(body)


def test_second_initialize_is_busy_and_bad_version_is_invalid() -> None:
    async def body() -> None:
        async with g.session(init=False) as c:
            with pytest.raises(InvalidParams):
                await c.request("sf.initialize", {"protocol_version": 2})
            with pytest.raises(InvalidParams):
                await c.request("sf.initialize", {"protocol_version": 1, "wakeful": {"detail": 1}})
            info = await c.initialize()
            assert len(info["session_id"]) == 32 and int(info["session_id"], 16) >= 0
            with pytest.raises(Busy) as exc:
                await c.request("sf.initialize", {"protocol_version": 1})
            assert exc.value.message == "already initialized"
            assert (exc.value.rpc_code, exc.value.kind) == (-32001, "BUSY")  # type: ignore[attr-defined]

    g.run(body)


def test_duplicate_outstanding_id_and_busy_slots_but_compile_is_exempt() -> None:
    # §4 steps 8-9: one atomic write (< PIPE_BUF) of 60 requests: 48 take slots, the rest are BUSY,
    # a duplicate of an outstanding id is DUPLICATE_ID, and sf.build.compile needs no slot
    async def body() -> None:
        async with g.session() as c:
            lines: list[dict[str, Any]] = [{"jsonrpc": "2.0", "id": f"r{i}", "method": "sf.stats"} for i in range(56)]
            lines.insert(10, {"jsonrpc": "2.0", "id": "r3", "method": "sf.stats"})
            lines.append({"jsonrpc": "2.0", "id": "b1", "method": "sf.build.compile",
                          "params": {"sdk_version": 1, "entry": "main.c", "files": {"main.c": "int x;"}}})
            data = b"".join(json.dumps(x, separators=(",", ":")).encode() + b"\n" for x in lines)
            assert len(data) < 4096
            await c.write_raw(data)
            frames = [await asyncio.wait_for(c.unmatched.get(), 10) for _ in range(len(lines))]
            by_kind: dict[str, list[Any]] = {}
            for f in frames:
                kind = f["error"]["data"]["kind"] if "error" in f else "ok"
                by_kind.setdefault(kind, []).append(f["id"])
            assert by_kind["DUPLICATE_ID"] == ["r3"]
            assert len(by_kind["ok"]) == 48
            assert sorted(by_kind["BUSY"]) == sorted(f"r{i}" for i in range(48, 56))
            assert by_kind["SANDBOX_UNAVAILABLE"] == ["b1"]  # builds are off: not BUSY
            busy = next(f for f in frames if f["id"] == "r50")
            assert busy["error"] == {"code": -32001, "message": "too many requests", "data": {"kind": "BUSY"}}
            assert (await c.stats())["objects"] == 0

    g.run(body)


def test_replies_with_unknown_ids_are_counted_not_answered() -> None:
    # §4 step 3 / §9.4: replies are routed by id; unknown or non-string ids are discarded and counted
    async def body() -> None:
        async with g.session() as c:
            await c.write_raw(b'{"jsonrpc":"2.0","id":"sf:nope:1","result":{}}\n')
            await c.write_raw(b'{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"x"}}\n')
            await c.write_raw(b'{"jsonrpc":"2.0","id":"x","result":1,"error":{}}\n')
            stats = await c.stats()
            assert stats["host"]["ignored_host_responses"] == 3
            assert c.unmatched.empty()

    g.run(body)


def test_a_pipelined_burst_larger_than_the_control_queue_is_answered() -> None:
    # 150 requests in one write: 48 take slots, the BUSY answers overflow the 64-frame control queue, and the
    # runtime makes room by writing to the pipe (which the client reads) instead of closing the session
    async def body() -> None:
        async with g.session() as c:
            data = b"".join(b'{"jsonrpc":"2.0","id":"p%d","method":"sf.stats"}\n' % i for i in range(150))
            await c.write_raw(data)
            frames = [await asyncio.wait_for(c.unmatched.get(), 10) for _ in range(150)]
            assert sorted(f["id"] for f in frames) == sorted(f"p{i}" for i in range(150))
            kinds = {f["error"]["data"]["kind"] if "error" in f else "ok" for f in frames}
            assert kinds <= {"ok", "BUSY"} and "BUSY" in kinds
            assert (await c.stats())["objects"] == 0

    g.run(body)
