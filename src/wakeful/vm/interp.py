"""The plain reference interpreter (vm.md §6.5): one instruction at a time over ``LinkedCode``.

It is the oracle of the differential tests and of benchmark instruction counts: exact retired-instruction
count, the same helper fuel charges, suspension protocol and faults as the translator.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from wakeful.errors import GuestFault
from wakeful.vm import isa
from wakeful.vm.disasm import disasm_insn
from wakeful.vm.guest import PREEMPT, SUSPENDING_HELPERS, SYNC_HELPERS, GuestEnv
from wakeful.vm.isa import BASE, MASK32, MASK64, Insn
from wakeful.vm.linked import Layout, LinkedCode
from wakeful.vm.semantics import STRUCTS, alu, atomic_rmw, cond, endian, memory_fault

__all__ = ["fuel_in_traceback", "interpret", "insn_text"]

GuestGen = Generator[tuple[str, int, tuple[int, ...]], tuple[int, int], int]


def insn_text(code: LinkedCode, slot: int) -> str:
    """vm.md §4.2: the disassembly of linked slot ``slot`` for fault messages."""
    names = [f.name for f in code.functions]
    return disasm_insn(code.insns[slot], helpers=code.helpers, functions=names)


class _Machine:
    """Registers, call stack and memory of one interpreted guest."""

    __slots__ = ("code", "mem", "env", "sync", "writable", "regs", "frames", "func", "pc", "retired")

    def __init__(self, code: LinkedCode, layout: Layout, mem: bytearray, env: GuestEnv,
                 sync: dict[str, Callable[..., int]]) -> None:
        self.code = code
        self.mem = mem
        self.env = env
        self.sync = sync
        self.writable = layout.writable
        end = layout.end
        # vm.md §5 entry registers: r1 = r10 = END, others 0
        self.regs = [0, end, 0, 0, 0, 0, 0, 0, 0, 0, end]
        self.frames: list[tuple[int, int, list[int]]] = []
        self.func = code.entry
        self.pc = code.functions[code.entry].start
        self.retired = 0

    # -- faults (vm.md §8) --

    def where(self) -> tuple[str, int, str]:
        f = self.code.functions[self.func]
        return f.name, self.pc - f.start, insn_text(self.code, self.pc)

    def fault(self, write: bool, address: int, size: int) -> GuestFault:
        name, pc, text = self.where()
        return memory_fault(write, address, size, self.writable, function=name, pc=pc, insn=text)

    def fill(self, exc: GuestFault) -> None:
        if exc.function is None:
            exc.function, exc.pc, exc.insn = self.where()

    # -- memory (vm.md §5: reads [BASE, END), writes [BASE+W, END)) --

    def load(self, base: int, off: int, size: int, signed: bool = False) -> int:
        address = (base + off) & MASK64
        i = address - BASE
        if i < 0 or i + size > len(self.mem):
            raise self.fault(False, address, size)
        value: int = STRUCTS[(_SIZE_CODE[size], signed)].unpack_from(self.mem, i)[0]
        return value & MASK64

    def check_write(self, base: int, off: int, size: int) -> int:
        address = (base + off) & MASK64
        i = address - BASE
        if i < self.writable or i + size > len(self.mem):
            raise self.fault(True, address, size)
        return i

    def store(self, base: int, off: int, size: int, value: int) -> None:
        i = self.check_write(base, off, size)
        STRUCTS[(_SIZE_CODE[size], False)].pack_into(self.mem, i, value & ((1 << (8 * size)) - 1))


_SIZE_CODE = {v: k for k, v in isa.SIZE_BYTES.items()}


def interpret(code: LinkedCode, layout: Layout, mem: bytearray, env: GuestEnv,
              sync: dict[str, Callable[..., int]], fuel: int) -> GuestGen:
    """The guest generator of vm/guest.py, run by the reference interpreter starting with ``fuel``."""
    m = _Machine(code, layout, mem, env, sync)
    try:
        return (yield from _run(m, fuel))
    except GuestFault as exc:
        env.fuel_left = fuel_in_traceback(exc, lambda code: code is _run.__code__, fuel)
        raise
    finally:
        env.retired += m.retired


def fuel_in_traceback(exc: BaseException, ours: Callable[[Any], bool], default: int) -> int:
    """vm/guest.py ``fuel_left`` at a fault: the ``fuel`` local of the innermost engine frame."""
    left, tb = default, exc.__traceback__
    while tb is not None:
        if ours(tb.tb_frame.f_code):
            value = tb.tb_frame.f_locals.get("fuel")
            if isinstance(value, int):
                left = value
        tb = tb.tb_next
    return left


def _run(m: _Machine, fuel: int) -> GuestGen:
    insns = m.code.insns
    regs = m.regs
    while True:
        insn = insns[m.pc]
        m.retired += 1
        fuel -= 1
        cls = insn.op & 0x07
        if cls in (isa.ALU, isa.ALU64):
            _exec_alu(m, insn)
        elif cls in (isa.JMP, isa.JMP32):
            kind = insn.op & 0xF0
            if kind == isa.EXIT:
                if not m.frames:
                    m.env.fuel_left = fuel
                    return regs[0]
                _return(m)
            elif kind == isa.CALL:
                fuel = yield from _call(m, insn, fuel)
            else:
                _exec_jump(m, insn)
        elif cls == isa.LD:
            regs[insn.dst] = insn.imm & MASK64
            m.pc += 2
        else:
            _exec_memory(m, insn)
        # vm.md §6.3: preempt once fuel is spent (exact, per instruction)
        if fuel <= 0:
            m.env.retired += m.retired
            m.retired = 0
            _, fuel = yield (PREEMPT, fuel, ())


# ---------------------------------------------------------------- ALU (RFC 9669 §4.1)


def _exec_alu(m: _Machine, insn: Insn) -> None:
    regs = m.regs
    wide = insn.op & 0x07 == isa.ALU64
    if insn.op & 0xF0 == isa.END:
        regs[insn.dst] = endian(insn.op, insn.imm, regs[insn.dst])
    else:
        if insn.op & isa.X:
            b = regs[insn.src]
        else:
            b = insn.imm & (MASK64 if wide else MASK32)
        regs[insn.dst] = alu(insn.op, insn.off, regs[insn.dst], b)
    m.pc += 1


# ---------------------------------------------------------------- jumps (RFC 9669 §4.3)


def _exec_jump(m: _Machine, insn: Insn) -> None:
    kind = insn.op & 0xF0
    if kind == isa.JA:
        m.pc += (insn.imm if insn.op & 0x07 == isa.JMP32 else insn.off) + 1
        return
    b = m.regs[insn.src] if insn.op & isa.X else insn.imm & MASK64
    m.pc += insn.off + 1 if cond(insn.op, m.regs[insn.dst], b) else 1


# ---------------------------------------------------------------- calls (vm.md §6.1 convention)


def _call(m: _Machine, insn: Insn, fuel: int) -> Generator[tuple[str, int, tuple[int, ...]], Any, int]:
    regs = m.regs
    if insn.src == isa.PSEUDO_CALL:
        caller = m.code.functions[m.func]
        m.frames.append((m.pc + 1, m.func, regs[:]))
        # callee: r0 = r6..r9 = 0, r1..r5 arguments, r10 = caller's r10 - caller's frame
        regs[0] = regs[6] = regs[7] = regs[8] = regs[9] = 0
        regs[10] = regs[10] - caller.frame_bytes
        m.func = insn.imm
        m.pc = m.code.functions[insn.imm].start
        return fuel
    name = m.code.helpers[insn.imm]
    try:
        if name in SUSPENDING_HELPERS:
            args = tuple(regs[1 : 1 + SUSPENDING_HELPERS[name]])
            m.env.retired += m.retired
            m.retired = 0
            r0, fuel = yield (name, fuel, args)
        else:
            r0 = m.sync[name](*regs[1 : 1 + SYNC_HELPERS[name]])
            fuel -= m.env.debt
            m.env.debt = 0
    except GuestFault as exc:
        m.fill(exc)
        raise
    regs[0] = r0 & MASK64
    m.pc += 1
    return fuel


def _return(m: _Machine) -> None:
    r0 = m.regs[0]
    m.pc, m.func, saved = m.frames.pop()
    saved[0] = r0
    m.regs[:] = saved


# ---------------------------------------------------------------- memory (RFC 9669 §5, vm.md §5)


def _exec_memory(m: _Machine, insn: Insn) -> None:
    regs = m.regs
    cls = insn.op & 0x07
    mode = insn.op & 0xE0
    size = isa.SIZE_BYTES[insn.op & 0x18]
    if cls == isa.LDX:
        regs[insn.dst] = m.load(regs[insn.src], insn.off, size, mode == isa.MODE_MEMSX)
    elif cls == isa.ST:
        m.store(regs[insn.dst], insn.off, size, insn.imm)
    elif mode == isa.MODE_ATOMIC:
        _exec_atomic(m, insn, size)
    else:
        m.store(regs[insn.dst], insn.off, size, regs[insn.src])
    m.pc += 1


def _exec_atomic(m: _Machine, insn: Insn, size: int) -> None:
    regs = m.regs
    sel = insn.imm
    if sel == isa.LOAD_ACQ:
        regs[insn.dst] = m.load(regs[insn.src], insn.off, size)
        return
    if sel == isa.STORE_REL:
        m.store(regs[insn.dst], insn.off, size, regs[insn.src])
        return
    # read-modify-write atomics need a writable target (vm.md §5)
    m.check_write(regs[insn.dst], insn.off, size)
    old = m.load(regs[insn.dst], insn.off, size)
    width = (1 << (8 * size)) - 1
    if sel == isa.ATOMIC_CMPXCHG:
        if old == regs[0] & width:
            m.store(regs[insn.dst], insn.off, size, regs[insn.src])
        regs[0] = old
        return
    m.store(regs[insn.dst], insn.off, size, atomic_rmw(sel, old, regs[insn.src], size))
    if sel & isa.FETCH:
        regs[insn.src] = old
