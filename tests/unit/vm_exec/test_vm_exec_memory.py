"""Guest memory bounds and isolation (vm.md §5, §8; §9.1 items 1, 2, 3, 4, 6, 7) in both engines.

Each case asserts the fault code and the guest address; ``both()`` also asserts that the two engines
agree on everything (r0, fault, full memory, helper calls).
"""

from __future__ import annotations

from typing import Any

import pytest
from vmexec_kit import Env, both, build, run

from wakeful.errors import GuestFault
from wakeful.vm import BASE

M64 = (1 << 64) - 1
SIZES = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}
ENGINES = ("interp", "translate")


def agree(funcs: list[tuple[str, str]], **kw: Any) -> Any:
    a, b = both(funcs, **kw)
    assert a.comparable() == b.comparable(), (a.fault, b.fault, a.r0, b.r0)
    return a


def fault(text: str, **kw: Any) -> tuple[Any, ...]:
    out = agree([("main", text)], **kw)
    assert out.fault is not None, f"expected a fault, got r0={out.r0}"
    return out.fault


# -- §9.1 item 1: loads and stores at 0, BASE-1, END, END-1 (straddle), 2^64-1, 2^63 --

FIXED = [0, BASE - 1, M64, 1 << 63]


@pytest.mark.parametrize("size", [1, 2, 4, 8])
@pytest.mark.parametrize("address", FIXED, ids=[hex(a) for a in FIXED])
@pytest.mark.parametrize("kind", ["load", "store", "store_imm"])
def test_access_at_unmapped_address_faults(size: int, address: int, kind: str) -> None:
    t = SIZES[size]
    line = {"load": f"r0 = *({t} *)(r1 + 0)", "store": f"*({t} *)(r1 + 0) = r2",
            "store_imm": f"*({t} *)(r1 + 0) = 7"}[kind]
    code, addr, got_size, func, pc = fault(f"r1 = 0x{address:x} ll\nr2 = 1\n{line}\nr0 = 0\nexit")
    assert code == ("MEMORY_READ" if kind == "load" else "MEMORY_WRITE")
    assert (addr, got_size, func, pc) == (address, size, "main", 3)


@pytest.mark.parametrize("size", [1, 2, 4, 8])
@pytest.mark.parametrize("back", [0, 1])
@pytest.mark.parametrize("store", [False, True])
def test_access_at_end_and_straddling_end_faults(size: int, back: int, store: bool) -> None:
    # r1 = END (a copy of r10 is a computed pointer, so it is checked); END-1 straddles for size > 1
    t = SIZES[size]
    line = f"*({t} *)(r1 - {back}) = r1" if store else f"r0 = *({t} *)(r1 - {back})"
    text = f"*(u64 *)(r10 - 8) = 0\nr1 = r10\n{line}\nr0 = 0\nexit"
    for engine in ENGINES:
        program = build([("main", text)], engine=engine)
        out = run(program)
        if back and size == 1:
            assert out.fault is None, "the last byte below END is the guest's own stack"
            continue
        assert out.fault is not None
        assert out.fault[:3] == ("MEMORY_WRITE" if store else "MEMORY_READ", program.layout.end - back, size)


# -- §9.1 item 2: negative indexes never wrap into Python negative indexing --


@pytest.mark.parametrize("pointer", [BASE - 1, (BASE - (1 << 32)) & M64, 0], ids=["BASE-1", "BASE-2^32", "null"])
@pytest.mark.parametrize("off", [0, -1, -8])
def test_pointer_below_base_faults(pointer: int, off: int) -> None:
    code, addr, _, _, _ = fault(f"r1 = 0x{pointer:x} ll\nr0 = *(u8 *)(r1 {'-' if off < 0 else '+'} {abs(off)})\nexit")
    assert (code, addr) == ("MEMORY_READ", (pointer + off) & M64)


