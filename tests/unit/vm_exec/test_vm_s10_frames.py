"""S10 (vm.md §9, §5.1): computed frame sizes never change a result.

Reproduction 4 of issue 14 (the old one-pass rule gave frames too small), one program per way it went wrong,
then the property over the generated differential corpus (the clang fixtures are in
tests/integration/vm_exec/test_vm_s10_clang.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from vmexec_kit import U64, build, corpus_programs, run
from vmexec_progen import generate
from vmexec_s10 import SAME, compare, full_frames

from wakeful.vm import asm, load

ENGINES = ("interp", "translate")
DATA = U64.pack(0x1122334455667788)


def frames(program: Any) -> dict[str, int]:
    return {f.name: f.frame_bytes for f in program.code.functions}


def same_when_forced(program: Any) -> Any:
    """Run with computed and with 4,096-byte frames; the results must agree (S10)."""
    verdict, a, b = compare(program)
    assert verdict == SAME, (a[:2], b[:2])
    return run(program)


# -- reproduction 4: an r10-derived pointer live across a jump target, dereferenced below its offset --

ACROSS_JUMP = """
r8 = r10
r8 += -8
goto next
next:
*(u64 *)(r8 - 8) = 0x1111
call f
r0 = *(u64 *)(r8 - 8)
exit
"""
CALLEE = "*(u64 *)(r10 - 8) = 0x2222\nexit"


@pytest.mark.parametrize("engine", ENGINES)
def test_callee_does_not_overwrite_a_local_reached_across_a_jump_target(engine: str) -> None:
    program = build([("main", ACROSS_JUMP), ("f", CALLEE)], engine=engine)
    assert frames(program)["main"] >= 16
    assert same_when_forced(program).r0 == 0x1111


STORE_TO_GLOBALS = """
r8 = r10
r8 += -8
if r1 == 0x0 goto next
next:
*(u64 *)(r8 - 8) = 1
r1 = data + 0 ll
r0 = *(u64 *)(r1 + 0)
exit
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_stack_store_across_a_jump_target_does_not_land_in_the_globals(engine: str) -> None:
    program = build([("main", STORE_TO_GLOBALS)], engine=engine, data=DATA)
    assert same_when_forced(program).r0 == 0x1122334455667788


@pytest.mark.parametrize("engine", ENGINES)
def test_valid_store_below_the_recorded_offset_does_not_fault(engine: str) -> None:
    # no globals: with the old frame of 8 bytes r10 - 16 is below BASE
    program = build([("main", ACROSS_JUMP.replace("call f\n", ""))], engine=engine)
    out = same_when_forced(program)
    assert out.fault is None and out.r0 == 0x1111


@pytest.mark.parametrize("engine", ENGINES)
def test_entry_r1_is_r10_derived(engine: str) -> None:
    # vm.md §5: the entry's r1 is END, like r10; r1 - 16 is a stack slot (frame 0 would put it below BASE)
    text = "r2 = 7\nif r2 == 0x0 goto +0\n*(u64 *)(r1 - 16) = r2\nr0 = *(u64 *)(r1 - 16)\nexit"
    program = build([("main", text)], engine=engine)
    assert frames(program)["main"] == 16
    assert same_when_forced(program).r0 == 7


# -- reproduction 4: a pointer walked down a local array in a loop --

WALK = """
r7 = r10
r7 += -8
r9 = 6
loop:
*(u64 *)(r7 + 0) = r9
r7 += -8
r9 += -1
if r9 != 0x0 goto loop
call f
r0 = 0
r7 = r10
r7 += -8
r9 = 6
sum:
r1 = *(u64 *)(r7 + 0)
r0 *= 10
r0 += r1
r7 += -8
r9 += -1
if r9 != 0x0 goto sum
exit
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_pointer_walked_through_a_loop_keeps_the_callee_out_of_the_array(engine: str) -> None:
    callee = "\n".join(f"*(u64 *)(r10 - {8 * i}) = 9" for i in range(1, 7)) + "\nexit"
    program = build([("main", WALK), ("f", callee)], engine=engine)
    # r10-8 down to r10-48 hold 6..1: the digits 654321
    assert same_when_forced(program).r0 == 654321


# -- reproduction 4: register-indexed stack arrays with a negative index register --


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("index", [-32, -8 * 40])
def test_negative_index_register_into_a_local_array(engine: str, index: int) -> None:
    text = f"""
