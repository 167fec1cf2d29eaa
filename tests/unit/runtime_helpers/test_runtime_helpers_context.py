"""GuestContext called directly (no VM): region rules, fuel charges, clock, logs and host-call steps.

The same helpers run under compiled C guests in tests/integration/runtime_helpers; these tests pin the
exact numbers (charges, clamps, windows) that are awkward to observe from inside a guest.
"""

from __future__ import annotations

import pytest

from wakeful.errors import GuestFault, HostCallError
from wakeful.runtime import jsonval
from wakeful.runtime.handles import HandleSpace, entry_size
from wakeful.runtime.helpers import (
    SF_DENIED,
    SF_HOST_ERROR,
    SF_INVALID,
    SF_LIMIT,
    SF_TIMEOUT,
    GuestContext,
    HostCallRequest,
)
from wakeful.vm.guest import SYNC_HELPERS
from wakeful.vm.isa import BASE
from wakeful.vm.linked import Layout

R, D, S = 64, 64, 32768 + 64
LAYOUT = Layout(rodata_bytes=R, data_bytes=D, bss_bytes=0, stack_bytes=S, image=b"")
W = BASE + R  # first writable address
END = LAYOUT.end


class Clock:
    def __init__(self) -> None:
        self.ns = 5_000_000_000
        self.unix = 1_767_225_600_000

    def monotonic_ns(self) -> int:
        return self.ns

    def unix_ms(self) -> int:
        return self.unix


def make(**kw: object) -> GuestContext:
    ctx = GuestContext(kw.pop("space", HandleSpace()), "o1", layout=LAYOUT, **kw)  # type: ignore[arg-type]
    ctx.mem = bytearray(LAYOUT.size)
    return ctx


def put(ctx: GuestContext, addr: int, data: bytes) -> int:
    ctx.mem[addr - BASE:addr - BASE + len(data)] = data
    return addr


def test_helper_returns_bound_callables_of_the_right_arity() -> None:
    ctx = make()
    for name, arity in SYNC_HELPERS.items():
        fn = ctx.helper(name)
        assert fn.__code__.co_argcount - 1 == arity, name  # type: ignore[attr-defined]
    for name in ("sf_sleep_ms", "sf_host_call_raw", "bpf_map_lookup_elem", "__init__"):
        with pytest.raises(KeyError):
            ctx.helper(name)


@pytest.mark.parametrize(
    ("ptr", "length"),
    [(0, 1), (BASE - 1, 1), (BASE - 1, 2), (END - 4, 8), (END, 1), (W, 2**64 - 1), (2**64 - 1, 1), (2**63, 8)],
)
def test_bad_read_regions_fault(ptr: int, length: int) -> None:
    ctx = make()
    with pytest.raises(GuestFault) as info:
        ctx.sf_bytes(ptr, min(length, 16384)) if length <= 16384 else ctx.memcmp(ptr, W, length)
    fault = info.value
    assert fault.fault_code in ("HELPER_POINTER", "HELPER_SIZE")
    if fault.fault_code == "HELPER_POINTER":
        assert fault.message == f"sf_bytes: invalid pointer {ptr:#x} length {min(length, 16384)}"
        assert (fault.address, fault.helper) == (ptr, "sf_bytes")


def test_rodata_is_readable_not_writable_and_edges_are_exact() -> None:
    ctx = make()
    assert ctx.memcmp(BASE, W, 8) == 0  # rodata readable
    assert ctx.sf_bytes(END - 1, 1) > 0  # last byte readable
    with pytest.raises(GuestFault, match=r"memset: invalid pointer 0x1003f length 1") as info:
        ctx.memset(W - 1, 0, 1)
    assert info.value.fault_code == "HELPER_POINTER"
    assert ctx.memset(W, 7, 16) == W and ctx.mem[R:R + 16] == b"\x07" * 16
    assert ctx.memset(END - 16, 0x1FF, 16) == END - 16 and ctx.mem[-16:] == b"\xff" * 16


