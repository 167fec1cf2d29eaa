"""eBPF → Python generator source (vm.md §6): function kinds, code shape, fuel, line table, faults.

``translate(code)`` builds a :class:`~wakeful.vm.shapes.Shape` (source + compiled factory) for linked code;
``recover_fault`` turns a memory exception raised by translated code into the guest fault of vm.md §8.
"""

from __future__ import annotations

import ast
import linecache
import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FunctionType, TracebackType
from typing import Any

from wakeful.errors import GuestFault, WakefulError
from wakeful.vm import isa
from wakeful.vm.guest import HELPER_MAX_CHARGE, PREEMPT, SUSPENDING_HELPERS, SYNC_HELPERS
from wakeful.vm.isa import BASE, Insn
from wakeful.vm.linked import Function, LinkedCode
from wakeful.vm.semantics import memory_access, memory_fault, sdiv, smod
from wakeful.vm.shapes import Shape
from wakeful.vm.srccheck import UnsafeSource, check_source

__all__ = ["PLAIN_COST_LIMIT", "Untranslatable", "fill_fault", "recover_fault", "translate"]

PLAIN_COST_LIMIT = 4096  # vm.md §6.1
M64 = "0xFFFFFFFFFFFFFFFF"
M32 = "0xFFFFFFFF"
S64 = "0x8000000000000000"
S32 = "0x80000000"
MEMORY_ERRORS = (IndexError, struct.error, OverflowError)

# ================================================================ analysis: blocks, costs, kinds


@dataclass(slots=True)
class Block:
    start: int  # global slot
    slots: list[int]  # instruction slots (LD_IMM64 second slots skipped)
    succ: list[int] = field(default_factory=list)  # successor block starts
    term: Insn | None = None  # the closing jump/exit, if any
    target: int | None = None  # jump target slot of ``term``


@dataclass(slots=True)
class FuncInfo:
    index: int
    func: Function
    blocks: list[Block]
    back_edges: bool
    generator: bool = False
    cost: int = 0  # static instruction cost (plain functions: what callers charge, vm.md §6.3)
    bound: int = 0  # worst case with helper maximum charges (vm.md §6.1)
    helper_debt: bool = False  # it or a plain callee calls a sync helper (charges land in env.debt)


def _width(insn: Insn) -> int:
    return 2 if insn.op == isa.OP_LDDW else 1


def _is_jump(insn: Insn) -> bool:
    return insn.op & 0x07 in (isa.JMP, isa.JMP32) and insn.op & 0xF0 not in (isa.CALL,)


def _jump_target(insn: Insn, slot: int) -> int | None:
    """Target slot of a JA / conditional jump (RFC 9669 §4.3; JMP32 JA is gotol with imm)."""
    if insn.op & 0xF0 == isa.EXIT:
        return None
    if insn.op == isa.OP_GOTOL:
        return slot + insn.imm + 1
    return slot + insn.off + 1


# vm.md §6.2: basic blocks (leaders: the start, jump targets, the slot after a jump)
def _blocks(code: LinkedCode, func: Function) -> list[Block]:
    insns = code.insns
    slots: list[int] = []
    leaders = {func.start}
    slot = func.start
    while slot < func.end:
        insn = insns[slot]
        slots.append(slot)
        nxt = slot + _width(insn)
        if _is_jump(insn):
            target = _jump_target(insn, slot)
            if target is not None:
                leaders.add(target)
            leaders.add(nxt)
        slot = nxt
    blocks: list[Block] = []
    for s in slots:
        if s in leaders or not blocks:
            blocks.append(Block(s, []))
        blocks[-1].slots.append(s)
    for i, b in enumerate(blocks):
        last = insns[b.slots[-1]]
        fall = blocks[i + 1].start if i + 1 < len(blocks) else None
        if _is_jump(last):
            b.term = last
            b.target = _jump_target(last, b.slots[-1])
            if b.target is not None:
                b.succ.append(b.target)
            if last.op & 0xF0 not in (isa.JA, isa.EXIT) and fall is not None and fall != b.target:
                b.succ.append(fall)
        elif fall is not None:
            b.succ.append(fall)
    return _reachable(blocks)


def _reachable(blocks: list[Block]) -> list[Block]:
    by_start = {b.start: b for b in blocks}
    seen = {blocks[0].start}
    todo = [blocks[0].start]
    while todo:
        for s in by_start[todo.pop()].succ:
            if s not in seen:
                seen.add(s)
                todo.append(s)
    return [b for b in blocks if b.start in seen]


def _leaves_debt(code: LinkedCode, insn: Insn, infos: dict[int, FuncInfo]) -> bool:
    """Whether a CALL can leave helper charges in ``env.debt`` for its caller to collect (vm.md §6.3)."""
    if insn.src == isa.PSEUDO_CALL:
        callee = infos[insn.imm]
        return callee.helper_debt and not callee.generator
    return code.helpers[insn.imm] in SYNC_HELPERS


# vm.md §6.1 / §6.3: what one CALL adds to the static cost and to the plain-function bound
def _call_cost(code: LinkedCode, insn: Insn, infos: dict[int, FuncInfo]) -> tuple[int, int, bool]:
    """(static cost, bound, makes-caller-a-generator) of one CALL."""
    if insn.src == isa.PSEUDO_CALL:
        callee = infos[insn.imm]
        return callee.cost, callee.bound, callee.generator
    name = code.helpers[insn.imm]
    return 0, HELPER_MAX_CHARGE.get(name, 8), name in SUSPENDING_HELPERS


