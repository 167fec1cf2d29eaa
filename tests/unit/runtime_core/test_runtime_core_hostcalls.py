"""Host calls through the in-process API (runtime-protocol.md §9, §14): sync and coroutine handlers,
timeout, error and stop while pending."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import rtcore_guests as g

from wakeful.errors import HostCallError
from wakeful.runtime import HostCall, HostReply, ManualClock

SF_TIMEOUT, SF_DENIED, SF_HOST_ERROR, SF_LIMIT = -3, -4, -5, -2
CAP = [{"name": "cap"}]


@pytest.fixture(scope="module")
def caller(compile_c: Any) -> bytes:
    return bytes(compile_c(g.HOST_CALLER))


def test_sync_handler_answers_in_the_same_batch_with_no_task(caller: bytes) -> None:
    clock = ManualClock()
    seen: list[HostCall] = []

    def handler(call: HostCall) -> Any:
        seen.append(call)
        return {"v": call.arguments["x"] * 2}

    rt = g.make_runtime(clock, handler)
    oid = g.load_started(rt, caller, capabilities=CAP, config={"x": 20, "timeout_ms": 5000}, label="L")
    rt.run_batch()  # no event loop at all: a plain return needs none
    assert rt.get_nowait(oid).outcome == {"exit_code": 41}
    (call,) = seen
    assert call.object_id == oid and call.capability == "cap" and call.arguments == {"x": 20}
    assert call.timeout_ms == 5000 and call.deadline_unix_ms == clock.unix_ms() + 5000
    assert call.max_result_bytes == 16384 and call.label == "L"
    assert call.id.startswith(f"sf:{rt.session_id}:")


def test_coroutine_handler(caller: bytes) -> None:
    async def handler(call: HostCall) -> Any:
        await asyncio.sleep(0)
        return {"v": 99}

    async def main() -> None:
        clock = ManualClock()
        rt = g.make_runtime(clock, handler)
        oid = g.load_started(rt, caller, capabilities=CAP)
        rt.run_batch()
        assert rt.get_nowait(oid).wait == "host_rpc"
        assert rt.stats_nowait()["host"]["pending_host_calls"] == 1
        for _ in range(3):
            await asyncio.sleep(0)
        rt.run_batch()
        assert rt.get_nowait(oid).outcome == {"exit_code": 100}
        assert rt.stats_nowait()["host"]["pending_host_calls"] == 0

    asyncio.run(main())


def test_timeout_cancels_the_task(caller: bytes) -> None:
    cancelled: list[bool] = []

    async def handler(call: HostCall) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> None:
        clock = ManualClock()
        rt = g.make_runtime(clock, handler)
        oid = g.load_started(rt, caller, capabilities=CAP, config={"timeout_ms": 50})
        rt.run_batch()
        await asyncio.sleep(0)
        clock.advance(ms=49)
        rt.run_batch()
        assert rt.get_nowait(oid).wait == "host_rpc"
        clock.advance(ms=1)
        rt.run_batch()
        assert rt.get_nowait(oid).outcome == {"exit_code": SF_TIMEOUT}
        assert rt.stats_nowait()["host"]["pending_host_calls"] == 0
        await asyncio.sleep(0)
        assert cancelled == [True]

    asyncio.run(main())


@pytest.mark.parametrize("mode", ["raise", "raise-async", "broken", "not-json"])
def test_errors_become_sf_host_error(caller: bytes, mode: str) -> None:
    async def failing(call: HostCall) -> Any:
        raise HostCallError("nope", "no such thing")

    def handler(call: HostCall) -> Any:
        if mode == "raise":
            raise HostCallError("nope")
        if mode == "broken":
            raise RuntimeError("handler bug")
        if mode == "not-json":
            return {"v": float("nan")}
        return failing(call)

    async def main() -> None:
        clock = ManualClock()
        rt = g.make_runtime(clock, handler)
        oid = g.load_started(rt, caller, capabilities=CAP)
        rt.run_batch()
        for _ in range(3):
            await asyncio.sleep(0)
        rt.run_batch()
        assert rt.get_nowait(oid).outcome == {"exit_code": SF_HOST_ERROR}

    asyncio.run(main())


def test_result_over_limits_is_sf_limit(caller: bytes) -> None:
    clock = ManualClock()
    rt = g.make_runtime(clock, lambda call: {"v": 1, "pad": "x" * 16_400})
    oid = g.load_started(rt, caller, capabilities=CAP)
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": SF_LIMIT}


def test_denied_capability_never_reaches_the_handler(caller: bytes) -> None:
    clock = ManualClock()
    rt = g.make_runtime(clock)  # the default handler fails the test if called
    oid = g.load_started(rt, caller, capabilities=[{"name": "cap", "arguments": {"x": 2}}], config={"x": 1})
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": SF_DENIED}


def test_timeout_zero_is_immediate(caller: bytes) -> None:
    clock = ManualClock()
    rt = g.make_runtime(clock)
    oid = g.load_started(rt, caller, capabilities=CAP, config={"timeout_ms": 0})
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": SF_TIMEOUT}


def test_stop_while_pending_cancels_the_task(caller: bytes) -> None:
    cancelled: list[str] = []

    async def handler(call: HostCall) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(call.id)
            raise

    async def main() -> None:
        clock = ManualClock()
        rt = g.make_runtime(clock, handler)
        oid = g.load_started(rt, caller, capabilities=CAP, config={"timeout_ms": 60000})
        rt.run_batch()
        await asyncio.sleep(0)
        status = await rt.stop(oid)
        assert status.state == "stopped" and rt.stats_nowait()["host"]["pending_host_calls"] == 0
        await asyncio.sleep(0)
        assert len(cancelled) == 1
        clock.advance(ms=60000)
        rt.run_batch()
        assert rt.get_nowait(oid).state == "stopped"

    asyncio.run(main())


def test_handler_stopping_its_own_caller(caller: bytes) -> None:
    """A synchronous handler that stops the calling object: the stop completes when the step returns."""
    clock = ManualClock()
    rt: Any = None

    def handler(call: HostCall) -> Any:
        status = rt.stop_nowait(call.object_id)
        assert status.state == "stopping"
        return {"v": 1}

    rt = g.make_runtime(clock, handler)
    oid = g.load_started(rt, caller, capabilities=CAP)
    rt.run_batch()
    status = rt.get_nowait(oid)
    assert (status.state, status.outcome) == ("stopped", None)
    run = rt.run_of(oid)
    assert run is not None and run.done and run.gen is None


def test_awaitable_without_a_running_loop_is_a_host_error(caller: bytes) -> None:
    async def handler(call: HostCall) -> Any:
        return {"v": 1}

    clock = ManualClock()
    rt = g.make_runtime(clock, handler)
    oid = g.load_started(rt, caller, capabilities=CAP)
    rt.run_batch()  # no event loop here: the coroutine is closed, never left un-awaited
    assert rt.get_nowait(oid).outcome == {"exit_code": SF_HOST_ERROR}


BAD_CAP_POINTER = r"""
#include <wakeful.h>
SF_MAIN sf_i64 main(void) {
    sf_handle params = sf_json_object();
    /* a capability name at an unmapped address: a fault in the host call's guest-side checks */
    return sf_host_call_raw((const char *)8, 3, params, 1000);
}
"""


def test_fault_in_host_call_checks_names_the_guest_function_and_pc(compile_c: Any) -> None:
    rt = g.make_runtime(ManualClock(), lambda call: {})
    oid = g.load_started(rt, bytes(compile_c(BAD_CAP_POINTER)), capabilities=CAP)
    rt.run_batch()
    status = rt.get_nowait(oid)
    assert status.state == "failed" and status.outcome is not None
    assert status.outcome["kind"] == "PROGRAM_FAULT"
    assert status.fault is not None
    assert status.fault["code"] == "HELPER_POINTER"
    assert status.fault["helper"] == "sf_host_call_raw"
    assert status.fault["function"] == "main" and status.fault["pc"] is not None
    assert "call sf_host_call_raw" in (status.fault["insn"] or "")


# ---- HostReply: settled later by the embedder's own code, no event loop at all (runtime-protocol.md §14)


class _Reply(HostReply):
    __slots__ = ("cancels",)

    def __init__(self) -> None:
        super().__init__()
        self.cancels = 0

    def on_cancel(self) -> None:
        self.cancels += 1


def _reply_runtime(caller: bytes, **config: Any) -> tuple[Any, str, list[_Reply], ManualClock]:
    clock = ManualClock()
    replies: list[_Reply] = []

    def handler(call: HostCall) -> Any:
        replies.append(_Reply())
        return replies[-1]

    rt = g.make_runtime(clock, handler)
    oid = g.load_started(rt, caller, capabilities=CAP, config=config or None)
    rt.run_batch()
    return rt, oid, replies, clock


def test_host_reply_result_reaches_the_guest_without_an_event_loop(caller: bytes) -> None:
    rt, oid, (reply,), _ = _reply_runtime(caller)
    assert rt.get_nowait(oid).wait == "host_rpc" and rt.stats_nowait()["host"]["pending_host_calls"] == 1
    reply.set_result({"v": 6})
    assert rt.stats_nowait()["host"]["pending_host_calls"] == 0  # settled at once, before any batch
    reply.set_result({"v": 100})  # a second answer is ignored
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": 7}
    assert reply.done() and not reply.cancelled() and reply.cancels == 0


@pytest.mark.parametrize("how", ["host-error", "bug", "cancel", "not-json"])
def test_host_reply_errors_are_sf_host_error(caller: bytes, how: str) -> None:
    rt, oid, (reply,), _ = _reply_runtime(caller)
    if how == "host-error":
        reply.set_exception(HostCallError("HOST_ERROR", "no"))
    elif how == "bug":
        reply.set_exception(RuntimeError("handler bug"))
    elif how == "cancel":  # the handler gives up: its own on_cancel runs once
        reply.cancel()
    else:
        reply.set_result({"v": float("nan")})
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": SF_HOST_ERROR}
    assert reply.cancels == (1 if how == "cancel" else 0)
    assert rt.stats_nowait()["host"]["ignored_host_responses"] == 0


def test_host_reply_settled_inside_the_handler_is_answered_in_the_batch(caller: bytes) -> None:
    def handler(call: HostCall) -> Any:
        reply = HostReply()
        reply.set_result({"v": 41})
        return reply

    rt = g.make_runtime(ManualClock(), handler)
    oid = g.load_started(rt, caller, capabilities=CAP)
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": 42}


def test_host_reply_timeout_cancels_it_once_and_a_late_answer_is_not_counted(caller: bytes) -> None:
    rt, oid, (reply,), clock = _reply_runtime(caller, timeout_ms=50)
    clock.advance(ms=50)
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": SF_TIMEOUT}
    assert reply.cancelled() and reply.cancels == 1
    reply.set_result({"v": 1})  # too late: the reply is done, nothing reaches the runtime
    assert rt.stats_nowait()["host"] == {"pending_host_calls": 0, "ignored_host_responses": 0}


def test_host_reply_stop_while_pending_cancels_it(caller: bytes) -> None:
    rt, oid, (reply,), clock = _reply_runtime(caller, timeout_ms=60000)
    status = rt.stop_nowait(oid)
    assert status.state in ("stopping", "stopped")
    rt.run_batch()
    assert rt.get_nowait(oid).state == "stopped"
    assert reply.cancelled() and reply.cancels == 1
    assert rt.stats_nowait()["host"]["pending_host_calls"] == 0


def test_only_a_borrowing_handler_gets_the_guests_value_uncopied(caller: bytes) -> None:
    """``borrows_arguments = True`` (the stdio server's handler) skips the host's snapshot copy; any other
    handler gets its own copy, so mutating it cannot reach the guest's value."""
    seen: list[Any] = []

    class Borrowing:
        borrows_arguments = True

        def __call__(self, call: HostCall) -> Any:
            seen.append(call.arguments)
            return {"v": call.arguments["x"]}

    def copying(call: HostCall) -> Any:
        seen.append(call.arguments)
        call.arguments["x"] = 1000  # the handler's own copy
        return {"v": 2}

    for handler, expected in ((Borrowing(), 8), (copying, 3)):
        rt = g.make_runtime(ManualClock(), handler)
        assert rt.hostcalls.copy_arguments is (handler is copying)
        oid = g.load_started(rt, caller, capabilities=CAP, config={"x": 7})
        rt.run_batch()
        assert rt.get_nowait(oid).outcome == {"exit_code": expected}
    assert seen[0] == {"x": 7} and seen[1] == {"x": 1000}