def test_zero_length_with_a_wild_pointer_is_accepted() -> None:
    ctx = make()
    assert ctx.memcpy(0, 2**64 - 1, 0) == 0
    assert ctx.memmove(3, 0, 0) == 3
    assert ctx.memset(1, 0, 0) == 1
    assert ctx.memcmp(0, 1, 0) == 0
    assert ctx.sf_bytes_len(ctx.sf_bytes(0, 0)) == 0
    assert ctx.sf_log_raw(0, 0) == 0
    assert ctx.sf_json_read_string(ctx.sf_json_string_raw(0, 0), 1, 0) == 0


def test_memory_helper_sizes_fault_before_anything() -> None:
    ctx = make()
    for name in ("memcpy", "memmove", "memcmp"):
        with pytest.raises(GuestFault, match=f"{name}: length 16385 exceeds 16384") as info:
            getattr(ctx, name)(W, W + 16384 + 1, 16385)
        assert info.value.fault_code == "HELPER_SIZE"
    with pytest.raises(GuestFault, match="memset: length 20000 exceeds 16384"):
        ctx.memset(W, 0, 20000)


def test_memcpy_overlap_faults_and_memmove_is_correct() -> None:
    ctx = make()
    put(ctx, W, b"abcdefgh")
    with pytest.raises(GuestFault, match="memcpy: overlapping regions") as info:
        ctx.memcpy(W + 2, W, 4)
    assert info.value.fault_code == "HELPER_OVERLAP"
    with pytest.raises(GuestFault, match="overlapping"):
        ctx.memcpy(W, W, 1)
    assert ctx.memcpy(W + 4, W, 4) == W + 4  # adjacent: fine
    put(ctx, W, b"abcdefgh")
    ctx.memmove(W + 2, W, 6)
    assert ctx.mem[R:R + 8] == b"ababcdef"
    ctx.memmove(W, W + 2, 6)
    assert ctx.mem[R:R + 8] == b"abcdefef"


def test_memcmp_is_unsigned_and_signed_result() -> None:
    ctx = make()
    put(ctx, W, b"\x01\x80")
    put(ctx, W + 8, b"\x01\x7f")
    assert ctx.memcmp(W, W + 8, 2) == 1 and ctx.memcmp(W + 8, W, 2) == -1 and ctx.memcmp(W, W, 2) == 0


# vm.md §6.3 charges
def test_fuel_charges() -> None:
    ctx = make(config={"a": [1, 2, 3]})
    ctx.sf_now_mono_ms()
    assert ctx.debt == 8
    ctx.debt = 0
    ctx.memcpy(W, W + 16384, 16384)
    assert ctx.debt == 8 + 1024 + 1024
    ctx.debt = 0
    ctx.memset(W, 0, 17)
    assert ctx.debt == 8 + 2
    ctx.debt = 0
    h = ctx.sf_config()
    assert ctx.debt == 8 + 5
    ctx.debt = 0
    ctx.sf_json_dump(h)
    assert ctx.debt == 8 + 5
    ctx.debt = 0
    text = b'[1,2,{"x":null}]'
    ctx.sf_json_parse(put(ctx, W, text), len(text))
    assert ctx.debt == 8 + 1 + 5
    ctx.debt = 0
    assert ctx.sf_log_raw(W, 2000) == SF_LIMIT
    assert ctx.debt == 8  # memory not read


def test_clock_helpers() -> None:
    clock = Clock()
    ctx = make(clock=clock)
    assert ctx.sf_now_mono_ms() == 0
    clock.ns += 1_500_000_000
    assert ctx.sf_now_mono_ms() == 1500
    ctx.mark_started()
    assert ctx.sf_now_mono_ms() == 0
    assert ctx.sf_now_unix_ms() == 1_767_225_600_000
    clock.unix = -5
    assert ctx.sf_now_unix_ms() == 0


# sdk.md §9.3 log rate: 10 per window; the window restarts once >= 1 s passed since it began
def test_log_window() -> None:
    clock = Clock()
    seen: list[str] = []
    ctx = make(clock=clock, log=seen.append)
    msg = put(ctx, W, b"hi")
    assert [ctx.sf_log_raw(msg, 2) for _ in range(12)] == [0] * 10 + [SF_LIMIT] * 2
    clock.ns += 999_999_999
    assert ctx.sf_log_raw(msg, 2) == SF_LIMIT
    clock.ns += 1
    assert [ctx.sf_log_raw(msg, 2) for _ in range(11)] == [0] * 10 + [SF_LIMIT]
    assert seen == ["hi"] * 20
    assert ctx.sf_log_raw(msg, 1025) == SF_LIMIT  # length first, not counted as an attempt
    clock.ns += 1_000_000_000
    assert ctx.sf_log_raw(msg, 1024) == 0


