"""Every sf_* helper exercised by clang-built guests through the real VM and a real GuestContext.

Each guest checks its own expectations with ``CHECK`` and returns the failing source line (0 = all
passed); fault cases are asserted on the ``GuestFault`` the VM raises. vm.md §9.1 items 14-22, sdk.md §9.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import rh_driver
from rh_driver import ManualClock, assert_passes, run

from wakeful.errors import HostCallError
from wakeful.runtime import jsonval
from wakeful.runtime.handles import MAX_HANDLE, HandleSpace
from wakeful.runtime.helpers import SF_DENIED, SF_LIMIT, HostCallRequest

pytestmark = pytest.mark.integration

Compile = Callable[..., bytes]
ENGINES = ["translate", "interp"]


@pytest.mark.parametrize("engine", ENGINES)
def test_json_reading(compile_c: Compile, engine: str) -> None:
    assert_passes(run(compile_c, "json_read.c", engine=engine), "json_read.c")


@pytest.mark.parametrize("engine", ENGINES)
def test_json_building_dump_and_bytes(compile_c: Compile, engine: str) -> None:
    out = run(compile_c, "json_build.c", engine=engine)
    assert_passes(out, "json_build.c")
    built = jsonval.parse(out.logs[0])  # the guest logged the dump it checked
    assert built.value == {"i": -(2**63), "u": -1, "t": True, "f": False, "z": None,
                           "s": 'a"b\\\nc\x01é', "arr": [1, [], {}], "k": 2}


# vm.md §9.1 item 14 and S4: a handle works only in its object and only until dropped
@pytest.mark.parametrize("engine", ENGINES)
def test_handle_forgery_and_exhaustion(compile_c: Compile, engine: str) -> None:
    space = HandleSpace()
    owner = run(compile_c, "owner.c", space=space, engine=engine)
    assert owner.exit_code is not None and owner.exit_code > 0
    assert owner.ctx is not None and owner.ctx.sf_json_kind(owner.exit_code) == 5  # live in its object
    out = run(compile_c, "handles.c", space=space, config={"foreign": owner.exit_code}, engine=engine)
    assert_passes(out, "handles.c")
    assert out.ctx is not None and len(out.ctx.table) == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_handle_counter_exhaustion(compile_c: Compile, engine: str) -> None:
    out = run(compile_c, "counter.c", space=HandleSpace(first=MAX_HANDLE - 1), engine=engine)
    assert_passes(out, "counter.c")


# vm.md §9.1 item 16
@pytest.mark.parametrize("engine", ENGINES)
def test_json_limits(compile_c: Compile, engine: str) -> None:
    assert_passes(run(compile_c, "limits.c", engine=engine), "limits.c")


def test_zero_length_wild_pointers_bytes_and_memmove(compile_c: Compile) -> None:
    for engine in ENGINES:
        assert_passes(run(compile_c, "faults.c", config={"case": 0}, engine=engine), "faults.c")


TEXT = "HELPER_TEXT"
PTR = "HELPER_POINTER"

# (case, fault code, helper, message pattern); vm.md §9.1 items 17-19, message shapes of vm.md §8
FAULTS = [
    (1, TEXT, "sf_log_raw", r"^sf_log_raw: message is not valid UTF-8$"),
    (2, TEXT, "sf_log_raw", "not valid UTF-8"),
    (3, TEXT, "sf_log_raw", "not valid UTF-8"),
    (4, TEXT, "sf_json_get_raw", r"^sf_json_get_raw: key is not valid UTF-8$"),
    (5, TEXT, "sf_json_set_raw", "key is not valid UTF-8"),
    (6, TEXT, "sf_json_string_equals_raw", "key is not valid UTF-8"),
    (7, TEXT, "sf_json_string_equals_raw", "value is not valid UTF-8"),
    (8, TEXT, "sf_json_string_raw", "not valid UTF-8"),
    (9, TEXT, "sf_json_parse", "not valid UTF-8"),
    (10, TEXT, "sf_host_call_raw", "capability is not valid UTF-8"),
    (11, PTR, "sf_log_raw", r"^sf_log_raw: invalid pointer 0x0 length 5$"),
    (12, PTR, "sf_bytes", r"^sf_bytes: invalid pointer 0xffff length 2$"),
    (13, PTR, "sf_bytes", r"length 8$"),
    (14, PTR, "memcpy", r"^memcpy: invalid pointer 0x1[0-9a-f]{4} length 4$"),
    (15, PTR, "sf_json_read_string", "length 3"),
    (16, PTR, "sf_json_i64", "length 8"),
    (17, PTR, "sf_bytes_read", "length 4"),
    (18, PTR, "sf_json_get_raw", "length 18446744073709551615"),
    (19, PTR, "sf_json_i64", "length 8"),
    (20, PTR, "sf_bytes", "length 1"),
    (21, PTR, "memset", r"^memset: invalid pointer 0x8000000000000000 length 8$"),
    (22, TEXT, "sf_json_get_raw", "key is longer than 16384 bytes"),
    (23, "HELPER_OVERLAP", "memcpy", r"^memcpy: overlapping regions$"),
    (24, "HELPER_SIZE", "memset", r"^memset: length 16385 exceeds 16384$"),
    (25, "HELPER_SIZE", "memcmp", r"^memcmp: length 16385 exceeds 16384$"),
    (26, "HELPER_SIZE", "memcpy", "length 16385"),
    (27, "HELPER_SIZE", "memmove", "length 16385"),
    (28, "HELPER_OVERLAP", "memcpy", "overlapping"),
    (29, PTR, "sf_json_read_string", "length 3"),
    (30, TEXT, "sf_host_call_raw", "capability is not valid UTF-8"),
    (31, TEXT, "sf_host_call_raw", "capability is not valid UTF-8"),
    (32, PTR, "sf_host_call_raw", r"^sf_host_call_raw: invalid pointer 0xffff length 4$"),
    (33, TEXT, "sf_json_string_raw", "string is longer than 16384 bytes"),
]


def _fault_facts(fault: Any) -> tuple[Any, ...]:
    return (fault.fault_code, fault.helper, fault.address, fault.size, fault.function, fault.pc, fault.insn,
            fault.message)


@pytest.mark.parametrize(("case", "code", "helper", "pattern"), FAULTS, ids=[f"case{c[0]}" for c in FAULTS])
def test_helper_faults(compile_c: Compile, case: int, code: str, helper: str, pattern: str) -> None:
    out = run(compile_c, "faults.c", config={"case": case})
    assert out.fault is not None, f"no fault, exit {out.exit_code}"
    # vm.md §9.2: the reference interpreter reports the same fault (code, helper, address, function, pc)
    ref = run(compile_c, "faults.c", config={"case": case}, engine="interp")
    assert ref.fault is not None, f"interp: no fault, exit {ref.exit_code}"
    assert _fault_facts(ref.fault) == _fault_facts(out.fault)
    assert ref.logs == out.logs
    fault = out.fault
    assert (fault.fault_code, fault.helper) == (code, helper), fault.message
    assert re.search(pattern, fault.message), fault.message
    assert fault.function == "main"  # the VM located the faulting call
    if code == PTR:
        assert fault.size is not None and fault.address is not None
        assert out.ctx is not None
        if 14 <= case <= 17:  # rodata as a write target: readable, not writable
            assert rh_driver.BASE <= fault.address < out.ctx._wstart
    assert out.logs == []


@pytest.mark.parametrize("engine", ENGINES)
def test_fault_addresses_near_end(compile_c: Compile, engine: str) -> None:
    out = run(compile_c, "faults.c", config={"case": 13}, engine=engine)
    assert out.fault is not None and out.ctx is not None
    end = out.ctx._end
    assert out.fault.address == end - 4 and out.fault.message == f"sf_bytes: invalid pointer {end - 4:#x} length 8"


def _host(request: HostCallRequest) -> Any:
    cap = request.capability
    if cap == "tool.echo":
        return {"echo": cap, "args": request.arguments}
    if cap == "tool.nested":
        return True
    if cap == "tool.fail":
        raise HostCallError("tool_failed", "secret text the guest must not see")
    if cap == "tool.big":
        return "x" * 16383
    if cap == "tool.edge":
        return "x" * 16382
    if cap == "tool.deep":
        return jsonval.parse("[" * 33 + "1" + "]" * 33, limits=False).value
    if cap == "tool.wide":
        return list(range(4096))
    if cap == "tool.weird":
        return (1, 2)
    raise AssertionError(cap)


CAPS = [{"name": "tool.echo", "arguments": {"n": 1}}, {"name": "tool.nested", "arguments": {"o": {"a": [1, True]}}}]
CAPS += [{"name": n} for n in ("tool.fail", "tool.big", "tool.deep", "tool.wide", "tool.weird", "tool.edge")]


# vm.md §9.1 items 20-21, runtime-protocol.md §9.1, sdk.md §9.3
@pytest.mark.parametrize("engine", ENGINES)
def test_host_calls(compile_c: Compile, engine: str) -> None:
    out = run(compile_c, "hostcall.c", capabilities=CAPS, host=_host, engine=engine)
    assert_passes(out, "hostcall.c")
    sent = [(r.capability, r.arguments) for r in out.host_calls]
    assert sent == [
        ("tool.nested", {"o": {"a": [1, True]}}),
        ("tool.echo", {"n": 1, "extra": [2]}),
        ("tool.fail", {"n": 1, "extra": [2]}),
        ("tool.big", {"n": 1, "extra": [2]}),
        ("tool.deep", {"n": 1, "extra": [2]}),
        ("tool.wide", {"n": 1, "extra": [2]}),
        ("tool.weird", {"n": 1, "extra": [2]}),
        ("tool.edge", {"n": 1, "extra": [2]}),
    ]  # nothing was sent for a denied, invalid or zero-timeout call
    assert out.statuses.count(SF_DENIED) == 14
    assert [r.timeout_ms for r in out.host_calls] == [1000, 5000] + [1000] * 6


@pytest.mark.parametrize("engine", ENGINES)
def test_host_call_pending_limit(compile_c: Compile, engine: str) -> None:
    out = run(compile_c, "hostcall.c", capabilities=CAPS, host=_host, pending=16384, engine=engine)
    assert out.host_calls == []
    assert SF_LIMIT in out.statuses


# vm.md §9.1 item 22
@pytest.mark.parametrize("engine", ENGINES)
def test_log_flood(compile_c: Compile, engine: str) -> None:
    out = run(compile_c, "logs.c", engine=engine)
    assert_passes(out, "logs.c")
    assert out.logs == ["flood"] * 10 + ["after é"] + ["more"] * 9


@pytest.mark.parametrize("engine", ENGINES)
def test_log_queue_full_is_limit(compile_c: Compile, engine: str) -> None:
    out = run(compile_c, "logs.c", log_accepts=False, engine=engine)
    assert out.exit_code == 12  # the CHECK on line 12 sees 0 accepted
    assert out.ctx is not None and out.ctx.logs_dropped == 10


@pytest.mark.parametrize("engine", ENGINES)
def test_time_config_events(compile_c: Compile, engine: str) -> None:
    deep = jsonval.parse("[" * 32 + "1" + "]" * 32).value
    events = [
        {"event_id": "e1", "topic": "t", "payload": {"n": 7}},
        jsonval.from_python({"event_id": "e2", "topic": "t", "payload": deep}, limits=False),
        {"event_id": "e3", "topic": "lost", "payload": None},
        {"event_id": "e4", "topic": "z", "payload": None},
    ]
    out = run(compile_c, "events.c", config={"who": "me"}, events=events, clock=ManualClock(), engine=engine)
    assert_passes(out, "events.c")
    assert out.suspensions.count("sf_sleep_ms") == 1 and out.suspensions.count("sf_yield") == 1
    assert out.suspensions.count("sf_event_next") == 6


def test_driver_reports_failing_line() -> None:
    assert rh_driver.failed_line("logs.c", 12).endswith("CHECK(ok == 10 && limited == 990);")


# vm.md §6.3: every helper charges 8 + 1 per 16 bytes per region + 1 per JSON node, so a loop of large
# helper calls is preempted like a loop of instructions
@pytest.mark.parametrize(("case", "slices"), [(1, 64 * 2056 / 16384), (2, 64 * 2056 / 16384),
                                              (3, 64 * (8 + 376 + 3001 + 8) / 16384)])
@pytest.mark.parametrize("engine", ENGINES)
def test_helper_work_is_charged(compile_c: Compile, engine: str, case: int, slices: float) -> None:
    base = run(compile_c, "fuel.c", config={"case": 0}, engine=engine)  # the same loop with 16-byte copies
    out = run(compile_c, "fuel.c", config={"case": case}, engine=engine)
    assert out.exit_code == 0 and base.exit_code == 0
    extra = out.suspensions.count("preempt") - base.suspensions.count("preempt")
    assert int(slices) <= extra <= int(slices) + 1, (extra, slices)