def test_below_base_store_does_not_touch_the_top_of_memory() -> None:
    # with Python negative indexing this store would land in the last stack byte
    for engine in ENGINES:
        program = build([("main", "*(u64 *)(r10 - 8) = 0\nr1 = 0xffff ll\n*(u8 *)(r1 + 0) = 0x55\nexit")],
                        engine=engine)
        out = run(program)
        assert out.fault is not None and out.fault[:2] == ("MEMORY_WRITE", BASE - 1)
        assert out.mem[-1] == 0


def test_copied_r10_walks_below_the_stack_into_own_memory_then_faults() -> None:
    text = ("*(u64 *)(r10 - 8) = 0\nr1 = r10\nr1 += -8\nr0 = *(u64 *)(r1 + 0)\n"
            "r2 = 0x{under:x} ll\nr1 -= r2\nr0 = *(u8 *)(r1 + 0)\nexit")
    for engine in ENGINES:
        program = build([("main", text.format(under=0))], engine=engine, data=b"\x11" * 16)
        size = program.layout.size
        # below the stack is data: own memory
        inside = build([("main", text.format(under=size - 16))], engine=engine, data=b"\x11" * 16)
        assert run(inside).r0 == 0x11
        # below BASE: fault at that address, never wrapped
        below = build([("main", text.format(under=size))], engine=engine, data=b"\x11" * 16)
        out = run(below)
        assert out.fault is not None and out.fault[:2] == ("MEMORY_READ", BASE - 8)


# -- §9.1 item 3: rodata is read-only; checksum unchanged --

RODATA = bytes(range(32))


@pytest.mark.parametrize("line", [
    "*(u8 *)(r1 + 0) = 1",
    "*(u64 *)(r1 + 0) = r2",
    "lock *(u64 *)(r1 + 0) += r2",
    "r2 = xchg_64(r1 + 0, r2)",
    "store_release((u32 *)(r1 + 0), w2)",
])
def test_rodata_writes_fault_and_leave_rodata_unchanged(line: str) -> None:
    text = f"r1 = rodata + 8 ll\nr2 = -1\n{line}\nexit"
    a = agree([("main", text)], rodata=RODATA, data=b"\0" * 8)
    assert a.fault is not None
    assert a.fault[:2] == ("RODATA_WRITE", BASE + 8)
    assert a.mem[: len(RODATA)] == RODATA


def test_rodata_write_through_computed_pointer_from_data_address() -> None:
    text = "r1 = data + 0 ll\nr1 += -4\n*(u32 *)(r1 + 0) = 7\nexit"
    for engine in ENGINES:
        program = build([("main", text)], engine=engine, rodata=RODATA, data=b"\0" * 8)
        out = run(program)
        w = program.layout.writable
        assert out.fault is not None and out.fault[:2] == ("RODATA_WRITE", BASE + w - 4)
        assert out.mem[: len(RODATA)] == RODATA


def test_straddling_rodata_and_data_store_faults() -> None:
    text = "r1 = data + 0 ll\n*(u64 *)(r1 - 4) = 7\nexit"
    out = agree([("main", text)], rodata=RODATA, data=b"\0" * 8)
    assert out.fault is not None and out.fault[0] == "RODATA_WRITE"


def test_reading_rodata_is_allowed() -> None:
    out = agree([("main", "r1 = rodata + 4 ll\nr0 = *(u32 *)(r1 + 0)\nexit")], rodata=RODATA)
    assert out.r0 == int.from_bytes(RODATA[4:8], "little")


# -- §9.1 item 4: stack walk downward and upward --

WALK_DOWN = """
*(u64 *)(r10 - 8) = 0
r1 = r10
r0 = 0
loop:
r1 += -1
r2 = *(u8 *)(r1 + 0)
r0 += r2
goto loop
"""

WALK_UP = """
*(u64 *)(r10 - 8) = 0
r1 = 0x10000 ll
r0 = 0
loop:
r2 = *(u8 *)(r1 + 0)
r0 += r2
r1 += 1
goto loop
"""


