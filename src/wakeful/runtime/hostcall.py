"""The host-call router: the pending table and the calls into the embedder's ``host_handler``.

runtime-protocol.md §9 and §14: a plain return is delivered in the same batch with no task; an awaitable
runs as a task that is cancelled on timeout or object stop; a ``HostReply`` is settled later by the embedder's
own code with no event-loop round trip; ``HostCallError`` → SF_HOST_ERROR.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from wakeful.errors import HostCallError
from wakeful.runtime.clock import Clock

if TYPE_CHECKING:
    from wakeful.runtime.scheduler import Run, Scheduler

__all__ = ["MAX_PENDING", "MAX_RESULT_BYTES", "HostCall", "HostCalls", "HostHandler", "HostReply"]

log = logging.getLogger("wakeful.runtime")

MAX_PENDING = 16_384  # §9.3: calls pending in the runtime
MAX_RESULT_BYTES = 16_384  # §9.2 max_result_bytes

SF_HOST_ERROR = -5
SF_CLOSED = -6


class HostCall(NamedTuple):
    """What ``host_handler`` receives (§14): the fields of the ``host.call`` params of §9.2 plus its id.

    Immutable; a ``NamedTuple`` (one is made per host call: a frozen dataclass cost three times as much)."""

    id: str
    object_id: str
    label: str | None
    capability: str
    arguments: Any
    timeout_ms: int
    deadline_unix_ms: int
    max_result_bytes: int = MAX_RESULT_BYTES


HostHandler = Callable[[HostCall], Any]

_CANCELLED = Exception("host call cancelled")  # the outcome of a cancelled ``HostReply`` (never raised)


class HostReply:
    """The answer to a host call that the handler gives later, without an asyncio future (§14).

    A ``host_handler`` may return one (or a subclass) and settle it once, from the event loop's thread, with
    ``set_result`` or ``set_exception`` (``HostCallError`` → SF_HOST_ERROR), or ``cancel`` it (SF_HOST_ERROR).
    The outcome reaches the guest at once, with no event-loop callback in between (the stdio server's host
    calls). When the runtime abandons the call (its timeout, the object's stop or end) it calls ``cancel``,
    and ``on_cancel`` runs: subclasses override it to withdraw the call. Later settles are ignored.
    """

    __slots__ = ("_key", "_listener", "_outcome", "_state")

    def __init__(self) -> None:
        self._state = 0  # 0 pending, 1 settled, 2 cancelled
        self._listener: Callable[[Any, Any, BaseException | None], None] | None = None
        self._key: Any = None
        self._outcome: tuple[Any, BaseException | None] | None = None

    def done(self) -> bool:
        """True once settled or cancelled."""
        return self._state != 0

    def cancelled(self) -> bool:
        return self._state == 2

    def set_result(self, value: Any) -> None:
        """Answer the call with a JSON value (ignored once done)."""
        if self._state == 0:
            self._state = 1
            self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        """Answer the call with an error: the guest gets SF_HOST_ERROR (ignored once done)."""
        if self._state == 0:
            self._state = 1
            self._settle(None, error)

    def cancel(self) -> None:
        """Abandon the call from either side: ``on_cancel`` runs, the guest (if still waiting) gets SF_HOST_ERROR."""
        if self._state == 0:
            self._state = 2
            self.on_cancel()
            self._settle(None, _CANCELLED)

    def on_cancel(self) -> None:
        """Called once when the call is cancelled (by the runtime or by the handler)."""

    def _settle(self, value: Any, error: BaseException | None) -> None:
        listener = self._listener
        if listener is None:
            self._outcome = (value, error)  # settled before the runtime took it: read by ``_bind``
            return
        self._listener = None
        listener(self._key, value, error)

    def _bind(self, listener: Callable[[Any, Any, BaseException | None], None], key: Any) -> bool:
        """Route the outcome to ``listener(key, value, error)``; ``False`` if it is already settled."""
        if self._state != 0:
            return False
        self._listener, self._key = listener, key
        return True


_PLAIN = frozenset((dict, list, str, int, float, bool, type(None)))  # JSON-ish results, never awaitable


class _Pending:
    """One host call waiting for its awaitable or ``HostReply`` (the only kinds that enter the table)."""

    __slots__ = ("call", "run", "task")

    def __init__(self, call: HostCall, run: Run, task: asyncio.Future[Any] | HostReply) -> None:
        self.call = call
        self.run = run
        self.task = task


class HostCalls:
    """Routes guests' host calls to the handler and answers them through the scheduler."""

    def __init__(self, handler: HostHandler, scheduler: Scheduler, clock: Clock, *, session_id: str) -> None:
        self._handler = handler
        # a handler that only reads ``call.arguments`` before it returns (``borrows_arguments = True``, the
        # stdio server's) gets the guest's boxed value itself instead of a copy (boxes are never mutated)
        self.copy_arguments = not getattr(handler, "borrows_arguments", False)
        self._scheduler = scheduler
        self._clock = clock
        self._session_id = session_id
        self._counter = 0
        self._pending: dict[str, _Pending] = {}
        self.calls = 0  # calls handed to the handler
        self.ignored = 0  # results that arrived for no pending entry (never for our own cancels)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    # §9.2 ids are "sf:<session_id>:<n>", n counting from 1 per session
    def _new_call(self, run: Run, request: Any) -> HostCall:
        self._counter += 1
        owner = run.owner
        timeout_ms = request.timeout_ms
        return HostCall(  # positional: the hot path (one per host call)
            f"sf:{self._session_id}:{self._counter}", owner.object_id, owner.label, request.capability,
            request.arguments, timeout_ms, self._clock.unix_ms() + timeout_ms, MAX_RESULT_BYTES,
        )

    def submit(self, run: Run, request: Any) -> int | None:
        """Call the handler. Returns the guest's r0 now (plain return or error), or ``None`` when an
        awaitable is pending (the scheduler then arms the call's deadline)."""
        call = self._new_call(run, request)
        self.calls += 1
        try:
            result = self._handler(call)
        except HostCallError:
            return SF_HOST_ERROR
        except Exception:  # a broken handler is the embedder's error; the guest sees SF_HOST_ERROR
            log.exception("host handler raised for %s", call.id)
            return SF_HOST_ERROR
        if type(result) in _PLAIN:  # the common synchronous replies: no awaitable probe
            return self._deliver(run, result)
        if isinstance(result, HostReply):
            return self._start_reply(run, call, result)
        if inspect.isawaitable(result):
            return self._start_task(run, call, result)
        return self._deliver(run, result)

    def _start_task(self, run: Run, call: HostCall, awaitable: Awaitable[Any]) -> int | None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            _discard(awaitable)
            log.error("host handler returned an awaitable with no running event loop")
            return SF_HOST_ERROR
        # a plain future of this loop (the stdio handler's) is used as is; anything else is wrapped
        task = awaitable if type(awaitable) is asyncio.Future and awaitable.get_loop() is loop \
            else asyncio.ensure_future(awaitable, loop=loop)
        entry = _Pending(call, run, task)
        self._pending[call.id] = entry
        run.host_call = entry
        task.add_done_callback(partial(self._task_done, call.id))
        return None

    def _start_reply(self, run: Run, call: HostCall, reply: HostReply) -> int | None:
        if not reply._bind(self._replied, call.id):  # settled inside the handler: answered now
            value, error = reply._outcome or (None, _CANCELLED)
            return self._reply_r0(run, call, value, error)
        entry = _Pending(call, run, reply)
        self._pending[call.id] = entry
        run.host_call = entry
        return None

    def _replied(self, call_id: str, value: Any, error: BaseException | None) -> None:
        entry = self._pending.pop(call_id, None)
        if entry is None:  # abandoned by the runtime (timeout, stop): its own cancel is not counted
            if error is not _CANCELLED:
                self.ignored += 1
            return
        entry.run.host_call = None
        self._scheduler.wake(entry.run, self._reply_r0(entry.run, entry.call, value, error))

    def _reply_r0(self, run: Run, call: HostCall, value: Any, error: BaseException | None) -> int:
        """§9.4 for a ``HostReply``: value → handle (or SF_LIMIT); error or cancel → SF_HOST_ERROR."""
        if error is None:
            return self._deliver(run, value)
        if error is not _CANCELLED and not isinstance(error, HostCallError):
            log.error("host handler failed for %s", call.id, exc_info=error)
        return SF_HOST_ERROR

    def _task_done(self, call_id: str, task: asyncio.Future[Any]) -> None:
        entry = self._pending.pop(call_id, None)
        if entry is None:
            if not task.cancelled():
                self.ignored += 1
                task.exception()  # retrieve it so asyncio does not warn
            return
        entry.run.host_call = None
        self._scheduler.wake(entry.run, self._outcome(entry, task))

    def _outcome(self, entry: _Pending, task: asyncio.Future[Any]) -> int:
        """§9.4: result → handle (or SF_LIMIT); error → SF_HOST_ERROR."""
        if task.cancelled():
            return SF_HOST_ERROR
        exc = task.exception()
        if exc is not None:
            if not isinstance(exc, HostCallError):
                log.error("host handler failed for %s", entry.call.id, exc_info=exc)
            return SF_HOST_ERROR
        return self._deliver(entry.run, task.result())

    def _deliver(self, run: Run, result: Any) -> int:
        r0: int = run.ctx.finish_host_call(result)
        return r0

    # §9.3 On timeout: the pending entry is removed and the handler's task cancelled
    def expire(self, run: Run) -> None:
        self._drop(run)

    # §9.3 On object stop or end: every pending call is cancelled the same way (resolved as closed)
    def cancel(self, run: Run) -> None:
        self._drop(run)

    def cancel_all(self) -> None:
        for entry in list(self._pending.values()):
            self._drop(entry.run)

    def _drop(self, run: Run) -> None:
        entry = run.host_call
        if entry is None:
            return
        run.host_call = None
        self._pending.pop(entry.call.id, None)
        entry.task.cancel()


def _discard(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
