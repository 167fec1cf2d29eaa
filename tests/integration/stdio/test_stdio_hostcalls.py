"""Host calls over stdio: request params, capability matching, result bounds, error replies, timeouts with
host.cancel, and every ignored-reply case (runtime-protocol.md §9; §16 items 8 and 9)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import stdio_guests as g

from wakeful.errors import HostCallError
from wakeful.runtime import HostCall

SF_LIMIT, SF_TIMEOUT, SF_DENIED, SF_HOST_ERROR = -2, -3, -4, -5


@pytest.fixture(scope="module")
def caller(compile_c: Any) -> bytes:
    return bytes(compile_c(g.HOST_CALLER))


def _recorder(calls: list[HostCall]) -> Any:
    def record(call: HostCall) -> Any:
        calls.append(call)
        return {"v": 0}

    return record


async def _exit_code(c: Any, oid: str) -> int:
    st = await g.wait_state(c, oid, "exited", "failed")
    assert st.outcome is not None and "exit_code" in st.outcome, st.outcome
    return int(st.outcome["exit_code"])


async def _run(c: Any, elf: bytes, *, caps: Any, params: Any, cap: str = "cap", timeout_ms: int = 10_000,
               label: str | None = None) -> int:
    st = await c.load(elf, capabilities=caps, config={"cap": cap, "params": params, "timeout_ms": timeout_ms},
                      label=label)
    await c.start(st.object_id)
    return await _exit_code(c, st.object_id)


def test_request_params_are_exact(caller: bytes) -> None:
    async def body() -> None:
        async with g.session(init=False) as c:
            info = await c.initialize(detail=True)
            calls: list[HostCall] = []

            @c.on_host_call
            def answer(call: HostCall) -> Any:
                calls.append(call)
                return {"v": 41}

            before = int(time.time() * 1000)
            assert await _run(c, caller, caps=[{"name": "cap"}], params={"a": [1, "x"]}, timeout_ms=1234,
                              label="lbl") == 42
            (call,) = calls
            assert call.id == f"sf:{info['session_id']}:1"
            assert (call.object_id, call.capability, call.arguments) == ("o1", "cap", {"a": [1, "x"]})
            assert call.timeout_ms == 1234 and call.max_result_bytes == 16384 and call.label == "lbl"
            assert before + 1234 <= call.deadline_unix_ms <= int(time.time() * 1000) + 1234
            # the timeout is clamped to 24 h
            assert await _run(c, caller, caps=[{"name": "cap"}], params={}, timeout_ms=10**12) == 42
            assert calls[1].timeout_ms == 86_400_000 and calls[1].id.endswith(":2")

    g.run(body)


def test_label_only_with_detail(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            calls: list[HostCall] = []
            c.on_host_call(_recorder(calls))
            assert await _run(c, caller, caps=[{"name": "cap"}], params={}, label="secret") == 1
            assert calls[0].label is None

    g.run(body)


def test_capability_matching_is_exact(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            calls: list[HostCall] = []
            c.on_host_call(_recorder(calls))
            constrained = [{"name": "cap", "arguments": {"k": 1, "s": "x"}}]
            cases = [
                (constrained, {"k": 1, "s": "x", "extra": [1]}, "cap", 1),
                (constrained, {"k": True, "s": "x"}, "cap", SF_DENIED),  # type-strict: true ≠ 1
                (constrained, {"k": 1.5, "s": "x"}, "cap", SF_DENIED),
                (constrained, {"k": 1, "s": "X"}, "cap", SF_DENIED),
                (constrained, {"k": 1}, "cap", SF_DENIED),
                (constrained, [1], "cap", SF_DENIED),
                (constrained, {"k": 1, "s": "x"}, "Cap", SF_DENIED),  # byte equality of names
                ([{"name": "cap", "arguments": {"k": 2}}, {"name": "cap", "arguments": {"k": 1}}], {"k": 1}, "cap", 1),
                ([{"name": "cap", "arguments": {}}], "anything", "cap", 1),
                ([], {}, "cap", SF_DENIED),
            ]
            for caps, params, cap, expected in cases:
                sent = len(calls)
                assert await _run(c, caller, caps=caps, params=params, cap=cap) == expected, (caps, params, cap)
                assert len(calls) == sent + (expected == 1)  # nothing is sent when denied

    g.run(body)


def test_result_bounds_and_error_replies(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            answers: list[Any] = []

            @c.on_host_call
            async def answer(call: HostCall) -> Any:
                value = answers.pop(0)
                if isinstance(value, Exception):
                    raise value
                return value

            def padded(total: int) -> Any:
                doc = {"v": 5, "p": ""}
                doc["p"] = "x" * (total - len(json.dumps(doc, separators=(",", ":"))))
                assert len(json.dumps(doc, separators=(",", ":"))) == total
                return doc

            cases = [
                (padded(16_384), 6),
                (padded(16_385), SF_LIMIT),  # one byte over
                ({"v": 1, "n": [0] * 4093}, 2),  # 4,096 nodes: root, v, n and 4,093 items
                ({"v": 1, "n": [0] * 4094}, SF_LIMIT),  # 4,097 nodes
                (HostCallError("NOPE", "refused"), SF_HOST_ERROR),
                ({"no_v": 1}, SF_INVALID_OR_NEG),
            ]
            for value, expected in cases:
                answers.append(value)
                got = await _run(c, caller, caps=[{"name": "cap"}], params={})
                if expected == SF_INVALID_OR_NEG:
                    assert got < 0
                else:
                    assert got == expected, value if not isinstance(value, dict) else list(value)

    g.run(body)


SF_INVALID_OR_NEG = -99


def test_depth_limit(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            answers: list[Any] = []
            c.on_host_call(lambda call: answers.pop(0))
            for depth, expected in ((32, 2), (33, SF_LIMIT)):
                value: Any = {"v": 1}
                for _ in range(depth - 1):
                    value = {"v": 1, "d": value}
                answers.append(value)
                assert await _run(c, caller, caps=[{"name": "cap"}], params={}) == expected, depth

    g.run(body)


def test_raw_replies_error_both_late_duplicate_unknown(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            ids: asyncio.Queue[str] = asyncio.Queue()
            never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

            @c.on_host_call
            async def hold(call: HostCall) -> Any:
                ids.put_nowait(call.id)
                return await never  # the test answers by hand

            async def call_once(reply: dict[str, Any]) -> int:
                st = await c.load(caller, capabilities=[{"name": "cap"}], config={"params": {}})
                await c.start(st.object_id)
                call_id = await asyncio.wait_for(ids.get(), 5)
                frame = {"jsonrpc": "2.0", "id": call_id, **reply}
                await c.write_raw(json.dumps(frame).encode() + b"\n")
                code = await _exit_code(c, st.object_id)
                await c.write_raw(json.dumps(frame).encode() + b"\n")  # a duplicate: ignored, counted
                return code

            assert await call_once({"result": {"v": 9}}) == 10
            assert await call_once({"error": {"code": 1, "message": "no", "data": {"kind": "X"}}}) == SF_HOST_ERROR
            assert await call_once({"error": None}) == SF_HOST_ERROR  # any content
            assert await call_once({"result": {"v": 1}, "error": {}}) == SF_HOST_ERROR  # both
            await c.write_raw(b'{"jsonrpc":"2.0","id":"sf:00000000000000000000000000000000:1","result":1}\n')
            await c.write_raw(b'{"jsonrpc":"2.0","id":"nothing","error":{}}\n')
            stats = await c.stats()
            assert stats["host"]["ignored_host_responses"] == 6
            assert stats["host"]["pending_host_calls"] == 0
            assert c.unmatched.empty()  # replies are never answered

    g.run(body)


def test_timeout_sends_host_cancel_and_late_reply_is_ignored(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            seen: list[str] = []
            release = asyncio.Event()

            @c.on_host_call
            async def slow(call: HostCall) -> Any:
                seen.append(call.id)
                await release.wait()
                return {"v": 1}

            st = await c.load(caller, capabilities=[{"name": "cap"}], config={"params": {}, "timeout_ms": 300})
            await c.start(st.object_id)
            assert await _exit_code(c, st.object_id) == SF_TIMEOUT

            async def cancelled() -> bool:
                return seen[0] in c.cancels

            await g.until(cancelled)
            assert (await c.stats())["host"]["pending_host_calls"] == 0
            late = {"jsonrpc": "2.0", "id": seen[0], "result": {"v": 1}}
            await c.write_raw(json.dumps(late).encode() + b"\n")
            assert (await c.stats())["host"]["ignored_host_responses"] == 1

    g.run(body)


def test_unload_with_a_pending_call_sends_host_cancel(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            seen: list[str] = []

            @c.on_host_call
            async def hold(call: HostCall) -> Any:
                seen.append(call.id)
                await asyncio.sleep(3600)

            cancels_at_state: list[int] = []
            c.on_state(lambda status: cancels_at_state.append(len(c.cancels)))
            st = await c.load(caller, capabilities=[{"name": "cap"}], config={"params": {}, "timeout_ms": 600_000})
            await c.start(st.object_id)

            async def pending() -> bool:
                return bool((await c.stats())["host"]["pending_host_calls"] == 1)

            await g.until(pending)
            await c.unload(st.object_id)

            async def cancelled() -> bool:
                return bool(seen) and seen[0] in c.cancels

            await g.until(cancelled)
            assert (await c.stats())["host"]["pending_host_calls"] == 0

            async def noted() -> bool:
                return bool(cancels_at_state)

            await g.until(noted)
            assert cancels_at_state == [1]  # §7.1: host.cancel is queued before sf.object.state

    g.run(body)


def test_no_handler_means_error_reply(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            assert await _run(c, caller, caps=[{"name": "cap"}], params={}) == SF_HOST_ERROR

    g.run(body)


def test_a_handler_returning_a_non_json_value_gets_an_error_reply(caller: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            c.on_host_call(lambda call: {"v": {1, 2}})
            assert await _run(c, caller, caps=[{"name": "cap"}], params={}) == SF_HOST_ERROR
            assert (await c.stats())["host"]["pending_host_calls"] == 0

    g.run(body)


def test_shutdown_cancels_pending_calls(caller: bytes) -> None:
    async def body() -> None:
        c = await g.spawn()
        await c.initialize()
        seen: list[str] = []

        @c.on_host_call
        async def hold(call: HostCall) -> Any:
            seen.append(call.id)
            await asyncio.sleep(3600)

        st = await c.load(caller, capabilities=[{"name": "cap"}], config={"params": {}, "timeout_ms": 600_000})
        await c.start(st.object_id)

        async def sent() -> bool:
            return bool(seen)

        await g.until(sent)
        assert await c.shutdown() == 0
        assert c.cancels == seen  # §12 stops every object; §7.1 offers host.cancel for its call

    g.run(body)
