"""Fuel, preemption and the suspension protocol (vm.md §6.1, §6.3; vm/guest.py) in both engines."""

from __future__ import annotations

import pytest
from vmexec_kit import Env, build, run

from wakeful.vm.guest import PREEMPT

ENGINES = ("interp", "translate")
M64 = (1 << 64) - 1

SPIN = """
*(u64 *)(r10 - 8) = 0
loop:
r1 = *(u64 *)(r10 - 8)
r1 += 1
*(u64 *)(r10 - 8) = r1
goto loop
"""


def counter(mem: bytearray) -> int:
    return int.from_bytes(mem[-8:], "little")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("slice_insns", [1000, 16384])
def test_spin_loop_preempts_after_about_one_slice(engine: str, slice_insns: int) -> None:
    program = build([("main", SPIN)], engine=engine, slice_insns=slice_insns)
    inst = program.instantiate(Env())
    kind, fuel, args = inst.gen.send(None)
    assert (kind, args) == (PREEMPT, ()) and fuel <= 0
    executed = 1 + 4 * counter(inst.mem)
    assert slice_insns - 4 <= executed <= slice_insns + 4
    kind, fuel, _ = inst.gen.send((0, slice_insns + fuel))
    assert kind == PREEMPT and fuel <= 0
    assert 2 * slice_insns - 8 <= 1 + 4 * counter(inst.mem) <= 2 * slice_insns + 8
    inst.gen.close()


def test_interpreter_preempts_exactly_and_counts_retired_instructions() -> None:
    env = Env()
    inst = build([("main", SPIN)], engine="interp", slice_insns=1000).instantiate(env)
    kind, fuel, _ = inst.gen.send(None)
    assert fuel == 0 and env.retired == 1000
    inst.gen.close()


def test_interpreter_retired_count_is_exact() -> None:
    # 2 + 10 * 3 + 1 instructions; LD_IMM64 is one instruction
    text = "r0 = 0x100000000 ll\nr1 = 10\nloop:\nr0 += 1\nr1 += -1\nif r1 != 0x0 goto loop\nexit"
    program = build([("main", text)], engine="interp")
    out = run(program)
    assert out.r0 == (1 << 32) + 10 and out.retired == 33


def test_translator_leaves_retired_alone() -> None:
    out = run(build([("main", "r0 = 1\nexit")], engine="translate"))
    assert out.retired == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_identical_runs_preempt_at_identical_points(engine: str) -> None:
    text = SPIN.replace("goto loop", "if r1 < 0x2000 goto loop\nr0 = r1\nexit")
    runs = []
    for _ in range(2):
        program = build([("main", text)], engine=engine, slice_insns=777)
        inst = program.instantiate(Env())
        points, send = [], None
        try:
            while True:
                _, fuel, _ = inst.gen.send(send)
                points.append((fuel, counter(inst.mem)))
                send = (0, 777 + fuel)
        except StopIteration as stop:
            points.append(("exit", stop.value))
        runs.append(points)
    assert runs[0] == runs[1] and len(runs[0]) > 10


def call_bomb(levels: int = 8, calls: int = 500) -> list[tuple[str, str]]:
    """vm.md §9.1 item 9: straight-line functions each calling the next ``calls`` times."""
    funcs = []
    for level in range(levels):
        name = "main" if level == 0 else f"f{level}"
        if level == levels - 1:
            funcs.append((name, "r0 = 1\nexit"))
        else:
            funcs.append((name, f"call f{level + 1}\n" * calls + "exit"))
    return funcs


@pytest.mark.parametrize("engine", ENGINES)
def test_call_bomb_is_preempted_and_stoppable(engine: str) -> None:
    program = build(call_bomb(), engine=engine, slice_insns=16384, max_elf_bytes=1 << 20)
    inst = program.instantiate(Env())
    send = None
    for _ in range(3):
        kind, fuel, _ = inst.gen.send(send)
        send = (0, 16384 + fuel)
        assert kind == PREEMPT and fuel <= 0
        # at most one slice plus one plain call's cost (≤ 4,096, vm.md §6.1) of overshoot
        assert fuel > -4096
    inst.gen.close()
    with pytest.raises(StopIteration):
        inst.gen.send(None)


MEMCPY_THEN_SPIN = """
r1 = data + 0 ll
r2 = data + 0x4000 ll
r3 = 0x4000
call memcpy
loop:
r0 += 1
goto loop
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_helper_charge_ends_the_slice_and_the_debt_carries_over(engine: str) -> None:
    # memcpy of 16,384 bytes charges 8 + 1,024 + 1,024 = 2,056 units (vm.md §6.3)
    program = build([("main", MEMCPY_THEN_SPIN)], engine=engine, data=bytes(0x8000), slice_insns=100)
    env = Env()
    inst = program.instantiate(env)
    env.mem, env.layout = inst.mem, program.layout
    kind, fuel, _ = inst.gen.send(None)
    assert kind == PREEMPT
    assert 100 - 2056 - 5 <= fuel <= 100 - 2056
    assert env.calls[0][0] == "memcpy" and len(env.calls) == 1
    # the next slice starts with slice_insns minus the debt: still in debt, so it preempts at once
    kind, fuel2, _ = inst.gen.send((0, 100 + fuel))
    assert kind == PREEMPT and fuel2 <= 100 + fuel
    inst.gen.close()


PLAIN_HELPER = [
    ("main", "r6 = 0\nloop:\ncall copy\nr6 += 1\nif r6 < 0x3 goto loop\nr0 = r6\nexit"),
    ("copy", "r1 = data + 0 ll\nr2 = data + 0x100 ll\nr3 = 0x100\ncall memcpy\nexit"),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_helper_charges_inside_plain_functions_reach_the_caller(engine: str) -> None:
    # each copy charges 8 + 16 + 16 = 40 units of helper work besides its instructions
    program = build(PLAIN_HELPER, engine=engine, data=bytes(0x200), slice_insns=90)
    out = run(program)
    assert out.r0 == 3
    assert out.preempts >= 1
    assert [e[0] for e in out.events] == ["memcpy"] * 3


SUSPEND = """
r1 = 25
call sf_sleep_ms
r6 = r0
call sf_yield
r0 += r6
exit
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_suspending_helpers_follow_the_protocol(engine: str) -> None:
    inst = build([("main", SUSPEND)], engine=engine, slice_insns=500).instantiate(Env())
    kind, fuel, args = inst.gen.send(None)
    assert (kind, args) == ("sf_sleep_ms", (25,)) and 0 < fuel <= 500
    kind, fuel, args = inst.gen.send((-1, 500))  # negative results are masked to u64
    assert (kind, args) == ("sf_yield", ()) and 0 < fuel <= 500
    with pytest.raises(StopIteration) as stop:
        inst.gen.send((2, fuel))
    assert stop.value.value == (M64 + 2) & M64


@pytest.mark.parametrize("engine", ENGINES)
def test_suspension_can_resume_with_exhausted_fuel(engine: str) -> None:
    inst = build([("main", SUSPEND)], engine=engine, slice_insns=500).instantiate(Env())
    inst.gen.send(None)
    kind, _, _ = inst.gen.send((0, 0))  # resumed with no fuel left: the next thing is a preemption
    assert kind == PREEMPT
    inst.gen.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_stop_at_any_suspension_point(engine: str) -> None:
    inst = build([("main", SUSPEND)], engine=engine).instantiate(Env())
    inst.gen.send(None)
    inst.gen.close()
    with pytest.raises(StopIteration):
        inst.gen.send(None)