def _analyse(code: LinkedCode, index: int, infos: dict[int, FuncInfo]) -> FuncInfo:
    """vm.md §6.1: plain or generator, static cost and bound (callees must be analysed first)."""
    func = code.functions[index]
    blocks = _blocks(code, func)
    back = any(s <= b.start for b in blocks for s in b.succ)
    info = FuncInfo(index, func, blocks, back)
    longest: dict[int, tuple[int, int]] = {}
    generator = back
    for b in reversed(blocks):
        cost = bound = 0
        for slot in b.slots:
            insn = code.insns[slot]
            cost += 1
            bound += 1
            if insn.op == isa.OP_CALL:
                c, m, g = _call_cost(code, insn, infos)
                cost, bound, generator = cost + c, bound + m, generator or g
                info.helper_debt = info.helper_debt or _leaves_debt(code, insn, infos)
        nexts = [longest[s] for s in b.succ if s > b.start]
        longest[b.start] = (cost + max((n[0] for n in nexts), default=0),
                            bound + max((n[1] for n in nexts), default=0))
    info.cost, info.bound = longest[blocks[0].start]
    info.generator = generator or info.bound > PLAIN_COST_LIMIT
    return info


def analyse_program(code: LinkedCode) -> dict[int, FuncInfo]:
    """Every function reachable from the entry, callees before callers."""
    infos: dict[int, FuncInfo] = {}

    def visit(index: int) -> None:
        if index in infos:
            return
        func = code.functions[index]
        # callees from the code itself (not Function.calls), so the analysis never depends on a summary
        for slot in range(func.start, func.end):
            insn = code.insns[slot]
            if insn.op == isa.OP_CALL and insn.src == isa.PSEUDO_CALL:
                visit(insn.imm)
        infos[index] = _analyse(code, index, infos)

    visit(code.entry)
    return infos


# ================================================================ emission: instructions (vm.md §6.2)


def _reg(n: int) -> str:
    # r10 is never written (verifier): its value is the frame pointer as a guest address
    return f"(fp + {BASE})" if n == 10 else f"r{n}"


def _src(insn: Insn, slot: int) -> str:
    """The source operand: the register (X) or the lifted constant cell (K)."""
    return _reg(insn.src) if insn.op & isa.X else f"k{slot}"


# RFC 9669 §4.1 ALU64 (vm.md §4.1): u64 registers; mask only after ops that can leave the range
def _alu64(insn: Insn, slot: int) -> str:
    d, code = f"r{insn.dst}", insn.op & 0xF0
    s = _src(insn, slot)
    if code == isa.MOV:
        if insn.off:  # MOVSX (RFC 9669 §4.1): sign-extend the low 8/16/32 bits
            sign = 1 << (insn.off - 1)
            return f"{d} = (({s} & {hex(2 * sign - 1)}) ^ {hex(sign)}) - {hex(sign)} & {M64}"
        return f"{d} = {s}"
    simple = {isa.ADD: f"{d} = {d} + {s} & {M64}", isa.SUB: f"{d} = {d} - {s} & {M64}",
              isa.MUL: f"{d} = {d} * {s} & {M64}", isa.OR: f"{d} |= {s}", isa.AND: f"{d} &= {s}",
              isa.XOR: f"{d} ^= {s}", isa.NEG: f"{d} = -{d} & {M64}"}
    if code in simple:
        return simple[code]
    if code in (isa.LSH, isa.RSH, isa.ARSH):
        n = s if not insn.op & isa.X else f"({s} & 63)"
        if code == isa.LSH:
            return f"{d} = {d} << {n} & {M64}"
        if code == isa.RSH:
            return f"{d} >>= {n}"
        return f"{d} = ({d} - (({d} & {S64}) << 1)) >> {n} & {M64}"
    return _divmod(insn, d, 64)


def _low32(reg: int, narrow: frozenset[int]) -> str:
    """The low 32 bits of a register: the register itself when it is known to fit (mask elision)."""
    return f"r{reg}" if reg in narrow else f"({_reg(reg)} & {M32})"


# RFC 9669 §4.1 ALU (32-bit): results zero-extended; the K immediate is its low 32 bits
def _alu32(insn: Insn, slot: int, narrow: frozenset[int] = frozenset()) -> str:
    d, code = f"r{insn.dst}", insn.op & 0xF0
    s = _src(insn, slot)
    x = insn.op & isa.X
    dn = insn.dst in narrow
    sn = not x or insn.src in narrow  # K cells hold the low 32 bits already
    if code == isa.MOV:
        if insn.off:
            sign = 1 << (insn.off - 1)
            return f"{d} = (({s} & {hex(2 * sign - 1)}) ^ {hex(sign)}) - {hex(sign)} & {M32}"
        return f"{d} = {s}" if sn else f"{d} = {s} & {M32}"
    if code == isa.OR and dn and sn:
        return f"{d} |= {s}"
    if code == isa.AND and (dn or sn):
        return f"{d} &= {s}"
    if code == isa.XOR and dn and sn:
        return f"{d} ^= {s}"
    simple = {isa.ADD: f"{d} = {d} + {s} & {M32}", isa.SUB: f"{d} = {d} - {s} & {M32}",
              isa.MUL: f"{d} = {d} * {s} & {M32}", isa.OR: f"{d} = ({d} | {s}) & {M32}",
              isa.AND: f"{d} = {d} & {s} & {M32}", isa.XOR: f"{d} = ({d} ^ {s}) & {M32}",
              isa.NEG: f"{d} = -{d} & {M32}"}
    if code in simple:
        return simple[code]
    if code in (isa.LSH, isa.RSH, isa.ARSH):
        n = s if not x else f"({s} & 31)"
        if code == isa.LSH:
            return f"{d} = {d} << {n} & {M32}"
        if code == isa.RSH:
            return f"{d} >>= {n}" if dn else f"{d} = ({d} & {M32}) >> {n}"
        return f"{d} = (({_low32(insn.dst, narrow)} ^ {S32}) - {S32}) >> {n} & {M32}"
    return _divmod(insn, d, 32, narrow)


