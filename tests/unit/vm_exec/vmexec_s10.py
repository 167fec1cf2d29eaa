"""S10 kit (vm.md §5.1, §9): run a program with its computed frames and with every frame forced to 4,096 bytes.

``full_frames`` is the test-only way to force frames: the same linked code with every ``frame_bytes`` at 4,096
and the stack region grown to the deepest chain times 4,096, as the verifier would lay it out.

What S10 can compare (docs/decisions-vm-frames.md): moving frames moves END and every stack address, so a
result that *is* a stack address (r0 = r10, a pointer stored to a global) changes with any layout, like an
address under ASLR. ``compare`` therefore looks at r0, the fault (code, function, pc, size; an address at or
past END relative to END), the globals, the entry's live frame (the top ``F`` bytes below END) and the helper
calls (stack addresses among their arguments as a token). When the two runs differ it runs the forced program
again with the whole stack moved by a few distances; if that alone changes the result, the program observes stack
addresses and S10 does not apply (``PLACED``); otherwise the difference is a frame-size bug.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from vmexec_kit import Env, Outcome, run

from wakeful.vm.isa import BASE
from wakeful.vm.linked import LinkedCode
from wakeful.vm.program import Program
from wakeful.vm.verify import MAX_FRAME

SAME, PLACED = "same", "placed"


def chain_depth(code: LinkedCode) -> int:
    """Functions on the longest call chain from the entry (the verifier's CALL_DEPTH chain)."""
    memo: dict[int, int] = {}

    def depth(i: int) -> int:
        if i not in memo:
            memo[i] = 1 + max((depth(c) for c in code.functions[i].calls), default=0)
        return memo[i]

    return depth(code.entry)


def full_frames(program: Program, *, shift: int = 0) -> Program:
    """``program`` with every frame at 4,096 bytes (and the stack region ``shift`` bytes larger)."""
    code = program.code
    functions = tuple(dataclasses.replace(f, frame_bytes=MAX_FRAME) for f in code.functions)
    forced = dataclasses.replace(code, functions=functions)
    layout = dataclasses.replace(program.layout, stack_bytes=MAX_FRAME * chain_depth(code) + shift)
    return Program(forced, layout, engine=program.engine, slice_insns=program.slice_insns)


def observe(program: Program, out: Outcome, top: int) -> tuple[Any, ...]:
    """What S10 compares of one run; ``top`` is the entry frame size of the computed program."""
    layout = program.layout
    end, globals_end = layout.end, layout.rodata_bytes + layout.data_bytes
    stack_lo = BASE + globals_end

    def value(v: Any) -> Any:
        return "stack" if isinstance(v, int) and stack_lo <= v <= end else v

    fault = out.fault
    if fault is not None:
        code, address, size, function, pc = fault
        if address is not None and address >= end:
            address = ("END", address - end)
        fault = (code, address, size, function, pc)
    events = [tuple(value(v) for v in e) for e in out.events]
    return (out.r0, fault, out.mem[:globals_end], out.mem[len(out.mem) - top:], events)


Answer = Callable[[str, tuple[int, ...]], int]


def compare(program: Program, *, env: Callable[[], Env] = Env,
            answer: Answer | None = None) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """(SAME | PLACED | "differ", computed observation, forced observation) of one loaded program."""
    top = program.code.functions[program.code.entry].frame_bytes

    def seen(p: Program) -> tuple[Any, ...]:
        return observe(p, run(p, env=env(), answer=answer), top)

    forced = full_frames(program)
    a, b = seen(program), seen(forced)
    if a == b:
        return SAME, a, b
    delta = forced.layout.end - program.layout.end
    # several distances, flipping every address bit from 3 to 16: an operation (w1 &= 32) may hide one
    for shift in (delta, *(1 << k for k in range(3, 17))):
        if seen(full_frames(program, shift=shift)) != b:
            return PLACED, a, b
    return "differ", a, b
