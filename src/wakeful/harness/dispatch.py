"""Host-call dispatch for Loops: object → Loop and incarnation, fence, concurrency, handler, result.

harness.md §9.3–9.4 (the runtime already applied the Loop's capability list, §9.2).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from wakeful.errors import HostCallError
from wakeful.harness import selfcalls
from wakeful.harness.capabilities import delegated_principal
from wakeful.harness.decide.service import Decider
from wakeful.harness.errors import HostCallRefused, StoreUnavailable
from wakeful.harness.registry import Tool, ToolContext
from wakeful.harness.store.group import copy_outcome
from wakeful.runtime import HostCall, jsonval
from wakeful.sdk.rules import AGENT_LIMITS

if TYPE_CHECKING:
    from wakeful.harness.node import Node
    from wakeful.harness.web import WebClient

__all__ = ["MAX_IN_FLIGHT", "Dispatch"]

log = logging.getLogger("wakeful.harness")

MAX_IN_FLIGHT = AGENT_LIMITS["host_calls_in_flight"]  # §9.3 / §20
MAX_RESULT_BYTES = 16_384 - 256  # §9.4
LOG_PER_SECOND = 10  # §9.6
MIN_DEADLINE_MS, MAX_DEADLINE_MS = 100, 60_000  # §9.3
DECIDE_MARGIN_S = 0.05  # decide's budget ends this much before the host call's deadline (§16.5)


class Dispatch:
    """The runtime's ``host_handler`` for one node. ``dispatched`` counts calls that reached the harness."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.dispatched = 0
        self._in_flight: dict[str, int] = {}
        self.tasks: set[asyncio.Future[Any]] = set()  # calls handed to the runtime
        self.work: set[asyncio.Task[Any]] = set()  # their store work (never cancelled mid-transaction)
        self._log_times: dict[str, deque[int]] = {}
        self.decider = Decider(node.config.decide, monotonic_ns=node.clock.monotonic_ns)  # §16
        self._web: WebClient | None = None  # §17, made on first use (loads httpcore)
        # harness.md §14 cluster: the web bucket's shared rows, handed to the client when it is made (issue 16: a
        # cluster node's start made the client only to set this — its imports and TLS context, ~0.1–0.3 s)
        self.web_shared: Callable[[str, float, float], Awaitable[float | None]] | None = None

    @property
    def web(self) -> WebClient:
        """The node's ``web.http_request`` client (tests replace its ``resolver``)."""
        if self._web is None:
            from wakeful.harness.web import WebClient

            self._web = WebClient(self.node.config.web, monotonic_ns=self.node.clock.monotonic_ns)
            self._web.shared = self.web_shared
        return self._web

    # §9.3 order: map object → Loop and incarnation → fence → per-Loop concurrency → arguments → handler
    def handle(self, call: HostCall) -> Any:
        self.dispatched += 1
        res = self.node.identity(call.object_id)
        if res is None:
            raise HostCallError("stale_incarnation", f"object {call.object_id} is retired")
        loop_id = res.loop_id
        if self._in_flight.get(loop_id, 0) >= MAX_IN_FLIGHT:
            raise HostCallError("busy", f"{MAX_IN_FLIGHT} host calls already in flight")
        self._in_flight[loop_id] = self._in_flight.get(loop_id, 0) + 1
        answer = self._start(loop_id, res.incarnation, call)
        self.tasks.add(answer)
        answer.add_done_callback(lambda done: self._release(loop_id, done))  # also when the runtime cancels it
        return answer

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait (bounded) for calls and their store work to end, before the store closes."""
        pending = self.tasks | self.work
        if not pending:
            return
        _, left = await asyncio.wait(pending, timeout=timeout)
        for task in left:
            task.cancel()
        if left:
            await asyncio.gather(*left, return_exceptions=True)

    def _detached(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Store work runs to its end even when its call is cancelled, so a transaction is never cut
        (§9.3: a side effect already made is not undone)."""
        task = asyncio.ensure_future(work)
        self.work.add(task)
        task.add_done_callback(self._work_done)
        return task

    def _work_done(self, task: asyncio.Task[Any]) -> None:
        self.work.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: the call's answer may have no reader any more

    def _release(self, loop_id: str, task: asyncio.Future[Any]) -> None:
        self.tasks.discard(task)
        left = self._in_flight.get(loop_id, 0) - 1
        if left > 0:
            self._in_flight[loop_id] = left
        else:
            self._in_flight.pop(loop_id, None)

    def in_flight(self, loop_id: str) -> int:
        return self._in_flight.get(loop_id, 0)

    async def run(self, loop_id: str, incarnation: int, call: HostCall) -> Any:
        """Run one call for (``loop_id``, ``incarnation``); refusals become ``HostCallError``."""
        return await self._start(loop_id, incarnation, call)

    # issue 16: one task per call (its store work) and a plain future for the answer, settled by the work's end
    # or by the deadline's timer — instead of a task running ``wait_for(shield(work))``, which made two more
    # futures, a second task and its wake-ups on every call (~5 % of the node under the ingest benchmark)
    def _start(self, loop_id: str, incarnation: int, call: HostCall) -> asyncio.Future[Any]:
        """The call's answer: its work's outcome, or ``deadline_exceeded`` when the deadline comes first (the
        work then goes on, detached, and its late answer is dropped); cancelling the answer leaves the work
        running too (§9.3: a side effect already made is not undone)."""
        work = self._detached(self._answer(loop_id, incarnation, call))
        answer: asyncio.Future[Any] = work.get_loop().create_future()
        deadline = work.get_loop().call_later(_deadline_s(call, self.node), self._expired, answer, loop_id,
                                              incarnation, call.capability)
        work.add_done_callback(partial(_settle, answer, deadline))
        return answer

    def _expired(self, answer: asyncio.Future[Any], loop_id: str, incarnation: int, capability: str) -> None:
        if answer.done():
            return
        self._detached(self._log_refusal(loop_id, incarnation, "deadline_exceeded", capability))
        answer.set_exception(HostCallError("deadline_exceeded", f"{capability} ran past its deadline"))

    async def _answer(self, loop_id: str, incarnation: int, call: HostCall) -> Any:
        try:
            result = await self._call(loop_id, incarnation, call)
        except HostCallRefused as refusal:
            await self._log_refusal(loop_id, incarnation, refusal.code, refusal.message)
            raise HostCallError(refusal.code, refusal.message) from None
        except StoreUnavailable as exc:
            raise HostCallError("unavailable", exc.message) from None
        return _bounded(result)

    async def _call(self, loop_id: str, incarnation: int, call: HostCall) -> Any:
        store, args = self.node.store, call.arguments
        match call.capability:
            case "loop.state.put":
                return await selfcalls.put_state(store, loop_id, incarnation, args)
            case "loop.state.get":
                return await selfcalls.get_state(store, loop_id, incarnation)
            case "loop.ack":
                return await selfcalls.ack(store, loop_id, incarnation, args)
            case "loop.log":
                self._log_rate(loop_id)
                return await selfcalls.write_log(store, loop_id, incarnation, args)
            case "agent.notify":
                return await self._notify(loop_id, incarnation, args)
            case "decide":
                row = await self._fenced_row(loop_id, incarnation)
                remaining = _deadline_s(call, self.node) - DECIDE_MARGIN_S  # answer as data before the cut
                return self._domain(loop_id, incarnation, await self.decider.decide(
                    row.group_id, args, remaining_s=remaining, loop_caller=True))
            case "web.http_request":
                await self._fenced_row(loop_id, incarnation)
                return self._domain(loop_id, incarnation, await self.web.request(args, loop_id=loop_id))
            case _:
                return await self._tool(loop_id, incarnation, call)

    # §9.4: a builtin's domain failure is data for the guest, and its code goes to the Loop log
    def _domain(self, loop_id: str, incarnation: int, result: dict[str, Any]) -> dict[str, Any]:
        error = result.get("error")
        if isinstance(error, dict):
            detail = str(error.get("message", ""))
            self._detached(self._log_refusal(loop_id, incarnation, str(error.get("code")), detail))
        return result

    async def _notify(self, loop_id: str, incarnation: int, args: Any) -> Any:
        node = self.node
        outcome = await selfcalls.notify(
            node.store, node.watch, node.config.limits, node.clock.monotonic_ns(), loop_id, incarnation, args,
        )
        node.announce(outcome.message_id)
        if outcome.paused:
            node.transitioned(loop_id)
            node.watch.forget(loop_id)
            node.spawn(node.end_incarnation(loop_id))
        if outcome.refusal is not None:
            raise outcome.refusal
        return outcome.result

    # §9.3: non-builtin calls run with the delegated principal; a tool exception is tool_failed
    async def _tool(self, loop_id: str, incarnation: int, call: HostCall) -> Any:
        tool = self.node.tools.get(call.capability)
        if tool is None or tool.safety != "read":
            raise HostCallRefused("tool_failed", f"no read tool {call.capability!r} on this node")
        row = await self._fenced_row(loop_id, incarnation)
        ctx = ToolContext(
            principal=delegated_principal(loop_id, row.creator), loop_id=loop_id, agent_id=row.agent_id,
            session_id=row.session_id, group_id=row.group_id, incarnation=incarnation,
            deadline_unix_ms=call.deadline_unix_ms,
        )
        _validate(tool, call.arguments)
        try:
            value = tool.fn(call.arguments, ctx)
            if inspect.isawaitable(value):
                value = await asyncio.wait_for(value, tool.timeout_s)  # the tool's own bound (interfaces.md §5)
        except (HostCallRefused, StoreUnavailable, asyncio.CancelledError, TimeoutError):
            raise
        except Exception as exc:
            raise HostCallRefused("tool_failed", f"{tool.name}: {type(exc).__name__}: {exc}"[:512]) from None
        return value

    async def _fenced_row(self, loop_id: str, incarnation: int) -> Any:
        from wakeful.harness import lifecycle as lc

        async with self.node.store.tx(readonly=True) as tx:
            return await lc.fenced_loop(tx, loop_id, incarnation)

    # §9.6: at most 10 loop.log calls per second per Loop (monotonic clock)
    def _log_rate(self, loop_id: str) -> None:
        now = self.node.clock.monotonic_ns()
        times = self._log_times.setdefault(loop_id, deque())
        while times and now - times[0] >= 1_000_000_000:
            times.popleft()
        if len(times) >= LOG_PER_SECOND:
            raise HostCallRefused("rate_limited", f"loop.log allows {LOG_PER_SECOND} lines per second")
        times.append(now)

    # §9.4: the reason code and ≤ 512 chars of detail go to the Loop log — except for a retired
    # incarnation, whose refusal must change no row (§21); that one goes to the process log only
    async def _log_refusal(self, loop_id: str, incarnation: int, code: str, detail: str) -> None:
        if code == "stale_incarnation":
            log.info("refused %s for %s incarnation %d: %s", code, loop_id, incarnation, detail)
            return
        from wakeful.harness import lifecycle as lc

        try:
            async with self.node.store.tx() as tx:
                await lc.append_log(tx, loop_id, incarnation, "harness", f"{code}: {detail}"[:512])
        except Exception:  # the Loop may be gone or the store down; the guest still gets its answer
            log.info("could not log %s for %s", code, loop_id)