def _divmod(insn: Insn, d: str, bits: int, narrow: frozenset[int] = frozenset()) -> str:
    """DIV/MOD/SDIV/SMOD with the zero and overflow rules of vm.md §4.1, decided at generation for K."""
    mask = M64 if bits == 64 else M32
    a = d if bits == 64 else _low32(insn.dst, narrow)
    div = insn.op & 0xF0 == isa.DIV
    if insn.off:  # signed
        fn = "SDIV" if div else "SMOD"
        if insn.op & isa.X:
            return f"{d} = {fn}({d}, {_reg(insn.src)}, {bits})"
        imm = insn.imm
        if imm == 0:
            return f"{d} = 0" if div else f"{d} = {a}"
        if imm == -1:
            return f"{d} = -{d} & {mask}" if div else f"{d} = 0"
        return f"{d} = {fn}({d}, {imm & ((1 << bits) - 1)}, {bits})"
    if insn.op & isa.X:
        b = _reg(insn.src) if bits == 64 else _low32(insn.src, narrow)
        if div:
            return f"{d} = {a} // {b} if {b} else 0"
        return f"{d} = {a} % {b} if {b} else {a}"
    c = insn.imm & ((1 << bits) - 1)
    if c == 0:
        return f"{d} = 0" if div else f"{d} = {a}"
    return f"{d} = {a} // {c}" if div else f"{d} = {a} % {c}"


# RFC 9669 §4.2 byte swaps: END to-le / to-be (ALU) and BSWAP (ALU64) of 16/32/64 bits
def _endian(insn: Insn) -> str:
    d = f"r{insn.dst}"
    width = insn.imm
    if insn.op & 0x07 == isa.ALU and not insn.op & isa.X:  # to-le on a little-endian machine: truncate
        return "pass" if width == 64 else f"{d} &= {hex((1 << width) - 1)}"
    if width == 16:
        return f"{d} = ({d} & 0xFF) << 8 | ({d} >> 8 & 0xFF)"
    return f"{d} = BSWAP{width}({d})"


_CMP = {isa.JEQ: "==", isa.JNE: "!=", isa.JGT: ">", isa.JGE: ">=", isa.JLT: "<", isa.JLE: "<=",
        isa.JSGT: ">", isa.JSGE: ">=", isa.JSLT: "<", isa.JSLE: "<="}
_SIGNED = (isa.JSGT, isa.JSGE, isa.JSLT, isa.JSLE)


def _condition(insn: Insn, slot: int, narrow: frozenset[int] = frozenset()) -> str:
    """RFC 9669 §4.3 condition; signed compares use a bias, K constants come pre-biased (shapes.py)."""
    code = insn.op & 0xF0
    wide = insn.op & 0x07 == isa.JMP
    d = _reg(insn.dst) if wide else _low32(insn.dst, narrow)
    x = insn.op & isa.X
    s = _reg(insn.src) if wide or not x else _low32(insn.src, narrow)
    if not x:
        s = f"k{slot}"
    if code == isa.JSET:
        return f"{d} & {s}"
    bias = S64 if wide else S32
    if code in _SIGNED:
        d = f"({d} ^ {bias})"
        if x:
            s = f"({s} ^ {bias})"
    return f"{d} {_CMP[code]} {s}"


_LOADS = {(isa.SIZE_H, False): "LDH", (isa.SIZE_W, False): "LDW", (isa.SIZE_DW, False): "LDQ",
          (isa.SIZE_B, True): "LDSB", (isa.SIZE_H, True): "LDSH", (isa.SIZE_W, True): "LDSW"}
_STORES = {isa.SIZE_H: "STH", isa.SIZE_W: "STW", isa.SIZE_DW: "STQ"}
_WIDTH_MASK = {isa.SIZE_B: "0xFF", isa.SIZE_H: "0xFFFF", isa.SIZE_W: M32}


def _read_index(base: int, off: int) -> str:
    """vm.md §5: r10-relative accesses are proven in-frame (unchecked); others check index >= 0."""
    if base == 10:
        return f"fp - {-off}" if off < 0 else f"fp + {off}"
    return f"r{base} + {off - BASE} if r{base} >= {BASE - off} else BAD"


def _write_index(base: int, off: int) -> str:
    """vm.md §5: stores check index >= W (the first writable index, a lifted cell)."""
    if base == 10:
        return _read_index(base, off)
    return f"i if (i := r{base} + {off - BASE}) >= W else BAD"


# RFC 9669 §5.1 LDX MEM / MEMSX (vm.md §5: struct-based access, explicit lower bound)
def _load(insn: Insn, dst: int, base: int, signed: bool) -> str:
    size = insn.op & 0x18
    idx = _read_index(base, insn.off)
    if size == isa.SIZE_B and not signed:
        return f"r{dst} = M[{idx}]"
    fetch = f"{_LOADS[(size, signed)]}(M, {idx})[0]"
    return f"r{dst} = {fetch} & {M64}" if signed else f"r{dst} = {fetch}"


# RFC 9669 §5.1 ST / STX MEM (vm.md §5: stores check index >= W)
def _store(insn: Insn, value: str, base: int) -> str:
    size = insn.op & 0x18
    idx = _write_index(base, insn.off)
    if size == isa.SIZE_B:
        return f"M[{idx}] = {value}"
    return f"{_STORES[size]}(M, {idx}, {value})"


def _stored_value(insn: Insn, narrow: frozenset[int] = frozenset()) -> str:
    size = insn.op & 0x18
    v = _reg(insn.src)
    if size == isa.SIZE_DW or (size == isa.SIZE_W and insn.src in narrow):
        return v
    return f"{v} & {_WIDTH_MASK[size]}"


