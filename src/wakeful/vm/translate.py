"""eBPF → Python generator source (vm.md §6): function kinds, code shape, fuel, line table, faults.

``translate(code)`` builds a :class:`~wakeful.vm.shapes.Shape` (source + compiled factory) for linked code;
``recover_fault`` turns a memory exception raised by translated code into the guest fault of vm.md §8.
"""

from __future__ import annotations

import linecache
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from wakeful.errors import GuestFault
from wakeful.vm import isa
from wakeful.vm.guest import HELPER_MAX_CHARGE, SUSPENDING_HELPERS, SYNC_HELPERS
from wakeful.vm.isa import BASE, Insn
from wakeful.vm.linked import Function, LinkedCode
from wakeful.vm.semantics import memory_access, memory_fault, sdiv, smod
from wakeful.vm.shapes import Shape

__all__ = ["PLAIN_COST_LIMIT", "fill_fault", "recover_fault", "translate"]

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


def _load(insn: Insn, dst: int, base: int, signed: bool) -> str:
    size = insn.op & 0x18
    idx = _read_index(base, insn.off)
    if size == isa.SIZE_B and not signed:
        return f"r{dst} = M[{idx}]"
    fetch = f"{_LOADS[(size, signed)]}(M, {idx})[0]"
    return f"r{dst} = {fetch} & {M64}" if signed else f"r{dst} = {fetch}"


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


PREEMPT_YIELD = "_, fuel = yield ('preempt', fuel, ())"
RUN = 4  # fan-out of the range guards over a function's blocks