# interfaces.md §5: input_model (a pydantic model) validates arguments; failures become invalid_arguments
def _validate(tool: Tool, arguments: Any) -> None:
    validate = getattr(tool.input_model, "model_validate", None)
    if validate is None:
        return
    try:
        validate(arguments)
    except Exception as exc:
        raise HostCallRefused("invalid_arguments", f"{tool.name}: {exc}"[:512]) from None


def _settle(answer: asyncio.Future[Any], deadline: asyncio.TimerHandle, work: asyncio.Task[Any]) -> None:
    """Hand the work's outcome to the call's answer, unless the deadline or the runtime ended it first."""
    deadline.cancel()
    copy_outcome(answer, work)


def _deadline_s(call: HostCall, node: Node) -> float:
    remaining = call.deadline_unix_ms - node.clock.unix_ms()
    ms = min(call.timeout_ms, remaining)
    return max(MIN_DEADLINE_MS, min(MAX_DEADLINE_MS, ms)) / 1000


# §9.4: a result over 16,384 − 256 bytes becomes {error: {code: result_too_large, bytes}}
def _bounded(result: Any) -> Any:
    try:
        size = jsonval.from_python(result, limits=False).size
    except jsonval.JsonError:
        return {"error": {"code": "invalid_result", "bytes": 0}}
    if size > MAX_RESULT_BYTES:
        return {"error": {"code": "result_too_large", "bytes": size}}
    return result