@pytest.mark.parametrize(("text", "where"), [(WALK_DOWN, "down"), (WALK_UP, "up")])
def test_stack_walk_reads_own_memory_then_faults(text: str, where: str) -> None:
    for engine in ENGINES:
        program = build([("main", text)], engine=engine, rodata=b"\x01" * 8, data=b"\x02" * 8)
        out = run(program)
        expected = BASE - 1 if where == "down" else program.layout.end
        assert out.fault is not None and out.fault[:3] == ("MEMORY_READ", expected, 1)
    agree([("main", text)], rodata=b"\x01" * 8, data=b"\x02" * 8)


# -- §9.1 item 7: two instances of one program never share globals --

GLOBALS = """
r1 = data + 0 ll
r0 = *(u64 *)(r1 + 0)
r2 = 0x5555 ll
*(u64 *)(r1 + 0) = r2
r6 = r0
call sf_yield
r0 = r6
exit
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_two_instances_do_not_share_globals(engine: str) -> None:
    program = build([("main", GLOBALS)], engine=engine, data=(42).to_bytes(8, "little"))
    a, b = program.instantiate(Env()), program.instantiate(Env())
    assert a.gen.send(None)[0] == "sf_yield"  # a wrote its global and is suspended
    assert b.gen.send(None)[0] == "sf_yield"
    results = []
    for inst in (a, b):
        with pytest.raises(StopIteration) as stop:
            inst.gen.send((0, 100))
        results.append(stop.value.value)
    assert results == [42, 42]
    assert a.mem is not b.mem
    assert program.instantiate(Env()).mem[program.layout.writable : program.layout.writable + 8] == (
        (42).to_bytes(8, "little"))


# -- fault details: function, pc (LD_IMM64 counts two slots), disassembly, callee frames --


def test_fault_in_callee_names_callee_and_pc() -> None:
    funcs = [("main", "r1 = 0\ncall walk\nexit"), ("walk", "r0 = 1\nr2 = 0x10 ll\nr0 = *(u32 *)(r2 + 4)\nexit")]
    out = agree(funcs)
    assert out.fault == ("MEMORY_READ", 0x14, 4, "walk", 3)


@pytest.mark.parametrize("engine", ENGINES)
def test_fault_message_carries_instruction_text(engine: str) -> None:
    program = build([("main", "r2 = 0\nr1 = *(u64 *)(r2 + 0)\nexit")], engine=engine)
    inst = program.instantiate(Env())
    with pytest.raises(GuestFault) as info:
        inst.gen.send(None)
    exc = info.value
    assert exc.fault_code == "MEMORY_READ" and exc.address == 0 and exc.size == 8
    assert exc.insn == "r1 = *(u64 *)(r2 + 0)" and exc.pc == 1 and exc.function == "main"
    assert "read 8 bytes at 0x0" in exc.message and "main+1" in exc.message


@pytest.mark.parametrize("engine", ENGINES)
def test_helper_fault_gets_function_and_pc(engine: str) -> None:
    text = "r0 = 0\nr1 = 0x10 ll\nr2 = 0\nr3 = 4\ncall memset\nexit"
    program = build([("main", text)], engine=engine, data=b"\0" * 8)
    out = run(program)
    assert out.fault == ("HELPER_POINTER", 0x10, 4, "main", 5)


class BrokenEnv(Env):
    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self.exc = exc

    def h_sf_now_mono_ms(self) -> int:
        raise self.exc


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("exc", [RuntimeError("bug"), IndexError("helper bug")], ids=["runtime", "index"])
def test_non_guest_exceptions_propagate_unconverted(engine: str, exc: BaseException) -> None:
    # vm.md §8: only memory accesses of guest code become faults; a helper's bug stays a bug (INTERNAL)
    program = build([("main", "call sf_now_mono_ms\nexit")], engine=engine)
    inst = program.instantiate(BrokenEnv(exc))
    with pytest.raises(type(exc)):
        inst.gen.send(None)
