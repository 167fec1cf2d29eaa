"""Outgoing host calls of the stdio runtime: ``host.call`` frames, their replies and ``host.cancel``.

runtime-protocol.md §9.2-9.4 and §7.1: the embedder's replies are routed by id through the pending table;
everything else (unknown, late, duplicate, non-string ids) is discarded and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from wakeful.errors import HostCallError
from wakeful.runtime import jsonval
from wakeful.runtime.framing import MAX_FRAME_BYTES, encode_frame, encode_value, notification
from wakeful.runtime.hostcall import HostCall, HostReply
from wakeful.runtime.outbox import DataFrame, Outbox

__all__ = ["OutgoingCalls"]

log = logging.getLogger("wakeful.runtime.stdio")


class _Call(HostReply):
    """One outgoing call: the reply slot the core waits on, its frame, and the session that sent it."""

    __slots__ = ("call", "frame", "owner")

    def __init__(self, owner: OutgoingCalls, call: HostCall, frame: DataFrame) -> None:
        self._state, self._listener, self._key, self._outcome = 0, None, None, None  # HostReply's, inlined
        self.owner = owner
        self.call = call
        self.frame = frame

    def on_cancel(self) -> None:  # §9.3 timeout or stop: the core abandoned the call
        self.owner._abandon(self.call.id)


class OutgoingCalls:
    """The runtime's ``host_handler`` when it speaks over stdio (one ``HostReply`` per call: no future, no
    task, and a reply reaches the guest with no event-loop callback in between)."""

    borrows_arguments = True  # ``call.arguments`` is only encoded, before __call__ returns (hostcall.py)

    def __init__(self, outbox: Outbox, *, detail: Callable[[], bool]) -> None:
        self._outbox = outbox
        self._detail = detail
        self._calls: dict[str, _Call] = {}
        self._by_object: dict[str, set[str]] = {}
        self.ignored = 0  # replies discarded (§9.4)
        self.sent = 0

    @property
    def pending(self) -> int:
        return len(self._calls)

    # §9.2 outgoing request; the frame waits in the object's data queue within the call's deadline
    def __call__(self, call: HostCall) -> HostReply:
        label = call.label if call.label is not None and self._detail() else None  # §13 load_options
        data = _fast_frame(call, label)
        if data == b"":
            data = _frame(call, label)
        if data is None:  # cannot happen within the argument limits; the guest sees SF_HOST_ERROR
            self._outbox.dropped += 1
            refused = HostReply()
            refused.set_exception(HostCallError("RESPONSE_TOO_LARGE", "host.call frame over the frame limit"))
            return refused
        entry = _Call(self, call, DataFrame(call.object_id, data))
        self._calls[call.id] = entry
        ids = self._by_object.get(call.object_id)
        if ids is None:
            ids = self._by_object[call.object_id] = set()
        ids.add(call.id)
        self.sent += 1
        self._outbox.submit_waiting(entry.frame)
        return entry

    # §9.3: remove the entry, purge an unsent frame, offer host.cancel if the frame had been accepted
    def _abandon(self, call_id: str) -> None:
        entry = self._forget(call_id)
        if entry is None:
            return
        self._outbox.remove(entry.frame)
        if entry.frame.accepted:
            frame = encode_frame(notification("host.cancel", {"id": call_id}))
            if frame is not None:
                self._outbox.offer_control(frame)
        entry.cancel()  # a no-op when the core cancelled it (that is how we got here); else SF_HOST_ERROR

    def _forget(self, call_id: str) -> _Call | None:
        entry = self._calls.pop(call_id, None)
        if entry is not None:
            ids = self._by_object.get(entry.call.object_id)
            if ids is not None:
                ids.discard(call_id)
                if not ids:
                    del self._by_object[entry.call.object_id]
        return entry

    # §7.1 first step of terminal cleanup: pending calls resolved as closed, host.cancel offered
    def object_ended(self, object_id: str) -> None:
        for call_id in sorted(self._by_object.get(object_id, ())):
            self._abandon(call_id)

    def close(self) -> None:
        for call_id in list(self._calls):
            self._abandon(call_id)

    # §9.4 replies: routed only by id; result → value, error (or both) → SF_HOST_ERROR
    def reply(self, message: dict[str, Any]) -> None:
        call_id = message.get("id")
        entry = self._calls.get(call_id) if type(call_id) is str else None
        if entry is None or entry.done():
            self.ignored += 1
            if entry is not None and isinstance(call_id, str):
                self._abandon(call_id)
            return
        self._forget(entry.call.id)
        self._outbox.remove(entry.frame)  # a reply to a frame not yet written: nothing left to send
        if "error" in message:  # settled at once: the guest is runnable before the next frame is read
            entry.set_exception(HostCallError("HOST_ERROR", _error_text(message["error"])))
        else:
            entry.set_result(message["result"])


# §9.2 the host.call frame; §3 None when over the outgoing bound
def _frame(call: HostCall, label: str | None) -> bytes | None:
    params: dict[str, Any] = {
        "object_id": call.object_id, "capability": call.capability, "arguments": call.arguments,
        "timeout_ms": call.timeout_ms, "deadline_unix_ms": call.deadline_unix_ms,
        "max_result_bytes": call.max_result_bytes,
    }
    if label is not None:
        params["wakeful"] = {"label": label}
    return encode_frame({"jsonrpc": "2.0", "id": call.id, "method": "host.call", "params": params})


# the same bytes as ``_frame`` from a template (benchmarks.md §1.8 fan-out); ``b""``: take ``_frame``
_TEMPLATE = (b'{"jsonrpc":"2.0","id":%b,"method":"host.call","params":{"object_id":%b,"capability":%b,'
             b'"arguments":%b,"timeout_ms":%d,"deadline_unix_ms":%d,"max_result_bytes":%d%b}}\n')


def _fast_frame(call: HostCall, label: str | None) -> bytes | None:
    timeout_ms, deadline, max_bytes = call.timeout_ms, call.deadline_unix_ms, call.max_result_bytes
    if type(timeout_ms) is not int or type(deadline) is not int or type(max_bytes) is not int:
        return b""
    try:
        data = _TEMPLATE % (
            encode_basestring(call.id).encode(), encode_basestring(call.object_id).encode(),
            encode_basestring(call.capability).encode(), encode_value(call.arguments), timeout_ms, deadline,
            max_bytes, b"" if label is None else b',"wakeful":{"label":' + encode_basestring(label).encode() + b"}",
        )
    except (UnicodeEncodeError, TypeError, jsonval.JsonError):  # odd values: the checked path says what
        return b""
    return None if len(data) > MAX_FRAME_BYTES else data


def _error_text(error: Any) -> str:
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:200]
    return "host error"
