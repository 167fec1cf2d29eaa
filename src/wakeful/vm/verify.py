"""The verifier (vm.md §4, pipeline step 5): every rule code, the call graph, and frame sizes (§5.1, vm/frames.py).

Runs over every function of a ``Linked`` program; the first violation raises ``InvalidObject``.
"""

from __future__ import annotations

from dataclasses import dataclass

from wakeful.vm import isa
from wakeful.vm.disasm import ALU_OPS, JMP_OPS
from wakeful.vm.elf import JUMP_TABLE_HINT
from wakeful.vm.frames import MAX_FRAME, frame_sizes
from wakeful.vm.isa import Insn
from wakeful.vm.link import HELPER_HINT, Linked, Span, fail

__all__ = ["MAX_CALL_DEPTH", "MAX_FRAME", "VERIFIER_VERSION", "Verdict", "verify"]

VERIFIER_VERSION = 2  # 2: the sound frame rule of vm.md §5.1
MAX_CALL_DEPTH = 8


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the verifier decided beyond "valid": frames, the longest chain, the stack region."""

    frames: tuple[int, ...]
    chain: tuple[int, ...]  # function indexes, entry first
    stack_bytes: int
    callees: tuple[tuple[tuple[int, int], ...], ...]  # per function: (callee, call slot) in first-call order


def verify(linked: Linked) -> Verdict:
    """Check every function, then the call graph (RECURSION, CALL_DEPTH), then frame sizes."""
    for f in linked.funcs:
        _check_function(linked, f)
    callees = _callees(linked)
    order = _postorder(linked, callees)
    chain = _check_depth(linked, callees, order)
    frames = frame_sizes(linked, order)
    return Verdict(frames, chain, _stack_bytes(linked, callees, order, frames), callees)


# ---------------------------------------------------------------- per instruction


def _check_function(linked: Linked, f: Span) -> None:
    """All per-instruction rules for one function."""
    if linked.second[f.start]:
        fail(linked, "LDIMM64", f.start, "function starts on the second slot of an LD_IMM64")
    for slot in range(f.start, f.end):
        if not linked.second[slot]:
            target = _check_insn(linked, f, slot, linked.raw[slot])
            if target is not None:
                _check_target(linked, f, slot, target)
    _check_fallthrough(linked, f)


def _check_insn(linked: Linked, f: Span, slot: int, insn: Insn) -> int | None:
    """Rules of one instruction; returns its jump target slot, if it jumps."""
    # vm.md §4 JUMP_TABLE: no gotox (JMP | JA | X)
    if insn.op == isa.OP_GOTOX:
        fail(linked, "JUMP_TABLE", slot, JUMP_TABLE_HINT)
    cls = insn.op & 0x07
    # vm.md §4 REGISTER: register numbers <= 10 (CALL and LD_IMM64 src are pseudo sources, not registers)
    if insn.dst > 10 or (insn.src > 10 and insn.op not in (isa.OP_CALL, isa.OP_LDDW)):
        fail(linked, "REGISTER", slot, f"register number {max(insn.dst, insn.src)} does not exist (r0-r10)")
    if cls in (isa.ALU, isa.ALU64):
        _check_alu(linked, slot, insn)
    elif cls == isa.LD:
        _check_ld(linked, f, slot, insn)
    elif cls == isa.LDX:
        _check_ldx(linked, slot, insn)
    elif cls in (isa.ST, isa.STX):
        _check_store(linked, slot, insn)
    else:
        return _check_jmp(linked, slot, insn)
    return None


def _opcode(linked: Linked, slot: int, why: str = "opcode or unused field not accepted (vm.md §4.1)") -> None:
    fail(linked, "OPCODE", slot, why)


def _no_r10_write(linked: Linked, slot: int, reg: int) -> None:
    # vm.md §4 REGISTER: no instruction writes r10
    if reg == 10:
        fail(linked, "REGISTER", slot, "r10 (the frame pointer) is read-only")


# vm.md §4.1 ALU/ALU64: the listed ops, K and X forms, signed div/mod (off 1), MOVSX, END, BSWAP
def _check_alu(linked: Linked, slot: int, insn: Insn) -> None:
    if not _alu_ok(insn):
        _opcode(linked, slot)
    _no_r10_write(linked, slot, insn.dst)


def _alu_ok(insn: Insn) -> bool:
    op, _dst, src, off, imm = insn
    wide = op & 0x07 == isa.ALU64
    code, x = op & 0xF0, op & isa.X
    if code == isa.END:
        return not (src or off) and imm in (16, 32, 64) and not (wide and x)
    if code == isa.NEG:
        return not (x or src or off or imm)
    if code not in ALU_OPS:
        return False
    if off and not ((code in (isa.DIV, isa.MOD) and off == 1) or _movsx_ok(insn, wide)):
        return False
    return not imm if x else not src


def _movsx_ok(insn: Insn, wide: bool) -> bool:
    return insn.op & 0xF0 == isa.MOV and bool(insn.op & isa.X) and insn.off in ((8, 16, 32) if wide else (8, 16))


# vm.md §4 LDIMM64: two slots, second all zero but imm, src 0; LD ABS/IND refused
def _check_ld(linked: Linked, f: Span, slot: int, insn: Insn) -> None:
    if insn.op != isa.OP_LDDW:
        _opcode(linked, slot, "LD ABS/IND packet loads and other LD modes are not supported")
    if insn.src:
        fail(linked, "LDIMM64", slot, f"LD_IMM64 pseudo source {insn.src} (maps, BTF) is not supported")
    if insn.off:
        _opcode(linked, slot)
    nxt = linked.raw[slot + 1] if slot + 1 < f.end else None
    if nxt is None or not linked.second[slot + 1] or nxt.op or nxt.dst or nxt.src or nxt.off:
        fail(linked, "LDIMM64", slot, "the second slot of an LD_IMM64 must be zero except its imm")
    _no_r10_write(linked, slot, insn.dst)


# vm.md §4.1 LDX: MEM (B H W DW), MEMSX (B H W); imm unused
def _check_ldx(linked: Linked, slot: int, insn: Insn) -> None:
    mode, size = insn.op & 0xE0, insn.op & 0x18
    ok = mode == isa.MODE_MEM or (mode == isa.MODE_MEMSX and size != isa.SIZE_DW)
    if not ok or insn.imm:
        _opcode(linked, slot)
    _no_r10_write(linked, slot, insn.dst)
    _check_stack(linked, slot, insn.src, insn.off, size)


# vm.md §4.1 ST/STX MEM (B H W DW) and STX ATOMIC selectors
def _check_store(linked: Linked, slot: int, insn: Insn) -> None:
    mode, size = insn.op & 0xE0, insn.op & 0x18
    if mode == isa.MODE_ATOMIC and insn.op & 0x07 == isa.STX:
        _check_atomic(linked, slot, insn)
        return
    unused = insn.src if insn.op & 0x07 == isa.ST else insn.imm
    if mode != isa.MODE_MEM or unused:
        _opcode(linked, slot)
    _check_stack(linked, slot, insn.dst, insn.off, size)


_RMW = {isa.ATOMIC_ADD, isa.ATOMIC_OR, isa.ATOMIC_AND, isa.ATOMIC_XOR}


def _check_atomic(linked: Linked, slot: int, insn: Insn) -> None:
    size, imm = insn.op & 0x18, insn.imm
    if imm == isa.LOAD_ACQ:
        _no_r10_write(linked, slot, insn.dst)
        _check_stack(linked, slot, insn.src, insn.off, size)
        return
    if imm != isa.STORE_REL:
        wide_ok = size in (isa.SIZE_W, isa.SIZE_DW)
        if not wide_ok or not (imm & ~isa.FETCH in _RMW or imm in (isa.ATOMIC_XCHG, isa.ATOMIC_CMPXCHG)):
            _opcode(linked, slot, f"atomic selector {imm:#x} not accepted for this size (vm.md §4.1)")
        if imm & isa.FETCH and imm != isa.ATOMIC_CMPXCHG:
            _no_r10_write(linked, slot, insn.src)
    _check_stack(linked, slot, insn.dst, insn.off, size)


# vm.md §4 STACK: an r10-based access uses an offset in [-4096, 0) with off + size <= 0
def _check_stack(linked: Linked, slot: int, base: int, off: int, size: int) -> None:
    if base != 10:
        return
    width = isa.SIZE_BYTES[size]
    if not -MAX_FRAME <= off < 0 or off + width > 0:
        fail(linked, "STACK", slot, f"stack access at r10{off:+d} ({width} bytes) is outside [-{MAX_FRAME}, 0)")


# vm.md §4.1 JMP/JMP32: JA, gotol, conditionals (K and X), CALL, EXIT; callx refused
def _check_jmp(linked: Linked, slot: int, insn: Insn) -> int | None:
    op, dst, src, off, imm = insn
    wide = op & 0x07 == isa.JMP
    code, x = op & 0xF0, op & isa.X
    if code == isa.JA:
        if x or dst or src or (imm if wide else off):
            _opcode(linked, slot)
        return slot + (off if wide else imm) + 1
    if code == isa.CALL and wide:
        if x:
            fail(linked, "CALL_TARGET", slot, f"indirect calls (callx) are not supported; {HELPER_HINT}")
        if dst or off:
            _opcode(linked, slot)
        return None
    if code == isa.EXIT and wide:
        if x or dst or src or off or imm:
            _opcode(linked, slot)
        return None
    if code not in JMP_OPS or (imm if x else src):
        _opcode(linked, slot)
    return slot + off + 1


# vm.md §4 JUMP: every target inside the same function, never on an LD_IMM64 second slot
def _check_target(linked: Linked, f: Span, slot: int, target: int) -> None:
    if not f.start <= target < f.end:
        fail(linked, "JUMP", slot, f"target outside function {f.name} [0, {f.end - f.start})")
    if linked.second[target]:
        fail(linked, "JUMP", slot, "target is the second slot of an LD_IMM64")


# vm.md §4 FALLTHROUGH: the last instruction is exit, ja or gotol
def _check_fallthrough(linked: Linked, f: Span) -> None:
    last = f.end - 1
    if linked.second[last] and last > f.start:
        last -= 1
    if linked.raw[last].op not in (isa.OP_EXIT, isa.OP_JA, isa.OP_GOTOL):
        fail(linked, "FALLTHROUGH", last, f"execution can run past the end of {f.name}")


# ---------------------------------------------------------------- call graph


def _callees(linked: Linked) -> tuple[tuple[tuple[int, int], ...], ...]:
    out: list[dict[int, int]] = [{} for _ in linked.funcs]
    for slot, (is_helper, target) in sorted(linked.calls.items()):
        if not is_helper:
            out[linked.function_of(slot)].setdefault(int(target), slot)
    return tuple(tuple(d.items()) for d in out)


# vm.md §4 RECURSION: the static call graph is acyclic; the error lists the cycle
def _postorder(linked: Linked, callees: tuple[tuple[tuple[int, int], ...], ...]) -> list[int]:
    """Iterative DFS from the entry, then every other function; raises on the first back edge."""
    state = [0] * len(linked.funcs)  # 0 new, 1 on the path, 2 done
    order: list[int] = []
    roots = [linked.entry, *(i for i in range(len(linked.funcs)) if i != linked.entry)]
    for root in roots:
        if state[root]:
            continue
        path, stack = [root], [iter(callees[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                done = path.pop()
                state[done] = 2
                order.append(done)
                continue
            callee, call_slot = nxt
            if state[callee] == 1:
                names = [linked.funcs[i].name for i in path] + [linked.funcs[callee].name]
                fail(linked, "RECURSION", call_slot, "recursion: " + " → ".join(names))
            if state[callee] == 0:
                state[callee] = 1
                path.append(callee)
                stack.append(iter(callees[callee]))
    return order


# vm.md §4 CALL_DEPTH: the longest chain from the entry, entry included, has <= 8 functions
def _check_depth(linked: Linked, callees: tuple[tuple[tuple[int, int], ...], ...], order: list[int]) -> tuple[int, ...]:
    depth = [1] * len(linked.funcs)
    best: list[int | None] = [None] * len(linked.funcs)
    for f in order:  # callees come before callers in postorder
        for callee, _slot in callees[f]:
            if depth[callee] + 1 > depth[f]:
                depth[f], best[f] = depth[callee] + 1, callee
    chain = [linked.entry]
    while (nxt := best[chain[-1]]) is not None:
        chain.append(nxt)
    if len(chain) > MAX_CALL_DEPTH:
        caller, callee = chain[MAX_CALL_DEPTH - 1], chain[MAX_CALL_DEPTH]
        slot = dict(callees[caller])[callee]
        names = " → ".join(linked.funcs[i].name for i in chain)
        fail(linked, "CALL_DEPTH", slot, f"call chain of {len(chain)} functions exceeds {MAX_CALL_DEPTH}: {names}")
    return tuple(chain)


def _stack_bytes(
    linked: Linked, callees: tuple[tuple[tuple[int, int], ...], ...], order: list[int], frames: tuple[int, ...],
) -> int:
    # vm.md §5: the stack region is the maximum over call chains (from the entry) of the sum of frames
    total = list(frames)
    for f in order:
        below = max((total[c] for c, _ in callees[f]), default=0)
        total[f] = frames[f] + below
    return total[linked.entry]