def _atomic(insn: Insn) -> list[str]:
    """RFC 9669 §5.3 atomics: single-threaded read-modify-write of a writable location."""
    sel, size = insn.imm, insn.op & 0x18
    if sel == isa.LOAD_ACQ:
        return [_load(insn, insn.dst, insn.src, False)]
    if sel == isa.STORE_REL:
        return [_store(insn, _stored_value(insn), insn.dst)]
    mask = _WIDTH_MASK.get(size, M64)
    ld, st = _LOADS[(size, False)], _STORES[size]
    s = _reg(insn.src)
    lines = [f"i = {_write_index(insn.dst, insn.off)}", f"o = {ld}(M, i)[0]"]
    if sel == isa.ATOMIC_CMPXCHG:
        return [*lines, f"if o == r0 & {mask}: {st}(M, i, {s} & {mask})", "r0 = o"]
    ops = {isa.ATOMIC_ADD: "+", isa.ATOMIC_OR: "|", isa.ATOMIC_AND: "&", isa.ATOMIC_XOR: "^"}
    base_sel = sel & ~isa.FETCH
    new = f"{s} & {mask}" if sel == isa.ATOMIC_XCHG else f"(o {ops[base_sel]} {s}) & {mask}"
    lines.append(f"{st}(M, i, {new})")
    if sel & isa.FETCH:
        lines.append(f"r{insn.src} = o")
    return lines


def _memory(insn: Insn, slot: int, narrow: frozenset[int] = frozenset()) -> list[str]:
    cls, mode = insn.op & 0x07, insn.op & 0xE0
    if cls == isa.LDX:
        return [_load(insn, insn.dst, insn.src, mode == isa.MODE_MEMSX)]
    if cls == isa.ST:
        return [_store(insn, f"k{slot}", insn.dst)]
    if mode == isa.MODE_ATOMIC:
        return _atomic(insn)
    return [_store(insn, _stored_value(insn, narrow), insn.dst)]


def straight_line(insn: Insn, slot: int, narrow: frozenset[int] = frozenset()) -> list[str]:
    """Python statements for a non-control instruction (ALU, LD_IMM64, memory); ``narrow`` holds the
    registers known to be below 2^32 here, whose 32-bit masks can be left out (vm.md §6.2)."""
    cls = insn.op & 0x07
    if cls in (isa.ALU, isa.ALU64):
        if insn.op & 0xF0 == isa.END:
            return [_endian(insn)]
        return [_alu64(insn, slot) if cls == isa.ALU64 else _alu32(insn, slot, narrow)]
    if cls == isa.LD:
        return [f"r{insn.dst} = k{slot}"]
    return _memory(insn, slot, narrow)


def narrow_after(insn: Insn, narrow: frozenset[int]) -> frozenset[int]:
    """Registers known to be below 2^32 after ``insn`` (a forward, per-block fact)."""
    cls, code, x = insn.op & 0x07, insn.op & 0xF0, insn.op & isa.X
    dst, src = insn.dst, insn.src
    keep = False
    if cls == isa.ALU:
        keep = code != isa.END or insn.imm < 64
    elif cls == isa.ALU64:
        if code == isa.END:
            keep = insn.imm < 64
        elif code == isa.MOV and x and not insn.off:
            keep = src in narrow
        elif code == isa.AND and x:
            keep = dst in narrow or src in narrow
        elif code in (isa.OR, isa.XOR) and x:
            keep = dst in narrow and src in narrow
        elif code in (isa.RSH, isa.DIV, isa.MOD) and not insn.off:
            keep = dst in narrow
    elif cls == isa.LDX:
        keep = insn.op & 0xE0 == isa.MODE_MEM and insn.op & 0x18 != isa.SIZE_DW
    elif cls == isa.STX and insn.op & 0xE0 == isa.MODE_ATOMIC:
        small = insn.op & 0x18 != isa.SIZE_DW
        if insn.imm == isa.LOAD_ACQ:
            keep = small
        elif insn.imm == isa.ATOMIC_CMPXCHG:
            dst, keep = 0, small
        elif insn.imm & isa.FETCH:
            dst, keep = src, small
        else:
            return narrow
    elif insn.op == isa.OP_CALL:
        dst = 0
    elif cls in (isa.ST, isa.STX, isa.JMP, isa.JMP32):
        return narrow
    return narrow | {dst} if keep else narrow - {dst}


# ================================================================ emission: functions and control flow