r1 = r10
r1 += -8
r2 = {index}
r1 += r2
*(u64 *)(r1 + 0) = 5
r3 = data + 0 ll
r0 = *(u64 *)(r3 + 0)
r4 = *(u64 *)(r1 + 0)
r0 += r4
exit
"""
    program = build([("main", text)], engine=engine, data=DATA)
    assert same_when_forced(program).r0 == 0x1122334455667788 + 5


@pytest.mark.parametrize("engine", ENGINES)
def test_negative_index_register_in_a_caller_is_not_overwritten_by_the_callee(engine: str) -> None:
    text = "r1 = r10\nr1 += -8\nr2 = -24\nr1 += r2\n*(u64 *)(r1 + 0) = 5\nr6 = r1\ncall f\nr0 = *(u64 *)(r6 + 0)\nexit"
    callee = "\n".join(f"*(u64 *)(r10 - {8 * i}) = 9" for i in range(1, 9)) + "\nexit"
    program = build([("main", text), ("f", callee)], engine=engine)
    assert same_when_forced(program).r0 == 5


# -- the S10 probe can fail: a frame deliberately one slot too small is caught --


def test_the_comparison_catches_an_undersized_frame() -> None:
    import dataclasses

    from wakeful.vm.program import Program

    program = build([("main", ACROSS_JUMP), ("f", CALLEE)], engine="interp")
    code = program.code
    shrunk = tuple(dataclasses.replace(f, frame_bytes=8) if f.name == "main" else f for f in code.functions)
    weak = Program(dataclasses.replace(code, functions=shrunk), program.layout, engine="interp")
    verdict, a, b = compare(weak)
    assert verdict == "differ" and a[0] == 0x2222 and b[0] == 0x1111
    assert full_frames(weak).layout.stack_bytes == 2 * 4096


# -- the S10 property over the generated corpus (vm.md §9.2) --

GENERATED = 3000


def test_generated_programs_give_the_same_result_with_full_frames() -> None:
    verdicts: dict[str, int] = {}
    failures = []
    for seed in range(GENERATED):
        prog = generate(seed)
        blob = asm.elf([asm.Func(n, code, relocs=rl) for n, code, rl in prog.binary],
                       rodata=prog.rodata, data=prog.data, bss=prog.bss)
        engine = "translate" if seed % 10 == 0 else "interp"
        verdict, a, b = compare(load(blob, engine=engine))
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        if verdict not in (SAME, "placed"):
            failures.append((seed, a[:2], b[:2]))
    assert not failures, failures[:5]
    assert verdicts.get("placed", 0) < GENERATED // 10, verdicts


@pytest.mark.parametrize(("name", "entry"), corpus_programs(), ids=[n for n, _ in corpus_programs()])
def test_corpus_program_gives_the_same_result_with_full_frames(name: str, entry: dict[str, Any]) -> None:
    program = build([tuple(f) for f in entry["funcs"]], engine="interp",  # type: ignore[misc]
                    rodata=bytes.fromhex(entry["rodata"]), data=bytes.fromhex(entry["data"]), bss=entry["bss"],
                    slice_insns=entry["slice_insns"])
    verdict, a, b = compare(program)
    assert verdict in (SAME, "placed"), (name, a[:2], b[:2])


def test_generated_corpus_has_pointers_across_jumps_loops_and_indexed_arrays() -> None:
    kinds = {"across": 0, "walk": 0, "indexed": 0}
    for seed in range(300):
        for kind in generate(seed).stack_patterns:
            kinds[kind] += 1
    assert all(n >= 20 for n in kinds.values()), kinds