def test_log_queue_full_is_dropped_and_counted() -> None:
    ctx = make(log=lambda message: False)
    assert ctx.sf_log_raw(put(ctx, W, b"x"), 1) == SF_LIMIT
    assert ctx.logs_dropped == 1


def test_config_copies_are_independent() -> None:
    space = HandleSpace()
    ctx = make(config={"k": []}, space=space)
    a, b = ctx.sf_config(), ctx.sf_config()
    assert a != b
    inner = ctx.sf_json_get_raw(a, put(ctx, W, b"k"), 1)
    assert ctx.sf_json_push(inner, ctx.sf_json_null()) == 0
    assert ctx.sf_json_set_raw(a, W, 1, inner) == 0
    assert jsonval.dumps(ctx.table.json(a)) == '{"k":[null]}'  # type: ignore[arg-type]
    assert jsonval.dumps(ctx.table.json(b)) == '{"k":[]}'  # type: ignore[arg-type]
    assert ctx.config.value == {"k": []}
    other = make(config=None, space=space)
    foreign = other.sf_config()
    assert other.sf_json_kind(foreign) == 0
    assert ctx.sf_json_kind(foreign) == SF_INVALID and ctx.sf_drop(foreign) == SF_INVALID
    assert other.sf_json_kind(a) == SF_INVALID


def test_set_object_into_itself_stores_its_current_value() -> None:
    ctx = make()
    obj = ctx.sf_json_object()
    key = put(ctx, W, b"self")
    assert ctx.sf_json_set_raw(obj, key, 4, obj) == 0
    assert ctx.sf_json_set_raw(obj, key, 4, obj) == 0
    assert jsonval.dumps(ctx.table.json(obj)) == '{"self":{"self":{}}}'  # type: ignore[arg-type]


# sdk.md §9.3 steps 1-5
def test_begin_host_call_steps() -> None:
    ctx = make(capabilities=[{"name": "tool", "arguments": {"n": 1}}])
    cap = put(ctx, W, b"tool")
    params = ctx.sf_json_parse(put(ctx, W + 16, b'{"n":1,"x":[2]}'), 15)
    wrong = ctx.sf_json_parse(put(ctx, W + 48, b'{"n":1.0}'), 9)
    blob = ctx.sf_bytes(W, 4)
    with pytest.raises(GuestFault) as info:
        ctx.begin_host_call(put(ctx, W + 64, b"\xc0\xae"), 2, params, 10, pending=0)
    assert info.value.fault_code == "HELPER_TEXT" and info.value.helper == "sf_host_call_raw"
    assert ctx.begin_host_call(cap, 4, blob, 10, pending=0) == SF_INVALID
    assert ctx.begin_host_call(cap, 4, 999, 10, pending=0) == SF_INVALID
    assert ctx.begin_host_call(cap, 4, wrong, 10, pending=0) == SF_DENIED
    assert ctx.begin_host_call(cap, 3, params, 10, pending=0) == SF_DENIED
    assert ctx.begin_host_call(cap, 4, params, 10, pending=16384) == SF_LIMIT
    assert ctx.begin_host_call(cap, 4, params, 0, pending=16383) == SF_TIMEOUT
    request = ctx.begin_host_call(cap, 4, params, 2**64 - 1, pending=16383)
    assert request == HostCallRequest("tool", {"n": 1, "x": [2]}, 86_400_000)
    assert isinstance(request, HostCallRequest)
    request.arguments["x"].append(3)  # type: ignore[index, union-attr]
    assert jsonval.dumps(ctx.table.json(params)) == '{"n":1,"x":[2]}'  # type: ignore[arg-type]
    # a host that only reads before returning (the stdio server) borrows the box's own value: no copy
    borrowed = ctx.begin_host_call(cap, 4, params, 10, pending=0, copy=False)
    assert isinstance(borrowed, HostCallRequest)
    assert borrowed.arguments is ctx.table.json(params).value  # type: ignore[union-attr]
    copied = ctx.begin_host_call(cap, 4, params, 10, pending=0)
    assert isinstance(copied, HostCallRequest) and copied.arguments is not borrowed.arguments