class _Source:
    """Generated lines with the line table (generated line -> global slot)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.table: dict[int, int] = {}

    def add(self, depth: int, text: str, slot: int | None = None) -> None:
        self.lines.append("    " * depth + text)
        if slot is not None:
            self.table[len(self.lines)] = slot


PREEMPT_YIELD = "_, fuel = yield (PREEMPT, fuel, ())"
RUN = 4  # fan-out of the range guards over a function's blocks


@dataclass(slots=True)
class _Scope:
    """The function body or one loop region ``[header, last]`` emitted as a native ``while`` loop."""

    header: int | None  # region header (None: the function scope)
    lo: int  # first block start in the scope
    hi: int  # last block start in the scope
    units: list[int]  # starts of its direct blocks and child-region headers, in order
    guarded: set[int]  # units that need ``if L == n``
    restart: bool = False  # a back-edge restarts this scope's loop at a unit other than its header


REGION_BUDGET = 4_000_000  # candidate-region checks (regions x edges) before falling back to dispatch
# CPython refuses more than 20 statically nested blocks (CO_MAXBLOCKS). A function body may add one
# ``while`` (a restart loop) and a self-loop one more, so regions nest at most 16 deep; deeper ones use
# the dispatch form of their enclosing region (vm.md §6.2, decisions-vm-exec.md).
MAX_REGION_DEPTH = 16


def _shallow(regions: dict[int, int]) -> dict[int, int]:
    """The regions nested at most ``MAX_REGION_DEPTH`` deep (regions nest properly: a stack of the
    enclosing ``[header, last]`` intervals)."""
    kept: dict[int, int] = {}
    stack: list[int] = []  # ``last`` of each enclosing region
    for header in sorted(regions):
        while stack and stack[-1] < header:
            stack.pop()
        stack.append(regions[header])
        if len(stack) <= MAX_REGION_DEPTH:
            kept[header] = regions[header]
    return kept


class _FunctionEmitter:
    """One guest function as a plain Python function or a generator (vm.md §6.1-§6.3).

    Control flow (vm.md §6.2): blocks in slot order; self-loops and single-entry loop regions become
    native ``while`` loops; any other back-edge restarts the enclosing loop (a dispatch loop) and the
    blocks it must skip get ``if L == n`` guards, grouped under ``if L <= last`` range guards."""

    def __init__(self, code: LinkedCode, info: FuncInfo, infos: dict[int, FuncInfo], out: _Source,
                 comments: list[str]) -> None:
        self.code, self.info, self.infos, self.out = code, info, infos, out
        self.comments = comments
        self.gen = info.generator
        self.blocks = info.blocks
        # vm.md §6.1: a generator without back-edges and calls (a long loop-free function) has no other
        # yield, so it charges its fuel at each exit and may yield PREEMPT there
        self.exit_charge = self.gen and not info.back_edges and not any(
            code.insns[slot].op == isa.OP_CALL for b in self.blocks for slot in b.slots)
        self.by_start = {b.start: b for b in self.blocks}
        self.order = {b.start: i for i, b in enumerate(self.blocks)}
        self.self_loops = self._self_loops()
        self.regions = self._regions()
        self.uncharged = self._uncharged_in()
        self.narrow: frozenset[int] = frozenset()  # registers below 2^32 at the end of the last body
        self.narrow_in = self._narrow_in()
        self.scope = self._make_scope(None, self.blocks[0].start, self.blocks[-1].start)

    # -- control-flow facts --

    def _self_loops(self) -> set[int]:
        """Blocks whose only back-edge is their own (native ``while``, vm.md §6.2)."""
        backs: dict[int, set[int]] = {}
        for b in self.blocks:
            for s in b.succ:
                if s <= b.start:
                    backs.setdefault(s, set()).add(b.start)
        return {t for t, srcs in backs.items() if srcs == {t}}

    def _narrow_in(self) -> dict[int, frozenset[int]]:
        """Registers below 2^32 at each block entry, on every path (forward dataflow to a fixpoint;
        r0 and r6-r9 start at zero)."""
        everything = frozenset(range(10))
        zeros = frozenset({0, 6, 7, 8, 9})
        into: dict[int, frozenset[int]] = {b.start: everything for b in self.blocks}
        preds: dict[int, list[int]] = {b.start: [] for b in self.blocks}
        for b in self.blocks:
            for s in b.succ:
                preds[s].append(b.start)
        out: dict[int, frozenset[int]] = {}
        changed = True
        while changed:
            changed = False
            for b in self.blocks:
                known = [out[p] for p in preds[b.start] if p in out]
                if b.start == self.blocks[0].start:
                    known.append(zeros)
                into[b.start] = frozenset.intersection(*known) if known else everything
                narrow = into[b.start]
                for slot in b.slots:
                    narrow = narrow_after(self.code.insns[slot], narrow)
                if out.get(b.start) != narrow:
                    out[b.start], changed = narrow, True
        return into

    def _regions(self) -> dict[int, int]:
        """Loop regions header -> last block: entered only at the header, left only forward past the
        last block (so regions nest properly and become ``while True`` loops)."""
        sources: dict[int, set[int]] = {}
        for b in self.blocks:
            for s in b.succ:
                if s <= b.start and s not in self.self_loops:
                    sources.setdefault(s, set()).add(b.start)
        edges = [(b.start, s) for b in self.blocks for s in b.succ]
        if sum(map(len, sources.values())) * len(edges) > REGION_BUDGET:
            return {}
        valid: dict[int, int] = {}
        for t, his in sources.items():
            # the widest valid region; other back-edges into t then enter it from below
            for hi in sorted(his, reverse=True):
                if all((t <= src <= hi) == (t <= dst <= hi) or (t <= src <= hi and dst > hi)
                       or (not t <= src <= hi and dst == t) for src, dst in edges):
                    valid[t] = hi
                    break
        return _shallow(valid)

    def _uncharged_in(self) -> dict[int, int]:
        """vm.md §6.3: worst-case instructions since the last fuel charge at each block entry (loop
        headers count from 0: their forward entry is charged before the loop starts)."""
        u_in: dict[int, int] = {self.blocks[0].start: 0}
        self.entry_charge: dict[int, int] = {}
        for b in self.blocks:
            u = u_in.get(b.start, 0)
            if b.start in self.self_loops or b.start in self.regions:
                self.entry_charge[b.start], u = u, 0
            for slot in b.slots:
                u = 0 if self.code.insns[slot].op == isa.OP_CALL else u + 1
            for s in b.succ:
                if s > b.start:
                    u_in[s] = max(u_in.get(s, 0), u)
        return u_in

    def _make_scope(self, header: int | None, lo: int, hi: int) -> _Scope:
        """Units of a scope and their guards (a difference array over unit positions)."""
        units: list[int] = []
        unit_of: dict[int, int] = {}
        i = self.order[lo]
        while i < len(self.blocks) and self.blocks[i].start <= hi:
            start = self.blocks[i].start
            end = self.regions[start] if start in self.regions and start != header else start
            units.append(start)
            while i < len(self.blocks) and self.blocks[i].start <= end:
                unit_of[self.blocks[i].start] = len(units) - 1
                i += 1
        cross = [0] * (len(units) + 1)
        restart = False
        for start, ua in unit_of.items():
            direct = units[ua] == start and (start not in self.regions or start == header)
            for s in self.by_start[start].succ:
                if s not in unit_of or s == header or (s == start and s in self.self_loops):
                    continue  # exits break at once; back to the header or a self-loop: no skipping
                us = unit_of[s]
                if s > start and us > ua:
                    cross[ua + 1] += 1
                    cross[us] -= 1
                elif s <= start and direct:  # any other back-edge restarts this scope's loop
                    restart = True
                    cross[0] += 1
                    cross[us] -= 1
        guarded: set[int] = set()
        depth = 0
        for k, u in enumerate(units):
            depth += cross[k]
            if depth > 0:
                guarded.add(u)
        return _Scope(header, lo, hi, units, guarded, restart)

    # -- emission --

    def emit(self) -> None:
        params = "r1, r2, r3, r4, r5, fp, fuel" if self.gen else "r1, r2, r3, r4, r5, fp"
        # vm.md §9 S11: no name of the ELF in the source; names come from the line table (§8)
        self.out.add(2, f"def f{self.info.index}({params}):")
        self.out.add(3, "r0 = r6 = r7 = r8 = r9 = 0")
        depth = 3
        scope = self.scope
        self.out.add(3, f"L = {self.blocks[0].start}")
        if scope.restart:
            self.out.add(3, "while True:")
            depth = 4
        self._sequence(scope.units, depth)

    def _next(self, start: int) -> int | None:
        i = self.order[start] + 1
        return self.blocks[i].start if i < len(self.blocks) else None

    def _sequence(self, units: list[int], depth: int) -> None:
        """Units in order; runs of them sit under ``if L <= last:`` so a jump passes a run with one
        comparison (L never points behind the current position: every jump sets it)."""
        if len(units) <= RUN:
            for u in units:
                self._unit(u, depth)
            return
        size = -(-len(units) // RUN)
        for k in range(0, len(units), size):
            chunk = units[k : k + size]
            if len(chunk) > 1 and chunk[0] in self.scope.guarded:
                self.out.add(depth, f"if L <= {chunk[-1]}:")
                self._sequence(chunk, depth + 1)
            else:
                self._sequence(chunk, depth)

    def _unit(self, start: int, depth: int) -> None:
        if start in self.scope.guarded:
            self.out.add(depth, f"if L == {start}:")
            depth += 1
        mark = len(self.out.lines)
        if start in self.regions and start != self.scope.header:
            self._region(start, depth)
        elif start in self.self_loops:
            self._self_loop(self.by_start[start], depth)
        else:
            b = self.by_start[start]
            u = self._body(b, depth, self.uncharged.get(b.start, 0))
            self._terminator(b, depth, u)
        if len(self.out.lines) == mark:
            self.out.add(depth, "pass")

    def _region(self, header: int, depth: int) -> None:
        """A single-entry loop region as ``while True`` (vm.md §6.2 loop recognition)."""
        outer = self.scope
        inner = self.scope = self._make_scope(header, header, self.regions[header])
        self._entry_charge(header, depth)
        if inner.guarded:
            self.out.add(depth, f"L = {header}")
        self.out.add(depth, "while True:")
        self._sequence(inner.units, depth + 1)
        self.scope = outer
        # an exit past the enclosing region leaves that loop too
        if outer.header is not None:
            self.out.add(depth, f"if L > {outer.hi}:")
            self.out.add(depth + 1, "break")

    def _entry_charge(self, header: int, depth: int) -> None:
        pre = self.entry_charge.get(header, 0)
        if pre and self.gen:
            self.out.add(depth, f"fuel -= {pre}", header)

    def _body(self, b: Block, depth: int, u: int) -> int:
        """Emit the block's non-terminator instructions; returns the uncharged count at its end."""
        body = b.slots[:-1] if b.term is not None else b.slots
        narrow = self.narrow_in[b.start]
        for slot in body:
            insn = self.code.insns[slot]
            u += 1
            if insn.op == isa.OP_CALL:
                self._call(insn, slot, depth, u)
                u = 0
            else:
                for k, line in enumerate(straight_line(insn, slot, narrow)):
                    self.out.add(depth, line + (self._comment(slot) if k == 0 else ""), slot)
            narrow = narrow_after(insn, narrow)
        self.narrow = narrow
        return u + (1 if b.term is not None else 0)

    def _comment(self, slot: int) -> str:
        return f"  # {self.comments[slot]}" if self.comments else ""

    def _charge_lines(self, amount: int) -> list[tuple[int, str]]:
        return [(0, f"fuel -= {amount}"), (0, "if fuel <= 0:"), (1, PREEMPT_YIELD)]

    def _transfer(self, target: int, b: Block, u: int, fall: bool) -> tuple[list[tuple[int, str]], bool]:
        """Lines (relative depth, text) that move control to ``target``, and whether they leave the
        current straight-line flow (continue/break)."""
        scope = self.scope
        if target == scope.header and target not in scope.guarded:
            return [*self._charge_lines(u), (0, "continue")], True
        if target == scope.header or (target <= b.start and target in scope.units):
            return [*self._charge_lines(u), (0, f"L = {target}"), (0, "continue")], True
        if scope.header is not None and target > scope.hi:
            return [(0, f"L = {target}"), (0, "break")], True
        if fall and target not in scope.guarded:
            return [], False
        return [(0, f"L = {target}")], False

    def _emit_lines(self, lines: list[tuple[int, str]], depth: int, slot: int) -> None:
        for rel, text in lines:
            self.out.add(depth + rel, text, slot)

    def _terminator(self, b: Block, depth: int, u: int) -> None:
        term, out = b.term, self.out
        nxt = self._next(b.start)
        if term is None:
            if nxt is not None:
                self._emit_lines(self._transfer(nxt, b, u, True)[0], depth, b.slots[-1])
            return
        slot = b.slots[-1]
        if term.op & 0xF0 == isa.EXIT:
            if self.exit_charge:
                self._emit_lines(self._charge_lines(u), depth, slot)
            out.add(depth, ("return r0, fuel" if self.gen else "return r0") + self._comment(slot), slot)
            return
        target = b.target
        assert target is not None
        if term.op & 0xF0 == isa.JA:
            self._emit_lines(self._transfer(target, b, u, False)[0], depth, slot)
            return
        cond = _condition(term, slot, self.narrow)
        if nxt is None or nxt == target:
            self._emit_lines(self._transfer(target, b, u, False)[0], depth, slot)
            return
        jump, jump_leaves = self._transfer(target, b, u, False)
        fall, fall_leaves = self._transfer(nxt, b, u, True)
        if not jump_leaves and not fall_leaves:
            out.add(depth, f"L = {target} if {cond} else {nxt}" + self._comment(slot), slot)
        elif jump_leaves:
            out.add(depth, f"if {cond}:" + self._comment(slot), slot)
            self._emit_lines(jump, depth + 1, slot)
            self._emit_lines(fall, depth, slot)
        else:
            out.add(depth, f"if not ({cond}):" + self._comment(slot), slot)
            self._emit_lines(fall, depth + 1, slot)
            self._emit_lines(jump, depth, slot)

    def _self_loop(self, b: Block, depth: int) -> None:
        """A block jumping back to itself becomes a native ``while`` loop (vm.md §6.2)."""
        slot = b.slots[-1]
        self._entry_charge(b.start, depth)
        self.out.add(depth, "while True:", b.start)
        u = self._body(b, depth + 1, 0)
        term = b.term
        assert term is not None
        if term.op & 0xF0 != isa.JA:
            self.out.add(depth + 1, f"if not ({_condition(term, slot, self.narrow)}):" + self._comment(slot), slot)
            self.out.add(depth + 2, "break", slot)
        self._emit_lines(self._charge_lines(u), depth + 1, slot)
        nxt = self._next(b.start)
        if nxt is not None and term.op & 0xF0 != isa.JA:
            self._emit_lines(self._transfer(nxt, b, u, True)[0], depth, slot)

    # -- calls (vm.md §6.1, §6.2) --

    def _call(self, insn: Insn, slot: int, depth: int, u: int) -> None:
        out = self.out
        if insn.src == isa.PSEUDO_CALL:
            callee = self.infos[insn.imm]
            fp = f"fp - {self.info.func.frame_bytes}" if self.info.func.frame_bytes else "fp"
            args = f"r1, r2, r3, r4, r5, {fp}"
            if callee.generator:
                out.add(depth, f"r0, fuel = yield from f{insn.imm}({args}, fuel - {u})"
                        + self._comment(slot), slot)
                out.add(depth, "if fuel <= 0:", slot)
                out.add(depth + 1, PREEMPT_YIELD, slot)
                return
            out.add(depth, f"r0 = f{insn.imm}({args})" + self._comment(slot), slot)
            if self.gen:
                if callee.helper_debt:
                    self._charge_debt(depth, u + callee.cost, slot)
                else:
                    self._emit_lines(self._charge_lines(u + callee.cost), depth, slot)
            return
        name = self.code.helpers[insn.imm]
        if name in SUSPENDING_HELPERS:
            regs = "".join(f"r{i}, " for i in range(1, SUSPENDING_HELPERS[name] + 1))
            out.add(depth, f"fuel -= {u}", slot)
            op = _yield_op(name)
            out.add(depth, f"r0, fuel = yield ({op}, fuel, ({regs}))" + self._comment(slot), slot)
            out.add(depth, f"r0 &= {M64}", slot)
            out.add(depth, "if fuel <= 0:", slot)
            out.add(depth + 1, PREEMPT_YIELD, slot)
            return
        args = ", ".join(["env", *(f"r{i}" for i in range(1, SYNC_HELPERS[name] + 1))])
        out.add(depth, f"r0 = h{insn.imm}({args}) & {M64}" + self._comment(slot), slot)
        if self.gen:
            self._charge_debt(depth, u, slot)

    def _charge_debt(self, depth: int, units: int, slot: int) -> None:
        # vm.md §6.3: static cost plus the helper charges accumulated in env.debt
        self.out.add(depth, f"fuel -= {units} + env.debt", slot)
        self.out.add(depth, "env.debt = 0", slot)
        self.out.add(depth, "if fuel <= 0:", slot)
        self.out.add(depth + 1, PREEMPT_YIELD, slot)