class _FunctionEmitter:
    """One guest function as a plain Python function or a generator (vm.md §6.1-§6.3)."""

    def __init__(self, code: LinkedCode, info: FuncInfo, infos: dict[int, FuncInfo], out: _Source,
                 comments: list[str]) -> None:
        self.code, self.info, self.infos, self.out = code, info, infos, out
        self.comments = comments
        self.gen = info.generator
        self.blocks = info.blocks
        self.order = {b.start: i for i, b in enumerate(self.blocks)}
        self.self_loops = self._self_loops()
        self.restart = any(s <= b.start and s not in self.self_loops for b in self.blocks for s in b.succ)
        self.guarded = self._guards()
        self.uncharged = self._uncharged_in()
        self.narrow: frozenset[int] = frozenset()  # registers below 2^32 at the end of the last body

    # -- control-flow facts --

    def _self_loops(self) -> set[int]:
        """Blocks whose only back-edge is their own (native ``while``, vm.md §6.2)."""
        backs: dict[int, set[int]] = {}
        for b in self.blocks:
            for s in b.succ:
                if s <= b.start:
                    backs.setdefault(s, set()).add(b.start)
        return {t for t, srcs in backs.items() if srcs == {t}}

    def _guards(self) -> set[int]:
        """A block needs ``if L == n`` when some jump passes over it or a restart skips it (linear time:
        a difference array over block positions)."""
        pos = self.order
        cross = [0] * (len(self.blocks) + 1)
        for b in self.blocks:
            for s in b.succ:
                if s > b.start:
                    cross[pos[b.start] + 1] += 1
                    cross[pos[s]] -= 1
                elif s not in self.self_loops:
                    cross[0] += 1
                    cross[pos[s]] -= 1
        guarded: set[int] = set()
        depth = 0
        for i, b in enumerate(self.blocks):
            depth += cross[i]
            if depth > 0:
                guarded.add(b.start)
        return guarded

    def _uncharged_in(self) -> dict[int, int]:
        """vm.md §6.3: worst-case instructions since the last fuel charge at each block entry."""
        u_in: dict[int, int] = {self.blocks[0].start: 0}
        for b in self.blocks:
            u = 0 if b.start in self.self_loops else u_in.get(b.start, 0)
            for slot in b.slots:
                u = 0 if self.code.insns[slot].op == isa.OP_CALL else u + 1
            for s in b.succ:
                if s > b.start:
                    u_in[s] = max(u_in.get(s, 0), u)
        return u_in

    # -- emission --

    def emit(self) -> None:
        f = self.info.func
        params = "r1, r2, r3, r4, r5, fp, fuel" if self.gen else "r1, r2, r3, r4, r5, fp"
        self.out.add(2, f"def f{self.info.index}({params}):  # {f.name}")
        self.out.add(3, "r0 = r6 = r7 = r8 = r9 = 0")
        depth = 3
        if self.guarded:
            self.out.add(3, f"L = {self.blocks[0].start}")
        if self.restart:
            self.out.add(3, "while True:")
            depth = 4
        self._sequence(self.blocks, depth)

    def _next(self, b: Block) -> int | None:
        i = self.order[b.start] + 1
        return self.blocks[i].start if i < len(self.blocks) else None

    def _sequence(self, blocks: list[Block], depth: int) -> None:
        """Blocks in order; runs of them sit under ``if L <= last:`` so a jump passes a run with one
        comparison (L never points behind the current position: every jump sets it)."""
        if len(blocks) <= RUN:
            for b in blocks:
                self._block(b, self._next(b), depth)
            return
        size = -(-len(blocks) // RUN)
        for k in range(0, len(blocks), size):
            chunk = blocks[k : k + size]
            if len(chunk) > 1 and chunk[0].start in self.guarded:
                self.out.add(depth, f"if L <= {chunk[-1].start}:")
                self._sequence(chunk, depth + 1)
            else:
                self._sequence(chunk, depth)

    def _block(self, b: Block, nxt: int | None, depth: int) -> None:
        if b.start in self.guarded:
            self.out.add(depth, f"if L == {b.start}:")
            depth += 1
        mark = len(self.out.lines)
        if b.start in self.self_loops:
            self._self_loop(b, nxt, depth)
        else:
            u = self._body(b, depth, self.uncharged.get(b.start, 0))
            self._terminator(b, nxt, depth, u)
        if len(self.out.lines) == mark:
            self.out.add(depth, "pass", b.slots[-1])

    def _body(self, b: Block, depth: int, u: int) -> int:
        """Emit the block's non-terminator instructions; returns the uncharged count at its end."""
        body = b.slots[:-1] if b.term is not None else b.slots
        narrow: frozenset[int] = frozenset()
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

    def _charge(self, depth: int, amount: str, slot: int) -> None:
        self.out.add(depth, f"fuel -= {amount}", slot)
        self.out.add(depth, "if fuel <= 0:", slot)
        self.out.add(depth + 1, PREEMPT_YIELD, slot)

    def _set(self, target: int, jump: bool = True) -> str | None:
        """``L = target`` for every jump (range guards rely on it) and for falls into a guarded block."""
        return f"L = {target}" if self.guarded and (jump or target in self.guarded) else None

    def _terminator(self, b: Block, nxt: int | None, depth: int, u: int) -> None:
        term, out = b.term, self.out
        if term is None:
            if nxt is not None and (line := self._set(nxt, jump=False)):
                out.add(depth, line)
            return
        slot = b.slots[-1]
        if term.op & 0xF0 == isa.EXIT:
            out.add(depth, ("return r0, fuel" if self.gen else "return r0") + self._comment(slot), slot)
            return
        target = b.target
        assert target is not None
        if term.op & 0xF0 == isa.JA:
            self._goto(target, b, depth, u, slot)
            return
        cond = _condition(term, slot, self.narrow)
        fall = nxt if nxt is not None and nxt != target else None
        if target <= b.start:
            out.add(depth, f"if {cond}:" + self._comment(slot), slot)
            self._goto(target, b, depth + 1, u, slot)
            if fall is not None and (line := self._set(fall, jump=False)):
                out.add(depth, line, slot)
            return
        if fall is None:
            if line := self._set(target):
                out.add(depth, line, slot)
            return
        out.add(depth, f"L = {target} if {cond} else {fall}" + self._comment(slot), slot)

    def _goto(self, target: int, b: Block, depth: int, u: int, slot: int) -> None:
        if target > b.start:
            if line := self._set(target):
                self.out.add(depth, line, slot)
            return
        # back-edge (vm.md §6.3): charge, maybe preempt, restart the dispatch loop
        self._charge(depth, str(u), slot)
        self.out.add(depth, f"L = {target}", slot)
        self.out.add(depth, "continue", slot)

    def _self_loop(self, b: Block, nxt: int | None, depth: int) -> None:
        """A block jumping back to itself becomes a native ``while`` loop (vm.md §6.2)."""
        pre = self.uncharged.get(b.start, 0)
        slot = b.slots[-1]
        if pre and self.gen:
            self.out.add(depth, f"fuel -= {pre}", b.start)
        self.out.add(depth, "while True:", b.start)
        u = self._body(b, depth + 1, 0)
        term = b.term
        assert term is not None
        if term.op & 0xF0 != isa.JA:
            self.out.add(depth + 1, f"if not ({_condition(term, slot, self.narrow)}):" + self._comment(slot), slot)
            self.out.add(depth + 2, "break", slot)
        self._charge(depth + 1, str(u), slot)
        if nxt is not None and term.op & 0xF0 != isa.JA and (line := self._set(nxt, jump=False)):
            self.out.add(depth, line, slot)

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
                self._charge_debt(depth, u + callee.cost, slot)
            return
        name = self.code.helpers[insn.imm]
        if name in SUSPENDING_HELPERS:
            regs = "".join(f"r{i}, " for i in range(1, SUSPENDING_HELPERS[name] + 1))
            out.add(depth, f"fuel -= {u}", slot)
            out.add(depth, f"r0, fuel = yield ({name!r}, fuel, ({regs}))" + self._comment(slot), slot)
            out.add(depth, f"r0 &= {M64}", slot)
            out.add(depth, "if fuel <= 0:", slot)
            out.add(depth + 1, PREEMPT_YIELD, slot)
            return
        regs = ", ".join(f"r{i}" for i in range(1, SYNC_HELPERS[name] + 1))
        out.add(depth, f"r0 = h{insn.imm}({regs}) & {M64}" + self._comment(slot), slot)
        if self.gen:
            self._charge_debt(depth, u, slot)

    def _charge_debt(self, depth: int, units: int, slot: int) -> None:
        # vm.md §6.3: static cost plus the helper charges accumulated in env.debt
        self.out.add(depth, f"fuel -= {units} + env.debt", slot)
        self.out.add(depth, "env.debt = 0", slot)
        self.out.add(depth, "if fuel <= 0:", slot)
        self.out.add(depth + 1, PREEMPT_YIELD, slot)


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
    "BSWAP32": _bswap(32), "BSWAP64": _bswap(64),
}