# sdk.md §9.3 step 6, vm.md §9.1 item 21
def test_finish_host_call_outcomes() -> None:
    ctx = make()
    h = ctx.finish_host_call({"ok": [1, 2]})
    assert h > 0 and ctx.sf_json_kind(h) == 5
    assert ctx.finish_host_call("x" * 16382) > 0  # 16,384 encoded bytes
    assert ctx.finish_host_call("x" * 16383) == SF_LIMIT  # one byte over
    assert ctx.finish_host_call(jsonval.parse("[" * 33 + "1" + "]" * 33, limits=False).value) == SF_LIMIT
    assert ctx.finish_host_call(list(range(4096))) == SF_LIMIT
    assert ctx.finish_host_call(HostCallError("tool_failed", "boom")) == SF_HOST_ERROR
    assert ctx.finish_host_call((1, 2)) == SF_HOST_ERROR
    assert ctx.finish_host_call(float("nan")) == SF_HOST_ERROR
    for _ in range(126):
        assert ctx.sf_json_null() > 0
    assert len(ctx.table) == 128
    assert ctx.finish_host_call(1) == SF_LIMIT


def test_event_envelope_is_exempt_from_depth_and_nodes() -> None:
    ctx = make()
    payload = jsonval.parse("[" * 32 + "1" + "]" * 32).value
    h = ctx.event_to_handle({"event_id": "e1", "topic": "t", "payload": payload})
    assert h > 0 and ctx.table.json(h).depth == 33  # type: ignore[union-attr]
    got = ctx.sf_json_get_raw(h, put(ctx, W, b"payload"), 7)
    assert got > 0 and ctx.sf_json_kind(got) == 4
    boxed = jsonval.from_python({"event_id": "e2", "topic": "t", "payload": list(range(4095))}, limits=False)
    assert ctx.event_to_handle(boxed) > 0
    # building on top of the deep envelope is over the limits
    assert ctx.sf_json_set_raw(h, put(ctx, W, b"x"), 1, ctx.sf_json_null()) == SF_LIMIT


def test_clamps() -> None:
    ctx = make()
    assert ctx.sleep_ms(2**64 - 1) == 86_400_000 and ctx.sleep_ms(5) == 5
    assert ctx.event_timeout_ms(86_400_001) == 86_400_000 and ctx.event_timeout_ms(0) == 0


def test_close_releases_handles_and_memory() -> None:
    space = HandleSpace()
    ctx = make(space=space)
    ctx.sf_bytes(W, 100)
    charged = entry_size(bytes(100))
    assert space.live_bytes == charged and ctx.handle_bytes == charged and ctx.handle_count == 1
    ctx.close()
    assert space.live_bytes == 0 and space.live_handles == 0 and len(ctx.mem) == 0