_SUSPENDING = tuple(SUSPENDING_HELPERS)


def _yield_op(name: str) -> str:
    """vm.md §9 S11: a suspending helper's op is a prebound name (``Y`` + its helper-table index), so no
    string of the ELF, nor any string at all, is written into the source."""
    return f"Y{_SUSPENDING.index(name)}"


# ================================================================ the shape module


def _bswap(width: int) -> Callable[[int], int]:
    nbytes = width // 8
    mask = (1 << width) - 1
    return lambda v: int.from_bytes((v & mask).to_bytes(nbytes, "little"), "big")


NAMESPACE: dict[str, Any] = {
    "LDH": struct.Struct("<H").unpack_from, "LDW": struct.Struct("<I").unpack_from,
    "LDQ": struct.Struct("<Q").unpack_from, "LDSB": struct.Struct("<b").unpack_from,
    "LDSH": struct.Struct("<h").unpack_from, "LDSW": struct.Struct("<i").unpack_from,
    "STH": struct.Struct("<H").pack_into, "STW": struct.Struct("<I").pack_into,
    "STQ": struct.Struct("<Q").pack_into, "BAD": 1 << 64, "SDIV": sdiv, "SMOD": smod,
    "BSWAP32": _bswap(32), "BSWAP64": _bswap(64), "PREEMPT": PREEMPT,
    **{f"Y{i}": name for i, name in enumerate(_SUSPENDING)},
}