def translate(code: LinkedCode, key: str, recipe: tuple[tuple[int, int], ...], *,
              comments: list[str] | None = None) -> Shape:
    """Generate, compile and register the Python source of a shape (vm.md §6)."""
    infos = analyse_program(code)
    out = _Source()
    params = ", ".join([*(f"k{slot}" for slot, _ in recipe), "W"])
    out.add(0, f"# wakeful translation of shape {key} ({'generator' if infos[code.entry].generator else 'plain'}"
            " entry)")
    out.add(0, f"def shape({params}):")
    out.add(1, "def instance(M, env, H):")
    for i, name in enumerate(code.helpers):
        if name in SYNC_HELPERS:
            out.add(2, f"h{i} = H[{i}]  # {name}")
    if comments is None:
        comments = _comments(code)
    for index in sorted(infos):
        _FunctionEmitter(code, infos[index], infos, out, comments).emit()
    out.add(2, f"return f{code.entry}")
    out.add(1, "return instance")
    source = "\n".join(out.lines) + "\n"
    entry_name = code.functions[code.entry].name
    filename = f"<wakeful:{key[:16]}:{entry_name}>"
    namespace = dict(NAMESPACE)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated source
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    entry = infos[code.entry]
    return Shape(key, source, filename, namespace["shape"], out.table, entry.generator, entry.cost,
                 frozenset(i for i, f in infos.items() if f.generator))


def _comments(code: LinkedCode) -> list[str]:
    """Per-slot ``function+pc: disassembly`` (constants as in the program that created the shape)."""
    from wakeful.vm.interp import insn_text

    out = [""] * len(code.insns)
    for func in code.functions:
        for slot in range(func.start, func.end):
            out[slot] = f"{func.name}+{slot - func.start}: {insn_text(code, slot)}"
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
    slot = shape.lines.get(ours.tb_lineno)
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
    slot = shape.lines.get(ours.tb_lineno)
    if slot is not None:
        exc.function, exc.pc, exc.insn = _where(code, slot)