# vm.md §6.3 / vm/guest.py: no call may charge more than the helper's maximum (plain-function bounds)
def test_worst_case_charges_stay_within_helper_max_charge() -> None:
    from wakeful.vm.guest import HELPER_MAX_CHARGE

    ctx = make(config=list(range(4095)))
    wide = jsonval.dumps(list(range(4095))).encode()
    text = put(ctx, W, wide)
    big = ctx.sf_json_parse(text, len(wide))
    env = ctx.event_to_handle(jsonval.from_python({"event_id": "e", "topic": "t", "payload": list(range(4095))},
                                                  limits=False))
    key = put(ctx, W + 16384, b"k" * 16384)
    s = ctx.sf_json_string_raw(W + 16384, 16382)
    obj = ctx.sf_json_object()
    arr = ctx.sf_json_array()
    calls: list[tuple[str, tuple[int, ...]]] = [
        ("sf_now_mono_ms", ()), ("sf_now_unix_ms", ()), ("sf_config", ()), ("sf_json_object", ()),
        ("sf_json_array", ()), ("sf_json_null", ()), ("sf_json_kind", (big,)), ("sf_json_bool", (big,)),
        ("sf_json_number", (5,)), ("sf_json_boolean", (1,)), ("sf_json_dump", (env,)), ("sf_json_dump", (big,)),
        ("sf_bytes_len", (s,)), ("sf_log_raw", (key, 1024)), ("sf_json_parse", (text, len(wide))),
        ("sf_json_at", (big, 5)), ("sf_json_i64", (ctx.sf_json_number(1), W)),
        ("sf_json_string_raw", (W + 16384, 16382)), ("sf_json_push", (big, big)), ("sf_json_push", (arr, big)),
        ("sf_bytes", (W, 16384)), ("sf_json_get_raw", (env, put(ctx, W + 100, b"payload"), 7)),
        ("sf_json_read_string", (s, W, 16384)), ("memcpy", (W, W + 16384, 16384)),
        ("memmove", (W, W + 1, 16384)), ("memset", (W, 0, 16384)), ("memcmp", (W, W + 16384, 16384)),
        ("sf_json_set_raw", (obj, key, 16384, big)), ("sf_json_set_raw", (big, key, 16384, big)),
        ("sf_bytes_read", (ctx.sf_bytes(W, 16384), 0, W + 16384, 16384)),
        ("sf_json_string_equals_raw", (obj, key, 16384, W + 16384, 16384)), ("sf_drop", (arr,)),
    ]
    seen = set()
    for name, args in calls:
        ctx.debt = 0
        ctx.helper(name)(*args)
        assert 8 <= ctx.debt <= HELPER_MAX_CHARGE[name], (name, ctx.debt)
        seen.add(name)
    assert seen == set(SYNC_HELPERS)


def test_squeeze_takes_the_stack_bottom_zeros_out_and_unsqueeze_restores_every_byte() -> None:
    """issue 16: a waiting guest's memory without the zero bottom of its stack, whole again before it runs."""
    ctx = make()
    mem = ctx.mem
    put(ctx, BASE + 5, b"ro")
    put(ctx, W + 3, b"data")
    top = END - 200  # the frames a wait leaves live sit at the top of the stack
    put(ctx, top, bytes(range(1, 101)) + bytes(50) + b"\x07")
    whole = bytes(mem)
    zeros = top - (BASE + R + D)
    assert ctx.squeeze() == zeros
    assert ctx.mem is mem and len(mem) == LAYOUT.size - zeros and ctx.squeezed == zeros
    assert ctx.squeeze() == 0  # once
    ctx.unsqueeze()
    assert ctx.mem is mem and bytes(mem) == whole and ctx.squeezed == 0
    put(ctx, END - 8, b"\x01" * 8)  # the store path (memoryview) works on the whole memory again
    assert ctx.mem[-8:] == b"\x01" * 8


def test_squeeze_leaves_a_stack_with_few_zero_bytes_alone() -> None:
    ctx = make()
    put(ctx, BASE + R + D + 100, b"\x01")
    assert ctx.squeeze() == 0 and len(ctx.mem) == LAYOUT.size


def test_squeeze_leaves_a_memory_someone_holds_a_view_of_whole() -> None:
    ctx = make()
    with memoryview(ctx.mem):
        assert ctx.squeeze() == 0 and len(ctx.mem) == LAYOUT.size and ctx.squeezed == 0
    assert ctx.squeeze() > 0


@pytest.mark.parametrize("first", [0, 1, 511, 512, 513, 2000, S - 1, S])
@pytest.mark.parametrize("byte", [b"\x01", b"\x80", b" ", b"\xff"])
def test_squeeze_takes_exactly_the_leading_zero_bytes_of_the_stack(first: int, byte: bytes) -> None:
    """The count of the stack's leading zero bytes (one C pass since issue 16) is ``lstrip``'s: the first nonzero
    byte at ``first`` (any value) stays, with every byte after it."""
    ctx = make()
    start = BASE + R + D
    if first < S:
        put(ctx, start + first, byte + bytes(range(1, 1 + min(40, S - first - 1))))
    whole = bytes(ctx.mem)
    stack = whole[start - BASE:]
    expected = len(stack) - len(stack.lstrip(b"\0"))
    assert ctx.squeeze() == (expected if expected >= 512 else 0)
    ctx.unsqueeze()
    assert bytes(ctx.mem) == whole