def generate(code: LinkedCode, key: str, recipe: tuple[tuple[int, int], ...], *,
             comments: bool) -> tuple[str, _Source, dict[int, FuncInfo]]:
    """The Python source of a shape; ``comments`` adds each instruction's disassembly at the end of its
    line (line numbers are the same either way, so one line table serves both)."""
    infos = analyse_program(code)
    out = _Source()
    # vm.md §9 S11: integers and fixed templates only (the key is printed from its integer value)
    out.add(0, f"# wakeful translation of shape {int(key, 16):064x} "
            f"({'generator' if infos[code.entry].generator else 'plain'}"
            " entry)")
    # the lifted constants (kN, W) are globals of the shape's functions, not closure cells: a cell would be
    # one slot of every instance's closure and of every live generator frame (vm.md §10: ~2.6 KB each for a
    # guide example); a global is one entry of the dict its constant vector shares (``_factory``)
    out.add(0, "def shape():")
    # the sync helpers (hN) are globals too: plain functions taking the env first, one set per env class
    # (vm/program.py), so an instance holds no bound method and no cell per helper
    out.add(1, "def instance(M, env):")
    notes = _comments(code) if comments else []
    for index in sorted(infos):
        _FunctionEmitter(code, infos[index], infos, out, notes).emit()
    out.add(2, f"return f{code.entry}")
    out.add(1, "return instance")
    return "\n".join(out.lines) + "\n", out, infos


