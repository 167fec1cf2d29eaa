"""Every guest helper of sdk.md §9 for one object: ``GuestContext`` implements ``vm.guest.GuestEnv``.
Synchronous helpers run inside the VM's call; suspending ones are validated here for the scheduler.

The runtime builds one context per object, instantiates the program with it and then sets ``mem`` to the
instance's bytearray. Region checks follow vm.md §5 (readable ``[BASE, END)``, writable ``[BASE+W, END)``,
zero-length regions always accepted); fuel charges follow vm.md §6.3 and are added to ``debt``.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from wakeful.errors import GuestFault
from wakeful.runtime import footprint, jsonval
from wakeful.runtime.clock import Clock, SystemClock
from wakeful.runtime.handles import SF_INVALID, SF_LIMIT, HandleSpace, HandleTable
from wakeful.runtime.jsonval import MAX_BYTES, MAX_NODES, Json, JsonValue
from wakeful.runtime.policy import Capability, CapabilityPolicy, parse_capabilities
from wakeful.vm.guest import SYNC_HELPERS
from wakeful.vm.isa import BASE
from wakeful.vm.linked import Layout

__all__ = [
    "MAX_DURATION_MS",
    "SF_CLOSED",
    "SF_DENIED",
    "SF_HOST_ERROR",
    "SF_INVALID",
    "SF_LIMIT",
    "SF_TIMEOUT",
    "GuestContext",
    "HostCallRequest",
    "clamp_ms",
]

# sdk.md §3 statuses (SF_INVALID and SF_LIMIT come from handles)
SF_TIMEOUT = -3
SF_DENIED = -4
SF_HOST_ERROR = -5
SF_CLOSED = -6

# sdk.md §3 JSON kinds by Python type
_KIND = {type(None): 0, bool: 1, int: 2, float: 2, str: 3, list: 4, dict: 5}

MAX_DURATION_MS = 86_400_000  # sdk.md §4: durations clamp to 24 h
MAX_TEXT = 16384  # sdk.md §4: text arguments
MAX_REGION = 16384  # sdk.md §9.4-9.7: read capacities, parse/bytes lengths, mem* lengths
MAX_LOG = 1024  # sdk.md §9.3
LOG_RATE = 10  # sdk.md §9.3: attempts per window
LOG_WINDOW_NS = 1_000_000_000
MAX_PENDING_HOST_CALLS = 16384  # runtime-protocol.md §9.3
SQUEEZE_MIN = 512  # the least run of stack zeros worth taking out of a waiting guest's memory

_I64 = struct.Struct("<q")
_SIGN = 1 << 63
_EMPTY_OBJECT = Json({}, 2, 1, 0, footprint.EMPTY)  # boxes are immutable, so the empty values can be shared
_EMPTY_ARRAY = Json([], 2, 1, 0, footprint.EMPTY)
_NULL = Json(None, 4, 1, 0, 0)
_TRUE = Json(True, 4, 1, 0, 0)
_FALSE = Json(False, 5, 1, 0, 0)


def clamp_ms(milliseconds: int) -> int:
    """sdk.md §4: a duration argument clamped to 24 h (no error)."""
    return milliseconds if milliseconds < MAX_DURATION_MS else MAX_DURATION_MS


class HostCallRequest(NamedTuple):
    """A validated ``sf_host_call_raw`` (sdk.md §9.3 step 5): what the scheduler sends to the host.

    A ``NamedTuple`` (one per host call; a frozen dataclass cost three times as much to build)."""

    capability: str
    arguments: JsonValue  # an independent snapshot of the params handle's value (or the value itself, borrowed)
    timeout_ms: int  # clamped to 24 h, never 0


class GuestContext:
    """The guest API of one object (sdk.md §9): its handle table, config, clock, log sink and policy.

    ``handles`` is the runtime's ``HandleSpace``; ``clock`` the scheduler's clock (``monotonic_ns()``,
    ``unix_ms()``); ``log(message)`` returns ``False`` when the object's output queue is full (the log is
    then dropped, counted and the guest gets ``SF_LIMIT``); ``log_refused(reason)`` hears of each line sdk.md
    §9.3 refuses before the sink (``length`` over 1,024 bytes, ``rate`` over 10 a second; counted in
    ``logs_refused``); ``capabilities`` a policy or its entries. ``mem`` must be set to the instance's memory before the guest runs.
    """

    def __init__(
        self,
        handles: HandleSpace,
        object_id: str,
        *,
        layout: Layout,
        config: JsonValue | Json = None,
        clock: Clock | None = None,
        log: Callable[[str], bool | None] | None = None,
        log_refused: Callable[[str], None] | None = None,
        capabilities: CapabilityPolicy | Iterable[Capability | Mapping[str, object]] = (),
    ) -> None:
        self.debt = 0
        self.retired = 0
        self.fuel_left = 0  # set by the VM when the guest ends (vm/guest.py)
        self.object_id = object_id
        self.table: HandleTable = handles.table()
        self.config = jsonval.from_python(config, limits=False)
        self.policy = capabilities if isinstance(capabilities, CapabilityPolicy) else parse_capabilities(
            list(capabilities))
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.log_sink = log
        self.log_refused = log_refused  # told "rate" or "length" for each line sdk.md §9.3 refuses (SF_LIMIT)
        self.logs_refused = 0
        self.started_ns = self.clock.monotonic_ns()
        self.logs_dropped = 0
        self._log_window_ns: int | None = None
        self._log_count = 0
        self._end = layout.end  # END: one past the last guest address
        self._wstart = BASE + layout.writable  # first writable address
        self._stack = layout.rodata_bytes + layout.data_bytes  # index of the stack region
        self.squeezed = 0  # zero bytes taken out of the stack's bottom while the guest waits (``squeeze``)
        self._mem = bytearray()

    # ------------------------------------------------------------ wiring

    @property
    def mem(self) -> bytearray:
        return self._mem

    @mem.setter
    def mem(self, mem: bytearray | None) -> None:
        self.squeezed = 0
        self._mem = mem if mem is not None else bytearray()  # None: the object ended

    def squeeze(self) -> int:
        """While the guest waits, take the zero bytes at the bottom of its stack region out of its memory (the
        deepest frames a wait leaves untouched, most of a 4,096-byte stack); ``unsqueeze`` puts them back
        before it runs again, so the guest never sees a shorter memory. Returns the bytes taken (issue 16:
        a waiting Loop's memory, benchmarks.md §2.2)."""
        mem, start = self._mem, self._stack
        if self.squeezed or len(mem) - start < SQUEEZE_MIN:
            return 0
        stack = mem[start:]
        # the leading zero bytes: the bytes below the big-endian integer's highest set bit (issue 16: one C pass;
        # ``lstrip(b"\0")`` tests each byte against its argument with a call, ~12 µs for a 4 KiB stack per wait)
        zeros = len(stack) - (int.from_bytes(stack, "big").bit_length() + 7) // 8
        if zeros < SQUEEZE_MIN:
            return 0
        # a whole-slice store moves the bytes to a fresh buffer of the new size and frees the old one whole
        # (CPython shrinks by advancing the start, then copies), where ``del mem[a:b]`` would shrink it in place
        # and leave its tail as a hole between live buffers that no trim can hand back
        try:
            mem[:] = mem[:start] + mem[start + zeros:]
        except BufferError:  # someone holds a view of the memory: it stays whole (CPython checks before changing it)
            return 0
        self.squeezed = zeros
        return zeros

    def unsqueeze(self) -> None:
        """Give the stack back the zero bytes ``squeeze`` took: the memory is whole again, byte for byte."""
        zeros = self.squeezed
        if zeros:
            self._mem[self._stack:self._stack] = bytes(zeros)
            self.squeezed = 0

    def helper(self, name: str) -> Callable[..., int]:
        """The bound synchronous helper ``name`` (vm/guest.py contract); ``KeyError`` for any other name."""
        if name not in SYNC_HELPERS:
            raise KeyError(name)
        fn: Callable[..., int] = getattr(self, name)
        return fn

    def mark_started(self) -> None:
        """Reset the origin of ``sf_now_mono_ms`` (the object's start)."""
        self.started_ns = self.clock.monotonic_ns()

    def close(self) -> None:
        """Release the handles and the memory view (runtime-protocol.md §7.1)."""
        self.table.clear()
        self.mem = None

    @property
    def handle_count(self) -> int:
        return len(self.table)

    @property
    def handle_bytes(self) -> int:
        return self.table.bytes

    # ------------------------------------------------------------ regions (vm.md §5, §8)

    # vm.md §5: readable = [BASE, END); vm.md §6.3: 1 unit per 16 bytes of a region, rounded up
    def _read(self, ptr: int, length: int, helper: str) -> int:
        """Index of a readable region ``[ptr, ptr+length)``; charges it; faults HELPER_POINTER."""
        if ptr < BASE or ptr > self._end or length > self._end - ptr:
            raise _pointer_fault(helper, ptr, length)
        self.debt += (length + 15) >> 4
        return ptr - BASE

    # vm.md §5: writable = [BASE+W, END)
    def _write(self, ptr: int, length: int, helper: str) -> int:
        """Index of a writable region ``[ptr, ptr+length)``; charges it; faults HELPER_POINTER."""
        if ptr < self._wstart or ptr > self._end or length > self._end - ptr:
            raise _pointer_fault(helper, ptr, length)
        self.debt += (length + 15) >> 4
        return ptr - BASE

    # sdk.md §4: text = valid UTF-8, at most 16,384 bytes, else HELPER_TEXT
    def _text(self, ptr: int, length: int, helper: str, what: str) -> str:
        if length == 0:
            return ""
        index = self._read(ptr, length, helper)
        if length > MAX_TEXT:
            raise GuestFault("HELPER_TEXT", f"{helper}: {what} is longer than {MAX_TEXT} bytes",
                             address=ptr, size=length, helper=helper)
        try:
            return self._mem[index:index + length].decode("utf-8")
        except UnicodeDecodeError:
            raise GuestFault("HELPER_TEXT", f"{helper}: {what} is not valid UTF-8",
                             address=ptr, size=length, helper=helper) from None

    def _store(self, index: int, data: bytes | bytearray) -> None:
        # slice stores through a view never resize the memory (sdk.md §6.1); a view per store, not one per
        # object kept for its life (~310 B each, issue 16)
        with memoryview(self._mem) as view:
            view[index:index + len(data)] = data

    def _new(self, box: Json) -> int:
        """Allocate a JSON handle, charging the nodes copied when it succeeds (vm.md §6.3).

        The charge is capped at 4,096 (an event envelope may hold 3 more nodes) so that no call exceeds
        the helper's maximum charge in ``vm.guest.HELPER_MAX_CHARGE``.
        """
        handle = self.table.add(box)
        if handle > 0:
            self.debt += min(box.nodes, MAX_NODES)
        return handle

    # ------------------------------------------------------------ §9.1 time

    # sdk.md §9.1: ms since this object started, monotonic
    def sf_now_mono_ms(self) -> int:
        self.debt += 8
        elapsed = (self.clock.monotonic_ns() - self.started_ns) // 1_000_000
        return elapsed if elapsed > 0 else 0

    # sdk.md §9.1: wall-clock ms since the Unix epoch, 0 before 1970
    def sf_now_unix_ms(self) -> int:
        self.debt += 8
        now = self.clock.unix_ms()
        return now if now > 0 else 0

    # ------------------------------------------------------------ §9.2 config, lifetime

    # sdk.md §9.2: a new handle to a copy of the config on every call; SF_LIMIT when full
    def sf_config(self) -> int:
        self.debt += 8
        return self._new(self.config)

    # sdk.md §9.2, §5: 0, or SF_INVALID for an unknown/dropped/foreign handle
    def sf_drop(self, handle: int) -> int:
        self.debt += 8
        return self.table.drop(handle)

    # ------------------------------------------------------------ §9.3 logs

    # sdk.md §9.3: length > 1024 → SF_LIMIT; text → fault; > 10 per window → SF_LIMIT; queue full → SF_LIMIT
    def sf_log_raw(self, message: int, length: int) -> int:
        self.debt += 8
        if length > MAX_LOG:
            return self._refuse_log("length")
        text = self._text(message, length, "sf_log_raw", "message")
        if not self._log_admitted():
            return self._refuse_log("rate")
        if self.log_sink is not None and self.log_sink(text) is False:
            self.logs_dropped += 1
            return SF_LIMIT
        return 0

    def _refuse_log(self, reason: str) -> int:
        """A line refused by sdk.md §9.3 (too long, over the rate): counted and told, so the owner hears of it."""
        self.logs_refused += 1
        if self.log_refused is not None:
            try:
                self.log_refused(reason)
            except Exception:  # a broken callback must not fail the guest
                logging.getLogger("wakeful.runtime").exception("log_refused callback failed")
        return SF_LIMIT

    # sdk.md §9.3 step 3: the window starts at the first attempt and restarts once >= 1 s has passed
    def _log_admitted(self) -> bool:
        now = self.clock.monotonic_ns()
        if self._log_window_ns is None or now - self._log_window_ns >= LOG_WINDOW_NS:
            self._log_window_ns = now
            self._log_count = 0
        self._log_count += 1
        return self._log_count <= LOG_RATE

    # ------------------------------------------------------------ §9.4 reading JSON

    # sdk.md §9.4: length > 16384 → SF_LIMIT; not UTF-8 → fault; syntax → SF_INVALID; limits → SF_LIMIT
    def sf_json_parse(self, text: int, length: int) -> int:
        self.debt += 8
        if length > MAX_REGION:
            return SF_LIMIT
        source = self._text(text, length, "sf_json_parse", "JSON text")
        try:
            box = jsonval.parse(source)
        except jsonval.JsonLimitError:
            return SF_LIMIT
        except jsonval.JsonError:
            return SF_INVALID
        return self._new(box)

    # sdk.md §9.4: key text → fault; not an object or key absent → SF_INVALID; a copy of the member
    def sf_json_get_raw(self, obj: int, key: int, length: int) -> int:
        self.debt += 8
        name = self._text(key, length, "sf_json_get_raw", "key")
        box = self.table.json(obj)
        if box is None or type(box.value) is not dict or name not in box.value:
            return SF_INVALID
        return self._new(jsonval.part_of(box.value[name]))

    # sdk.md §9.4: not an array or index >= length → SF_INVALID; a copy of the element
    def sf_json_at(self, array: int, index: int) -> int:
        self.debt += 8
        box = self.table.json(array)
        if box is None or type(box.value) is not list or index >= len(box.value):
            return SF_INVALID
        return self._new(jsonval.part_of(box.value[index]))

    # sdk.md §9.4: 0..5; bytes or unknown → SF_INVALID
    def sf_json_kind(self, value: int) -> int:
        self.debt += 8
        box = self.table.json(value)
        return SF_INVALID if box is None else _KIND[type(box.value)]

    # sdk.md §9.4: integer in i64 range → 0 and 8 bytes LE at out; else SF_INVALID (nothing written)
    def sf_json_i64(self, value: int, out: int) -> int:
        self.debt += 8
        box = self.table.json(value)
        if box is None or type(box.value) is not int or not -_SIGN <= box.value < _SIGN:
            return SF_INVALID
        index = self._write(out, 8, "sf_json_i64")
        _I64.pack_into(self._mem, index, box.value)
        return 0

    # sdk.md §9.4: 1 or 0; not a boolean → SF_INVALID
    def sf_json_bool(self, value: int) -> int:
        self.debt += 8
        box = self.table.json(value)
        if box is None or type(box.value) is not bool:
            return SF_INVALID
        return 1 if box.value else 0

    # sdk.md §9.4: not a string → SF_INVALID; capacity > 16384 → SF_LIMIT; region → fault; full length
    def sf_json_read_string(self, value: int, out: int, capacity: int) -> int:
        self.debt += 8
        box = self.table.json(value)
        if box is None or type(box.value) is not str:
            return SF_INVALID
        if capacity > MAX_REGION:
            return SF_LIMIT
        if capacity == 0:
            return len(box.value.encode("utf-8"))
        index = self._write(out, capacity, "sf_json_read_string")
        data = box.value.encode("utf-8")
        self._store(index, data[:capacity])
        return len(data)

    # sdk.md §9.4: key/value text → fault; not an object, key absent, not a string → SF_INVALID
    def sf_json_string_equals_raw(self, obj: int, key: int, key_len: int, value: int, value_len: int) -> int:
        self.debt += 8
        helper = "sf_json_string_equals_raw"
        name = self._text(key, key_len, helper, "key")
        wanted = self._text(value, value_len, helper, "value")
        box = self.table.json(obj)
        if box is None or type(box.value) is not dict:
            return SF_INVALID
        member = box.value.get(name, _ABSENT)
        if type(member) is not str:
            return SF_INVALID
        return 1 if member == wanted else 0

    # ------------------------------------------------------------ §9.5 building JSON

    # sdk.md §9.5: {} / [] / null, SF_LIMIT when the table is full; constants cost 8 (nothing copied)
    def sf_json_object(self) -> int:
        self.debt += 8
        return self.table.add(_EMPTY_OBJECT)

    def sf_json_array(self) -> int:
        self.debt += 8
        return self.table.add(_EMPTY_ARRAY)

    def sf_json_null(self) -> int:
        self.debt += 8
        return self.table.add(_NULL)

    # sdk.md §9.5: text → fault; encoded string (quotes, escapes) > 16384 → SF_LIMIT
    def sf_json_string_raw(self, value: int, length: int) -> int:
        self.debt += 8
        text = self._text(value, length, "sf_json_string_raw", "string")
        size = len(jsonval.encode(text))
        if size > MAX_BYTES:
            return SF_LIMIT
        return self._new(Json(text, size, 1, 0, footprint.str_cost(text)))

    # sdk.md §9.5: an integer (the argument read as i64)
    def sf_json_number(self, value: int) -> int:
        self.debt += 8
        number = value - (1 << 64) if value >= _SIGN else value
        return self.table.add(Json(number, len(str(number)), 1, 0, footprint.NUMBER))

    # sdk.md §9.5: true if non-zero
    def sf_json_boolean(self, value: int) -> int:
        self.debt += 8
        return self.table.add(_TRUE if value else _FALSE)

    # sdk.md §9.5: key → fault; bad handles → SF_INVALID; result over limits → SF_LIMIT, object unchanged
    def sf_json_set_raw(self, obj: int, key: int, length: int, value: int) -> int:
        self.debt += 8
        name = self._text(key, length, "sf_json_set_raw", "key")
        item = self.table.json(value)
        box = self.table.json(obj)
        if item is None or box is None or type(box.value) is not dict:
            return SF_INVALID
        self.debt += min(box.nodes + item.nodes, 2 * MAX_NODES)
        return self._store_built(obj, jsonval.with_member(box, name, item))

    # sdk.md §9.5: as for set, with an array; appends a copy
    def sf_json_push(self, array: int, value: int) -> int:
        self.debt += 8
        item = self.table.json(value)
        box = self.table.json(array)
        if item is None or box is None or type(box.value) is not list:
            return SF_INVALID
        self.debt += min(box.nodes + item.nodes, 2 * MAX_NODES)
        return self._store_built(array, jsonval.appended(box, item))

    def _store_built(self, handle: int, result: Json) -> int:
        """Store a built value under ``handle`` if it is within the limits (sdk.md §9.5, §6), else SF_LIMIT."""
        if not result.within_limits():
            return SF_LIMIT
        return self.table.replace(handle, result)

    # sdk.md §9.5: a new bytes handle with the compact encoding; non-JSON → SF_INVALID
    def sf_json_dump(self, value: int) -> int:
        self.debt += 8
        box = self.table.json(value)
        if box is None:
            return SF_INVALID
        handle = self.table.add(jsonval.encode(box.value))
        if handle > 0:
            self.debt += min(box.nodes, MAX_NODES)
        return handle

    # ------------------------------------------------------------ §9.6 bytes

    # sdk.md §9.6: length > 16384 → SF_LIMIT; region → fault; any bytes
    def sf_bytes(self, data: int, length: int) -> int:
        self.debt += 8
        if length > MAX_REGION:
            return SF_LIMIT
        if length == 0:
            return self.table.add(b"")
        index = self._read(data, length, "sf_bytes")
        return self.table.add(bytes(self._mem[index:index + length]))

    # sdk.md §9.6: bytes length, string UTF-8 length, array elements, object members
    def sf_bytes_len(self, handle: int) -> int:
        self.debt += 8
        entry = self.table.get(handle)
        if entry is None:
            return SF_INVALID
        if not isinstance(entry, Json):
            return len(entry)
        value = entry.value
        if type(value) is str:
            return len(value.encode("utf-8"))
        if type(value) is list or type(value) is dict:
            return len(value)
        return SF_INVALID

    # sdk.md §9.6: capacity > 16384 → SF_LIMIT; not bytes or offset > len → SF_INVALID; copied span writable
    def sf_bytes_read(self, handle: int, offset: int, out: int, capacity: int) -> int:
        self.debt += 8
        if capacity > MAX_REGION:
            return SF_LIMIT
        entry = self.table.get(handle)
        if entry is None or isinstance(entry, Json) or offset > len(entry):
            return SF_INVALID
        count = min(capacity, len(entry) - offset)
        if count == 0:
            return 0
        index = self._write(out, count, "sf_bytes_read")
        self._store(index, entry[offset:offset + count])
        return count

    # ------------------------------------------------------------ §9.7 memory helpers

    # sdk.md §9.7: length > 16384, invalid regions, overlapping regions → faults; returns dest
    def memcpy(self, dest: int, source: int, length: int) -> int:
        return self._copy("memcpy", dest, source, length, overlap=False)

    # sdk.md §9.7 (extension): overlap allowed
    def memmove(self, dest: int, source: int, length: int) -> int:
        return self._copy("memmove", dest, source, length, overlap=True)

    # sdk.md §9.7: fills with the low byte of value
    def memset(self, dest: int, value: int, length: int) -> int:
        if self._no_bytes("memset", length):
            return dest
        d = self._write(dest, length, "memset")
        self._store(d, bytes((value & 0xFF,)) * length)
        return dest

    # sdk.md §9.7: -1, 0 or 1 (unsigned byte order)
    def memcmp(self, a: int, b: int, length: int) -> int:
        if self._no_bytes("memcmp", length):
            return 0
        i = self._read(a, length, "memcmp")
        j = self._read(b, length, "memcmp")
        left = self._mem[i:i + length]
        right = self._mem[j:j + length]
        return (left > right) - (left < right)

    def _copy(self, helper: str, dest: int, source: int, length: int, *, overlap: bool) -> int:
        """memcpy/memmove: both regions checked (destination first), then overlap unless allowed."""
        if self._no_bytes(helper, length):
            return dest
        d = self._write(dest, length, helper)
        s = self._read(source, length, helper)
        if not overlap and dest < source + length and source < dest + length:
            raise GuestFault("HELPER_OVERLAP", f"{helper}: overlapping regions", address=dest, size=length,
                             helper=helper)
        self._store(d, self._mem[s:s + length])  # the right side is a copy
        return dest

    def _no_bytes(self, helper: str, length: int) -> bool:
        """The §9.7 prologue: charge the call, fault a length over the limit; True when ``length`` is 0."""
        self.debt += 8
        _check_size(helper, length)
        return length == 0

    # ------------------------------------------------------------ suspending helpers (for the scheduler)

    # sdk.md §9.3 steps 1-5 with the policy of runtime-protocol.md §9.1
    def begin_host_call(self, cap: int, cap_len: int, params: int, timeout_ms: int,
                        pending: int, copy: bool = True) -> int | HostCallRequest:
        """Validate ``sf_host_call_raw``; ``pending`` is the runtime's count of pending host calls.

        Returns a negative status for the guest, or the request to send. Raises ``GuestFault`` for a bad
        capability text (step 1). ``copy=False`` hands the host the boxed value itself (boxes are never
        mutated) for a host that only reads it before returning (the stdio server encodes it at once).
        """
        name = self._text(cap, cap_len, "sf_host_call_raw", "capability")
        box = self.table.json(params)
        if box is None:
            return SF_INVALID
        if not self.policy.allows(name, box.value):
            return SF_DENIED
        if pending >= MAX_PENDING_HOST_CALLS:
            return SF_LIMIT
        if timeout_ms == 0:
            return SF_TIMEOUT
        snapshot: JsonValue = jsonval.copy_of(box) if copy else box.value  # the host gets its own copy
        return HostCallRequest(name, snapshot, clamp_ms(timeout_ms))

    # sdk.md §9.3 step 6, runtime-protocol.md §9.4: result → handle; over limits → SF_LIMIT; error → SF_HOST_ERROR
    def finish_host_call(self, result: object) -> int:
        """The guest's r0 for a host call answered with ``result`` (a JSON value, or an exception = error).

        A value that is not JSON at all (a tuple, NaN, a non-string key) counts as an error reply.
        """
        if isinstance(result, BaseException):
            return SF_HOST_ERROR
        try:
            box = jsonval.from_python(result)
        except jsonval.JsonLimitError:
            return SF_LIMIT
        except jsonval.JsonError:
            return SF_HOST_ERROR
        return self.table.add(box)

    # sdk.md §9.2, runtime-protocol.md §8: the envelope is exempt from the depth and node re-check
    def event_to_handle(self, envelope: Json | JsonValue) -> int:
        """A new handle for a popped mailbox envelope ``{event_id, topic, payload}``, or ``SF_LIMIT``."""
        box = envelope if isinstance(envelope, Json) else jsonval.from_python(envelope, limits=False)
        return self.table.add(box)

    def sleep_ms(self, milliseconds: int) -> int:
        """sdk.md §9.1: the clamped ``sf_sleep_ms`` delay."""
        return clamp_ms(milliseconds)

    def event_timeout_ms(self, milliseconds: int) -> int:
        """sdk.md §9.2: the clamped ``sf_event_next`` timeout (0 means: do not wait)."""
        return clamp_ms(milliseconds)


_ABSENT = object()


def _pointer_fault(helper: str, ptr: int, length: int) -> GuestFault:
    # vm.md §8: HELPER_POINTER "sf_log_raw: invalid pointer 0x1 length 5"
    return GuestFault("HELPER_POINTER", f"{helper}: invalid pointer {ptr:#x} length {length}",
                      address=ptr, size=length, helper=helper)


# vm.md §8: HELPER_SIZE "memset: length 20000 exceeds 16384"
def _check_size(helper: str, length: int) -> None:
    if length > MAX_REGION:
        raise GuestFault("HELPER_SIZE", f"{helper}: length {length} exceeds {MAX_REGION}",
                         size=length, helper=helper)