# CPython limits our generated source can still hit (nesting, indentation, parser/compiler recursion)
UNTRANSLATABLE = (SyntaxError, RecursionError, MemoryError, ValueError)


class Untranslatable(WakefulError):
    """Generating or compiling a shape failed; the program runs on the reference interpreter."""


def translate(code: LinkedCode, key: str, recipe: tuple[tuple[int, int], ...]) -> Shape:
    """Generate, compile and register (``linecache``) the Python source of a shape (vm.md §6).

    The compiled source carries no comments (memory per shape); ``generate(..., comments=True)``
    rebuilds the annotated listing with identical line numbers for ``wakeful vm dump``."""
    # vm.md §9 S11: the filename names the entry by its function index (a shape serves every program
    # with that code, whatever its symbol names)
    filename = f"<wakeful:{int(key[:16], 16):016x}:f{code.entry}>"
    namespace = dict(NAMESPACE)
    try:
        source, out, infos = generate(code, key, recipe, comments=False)
        tree = ast.parse(source, filename)
        check_source(tree)  # vm.md §9 S11: the syntax allowlist, before compile()
        exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - our own generated, checked source
    except UnsafeSource as exc:
        raise Untranslatable(f"generated source refused by the S11 allowlist: {exc}") from None
    except UNTRANSLATABLE as exc:  # vm.md §9 S8: never an internal error (decisions-vm-exec.md)
        raise Untranslatable(f"{type(exc).__name__}: {exc}") from None
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    table = array("i", [-1]) * (len(out.lines) + 1)
    for line, slot in out.table.items():
        table[line] = slot
    entry = infos[code.entry]
    names = (*(f"k{slot}" for slot, _ in recipe), "W",
             *(f"h{i}" for i, name in enumerate(code.helpers) if name in SYNC_HELPERS))
    return Shape(key, filename, _factory(namespace, names), table, entry.generator, entry.cost,
                 frozenset(i for i, f in infos.items() if f.generator))


def _factory(namespace: dict[str, Any], names: tuple[str, ...]) -> Callable[..., Any]:
    """``factory(*constants, W, *helpers) -> instance``: the shape's code run with a globals dict holding the
    prebound names, this constant vector and these helper functions (one dict per vector and helper set,
    shared by every instance made from it)."""
    code = namespace["shape"].__code__

    def factory(*values: int) -> Any:
        if len(values) != len(names):
            raise TypeError(f"a shape factory takes {len(names)} constants, not {len(values)}")
        cells = dict(namespace)
        cells.update(zip(names, values))
        return FunctionType(code, cells)()

    return factory


def _comments(code: LinkedCode) -> list[str]:
    """Per-slot ``function+pc: disassembly`` (constants as in the program that created the shape)."""
    from wakeful.vm.interp import insn_text

    out = [""] * len(code.insns)
    for func in code.functions:
        for slot in range(func.start, func.end):
            # a display-only listing (never compiled); ascii() keeps any name on its comment line
            out[slot] = ascii(f"{func.name}+{slot - func.start}: {insn_text(code, slot)}")[1:-1]
    return out


# ================================================================ faults off the hot path (vm.md §8)


def _frames(tb: TracebackType | None, filename: str) -> tuple[TracebackType | None, TracebackType | None]:
    """(innermost frame of translated code, innermost frame overall)."""
    ours = last = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            ours = tb
        last = tb
        tb = tb.tb_next
    return ours, last


def _where(code: LinkedCode, slot: int) -> tuple[str, int, str]:
    from wakeful.vm.interp import insn_text

    func = code.functions[code.function_of(slot)]
    return func.name, slot - func.start, insn_text(code, slot)


def recover_fault(exc: BaseException, code: LinkedCode, shape: Shape, writable: int) -> GuestFault | None:
    """The memory fault behind an IndexError/struct.error/OverflowError of translated code, or None
    when the exception did not come from a guest memory access (a VM bug: let it propagate)."""
    ours, last = _frames(exc.__traceback__, shape.filename)
    if ours is None or ours is not last:
        return None
    slot = shape.slot_at(ours.tb_lineno)
    if slot is None:
        return None
    insn = code.insns[slot]
    if insn.op & 0x07 not in (isa.LDX, isa.ST, isa.STX):
        return None
    base, size, write = memory_access(insn)
    regs = ours.tb_frame.f_locals
    value = regs["fp"] + BASE if base == 10 else regs[f"r{base}"]
    address = (value + insn.off) & isa.MASK64
    name, pc, text = _where(code, slot)
    return memory_fault(write, address, size, writable, function=name, pc=pc, insn=text)


def fill_fault(exc: GuestFault, code: LinkedCode, shape: Shape) -> None:
    """Give a helper-raised GuestFault the function, pc and instruction of its CALL."""
    if exc.function is not None:
        return
    ours, _ = _frames(exc.__traceback__, shape.filename)
    if ours is None:
        return
    slot = shape.slot_at(ours.tb_lineno)
    if slot is not None:
        exc.function, exc.pc, exc.insn = _where(code, slot)
