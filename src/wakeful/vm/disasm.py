"""RFC 9669 pseudo-C disassembly (vm.md §4.2): the one grammar for verifier errors, faults and dumps.

``vm/asm.py`` parses exactly this text back; anything without a canonical form prints as ``.raw``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from wakeful.vm import isa
from wakeful.vm.isa import MASK32, MASK64, Insn

if TYPE_CHECKING:
    from wakeful.vm.linked import LinkedCode, VerifyReport

__all__ = [
    "ALU_OPS",
    "JMP_OPS",
    "disasm_bytes",
    "disasm_function",
    "disasm_insn",
    "dump",
    "raw",
]

# vm.md §4.2 / RFC 9669 §4.1: ALU operation -> compound operator (signed forms use off == 1)
ALU_OPS: dict[int, str] = {
    isa.ADD: "+=", isa.SUB: "-=", isa.MUL: "*=", isa.DIV: "/=", isa.OR: "|=", isa.AND: "&=",
    isa.LSH: "<<=", isa.RSH: ">>=", isa.MOD: "%=", isa.XOR: "^=", isa.MOV: "=", isa.ARSH: "s>>=",
}
SIGNED_ALU_OPS: dict[int, str] = {isa.DIV: "s/=", isa.MOD: "s%="}

# RFC 9669 §4.3: conditional jump operation -> comparison operator
JMP_OPS: dict[int, str] = {
    isa.JEQ: "==", isa.JGT: ">", isa.JGE: ">=", isa.JSET: "&", isa.JNE: "!=", isa.JSGT: "s>",
    isa.JSGE: "s>=", isa.JLT: "<", isa.JLE: "<=", isa.JSLT: "s<", isa.JSLE: "s<=",
}

SIZE_NAMES: dict[int, int] = {isa.SIZE_B: 8, isa.SIZE_H: 16, isa.SIZE_W: 32, isa.SIZE_DW: 64}

# RFC 9669 §5.3: atomic selector (without FETCH) -> operator / fetch function name
ATOMIC_OPS: dict[int, tuple[str, str]] = {
    isa.ATOMIC_ADD: ("+=", "atomic_fetch_add"),
    isa.ATOMIC_OR: ("|=", "atomic_fetch_or"),
    isa.ATOMIC_AND: ("&=", "atomic_fetch_and"),
    isa.ATOMIC_XOR: ("^=", "atomic_fetch_xor"),
}


def raw(insn: Insn) -> str:
    """The escape form for encodings with no canonical text (also parsed by ``vm/asm.py``)."""
    return f".raw 0x{insn.op:02x} {insn.dst} {insn.src} {insn.off} {insn.imm}"


def _off(off: int) -> str:
    return f"+ {off}" if off >= 0 else f"- {-off}"


def _rel(off: int) -> str:
    return f"+{off}" if off >= 0 else str(off)


def _ptr(size: int, reg: int, off: int, signed: bool = False) -> str:
    kind = "s" if signed else "u"
    return f"({kind}{SIZE_NAMES[size]} *)(r{reg} {_off(off)})"


def _mem(size: int, reg: int, off: int, signed: bool = False) -> str:
    return "*" + _ptr(size, reg, off, signed)


def _s32(imm: int) -> int:
    imm &= MASK32
    return imm - (1 << 32) if imm & isa.SIGN32 else imm


# -- ALU / ALU64 (RFC 9669 §4.1, §4.2) --


def _alu(insn: Insn) -> str | None:
    op, dst, src, off, imm = insn
    wide = isa.insn_class(op) == isa.ALU64
    r = "r" if wide else "w"
    code = op & 0xF0
    if code == isa.END:
        return _end(insn, wide)
    if code == isa.NEG:
        if op & isa.X or src or off or imm:
            return None
        return f"{r}{dst} = -{r}{dst}"
    name = _alu_name(code, off)
    if name is None:
        return None
    if code == isa.MOV and off:
        return _movsx(insn, wide)
    if op & isa.X:
        return None if imm else f"{r}{dst} {name} {r}{src}"
    return None if src else f"{r}{dst} {name} {_s32(imm)}"


def _alu_name(code: int, off: int) -> str | None:
    if off == 1 and code in SIGNED_ALU_OPS:
        return SIGNED_ALU_OPS[code]
    if off and code != isa.MOV:
        return None
    return ALU_OPS.get(code)


def _movsx(insn: Insn, wide: bool) -> str | None:
    op, dst, src, off, imm = insn
    allowed = (8, 16, 32) if wide else (8, 16)
    if not op & isa.X or imm or off not in allowed:
        return None
    r = "r" if wide else "w"
    return f"{r}{dst} = (s{off}){r}{src}"


def _end(insn: Insn, wide: bool) -> str | None:
    op, dst, src, off, imm = insn
    if src or off or imm not in (16, 32, 64):
        return None
    if wide:
        return None if op & isa.X else f"r{dst} = bswap{imm} r{dst}"
    kind = "be" if op & isa.X else "le"
    return f"r{dst} = {kind}{imm} r{dst}"


# -- JMP / JMP32 (RFC 9669 §4.3) --


def _jmp(insn: Insn, helpers: Sequence[str] | None, functions: Sequence[str] | None) -> str | None:
    op, dst, src, off, imm = insn
    wide = isa.insn_class(op) == isa.JMP
    code = op & 0xF0
    if code == isa.JA:
        return _ja(insn, wide)
    if code == isa.CALL:
        return _call(insn, helpers, functions) if wide else None
    if code == isa.EXIT:
        return "exit" if wide and not (op & isa.X or dst or src or off or imm) else None
    cmp = JMP_OPS.get(code)
    if cmp is None:
        return None
    r = "r" if wide else "w"
    if op & isa.X:
        return None if imm else f"if {r}{dst} {cmp} {r}{src} goto {_rel(off)}"
    return None if src else f"if {r}{dst} {cmp} 0x{imm & MASK32:x} goto {_rel(off)}"


def _ja(insn: Insn, wide: bool) -> str | None:
    op, dst, src, off, imm = insn
    if op & isa.X:
        return f"gotox r{dst}" if wide and not (src or off or imm) else None
    if wide:
        return None if dst or src or imm else f"goto {_rel(off)}"
    return None if dst or src or off else f"gotol {_rel(imm)}"


def _call(insn: Insn, helpers: Sequence[str] | None, functions: Sequence[str] | None) -> str | None:
    op, dst, src, off, imm = insn
    if op & isa.X:
        return f"callx r{dst}" if not (src or off or imm) else None
    if dst or off:
        return None
    if src == isa.PSEUDO_HELPER:
        if helpers is not None and 0 <= imm < len(helpers):
            return f"call {helpers[imm]}"
        return f"call {imm}"
    if src == isa.PSEUDO_CALL:
        if functions is not None and 0 <= imm < len(functions):
            return f"call {functions[imm]}"
        return f"call pc{_rel(imm)}"
    return None


# -- loads and stores (RFC 9669 §5) --


def _ldx(insn: Insn) -> str | None:
    op, dst, src, off, imm = insn
    mode, size = op & 0xE0, op & 0x18
    if imm or mode not in (isa.MODE_MEM, isa.MODE_MEMSX):
        return None
    if mode == isa.MODE_MEMSX and size == isa.SIZE_DW:
        return None
    return f"r{dst} = {_mem(size, src, off, mode == isa.MODE_MEMSX)}"


def _st(insn: Insn) -> str | None:
    op, dst, src, off, imm = insn
    if op & 0xE0 != isa.MODE_MEM or src:
        return None
    return f"{_mem(op & 0x18, dst, off)} = {_s32(imm)}"


def _stx(insn: Insn) -> str | None:
    op, dst, src, off, imm = insn
    mode = op & 0xE0
    if mode == isa.MODE_ATOMIC:
        return _atomic(insn)
    if mode != isa.MODE_MEM or imm:
        return None
    return f"{_mem(op & 0x18, dst, off)} = r{src}"


def _atomic(insn: Insn) -> str | None:
    op, dst, src, off, imm = insn
    size = op & 0x18
    if imm == isa.LOAD_ACQ:
        r = "r" if size == isa.SIZE_DW else "w"
        return f"{r}{dst} = load_acquire({_ptr(size, src, off)})"
    if imm == isa.STORE_REL:
        r = "r" if size == isa.SIZE_DW else "w"
        return f"store_release({_ptr(size, dst, off)}, {r}{src})"
    if size not in (isa.SIZE_W, isa.SIZE_DW):
        return None
    return _atomic_rmw(insn, size == isa.SIZE_DW)


def _atomic_rmw(insn: Insn, wide: bool) -> str | None:
    op, dst, src, off, imm = insn
    r = "r" if wide else "w"
    suffix = "_64" if wide else "32_32"
    addr = f"r{dst} {_off(off)}"
    if imm == isa.ATOMIC_XCHG:
        return f"{r}{src} = xchg{suffix}({addr}, {r}{src})"
    if imm == isa.ATOMIC_CMPXCHG:
        return f"{r}0 = cmpxchg{suffix}({addr}, {r}0, {r}{src})"
    entry = ATOMIC_OPS.get(imm & ~isa.FETCH)
    if entry is None:
        return None
    ptr = _ptr(op & 0x18, dst, off)
    if imm & isa.FETCH:
        return f"{r}{src} = {entry[1]}({ptr}, {r}{src})"
    return f"lock *{ptr} {entry[0]} {r}{src}"


def _ld(insn: Insn) -> str | None:
    op, dst, src, off, imm = insn
    if op != isa.OP_LDDW or src or off:
        return None
    return f"r{dst} = 0x{imm & MASK64:x} ll"


# -- public entry points --


def disasm_insn(
    insn: Insn,
    *,
    helpers: Sequence[str] | None = None,
    functions: Sequence[str] | None = None,
    pc: int | None = None,
) -> str:
    """One instruction in pseudo-C. ``helpers``/``functions`` name linked CALL targets (by index);
    without them raw calls print as ``call N`` / ``call pc+N``. LD_IMM64 prints ``insn.imm`` as the
    full constant (linked form); ``pc`` is accepted for callers that annotate and is not printed."""
    del pc
    cls = isa.insn_class(insn.op)
    text: str | None
    if cls in (isa.ALU, isa.ALU64):
        text = _alu(insn)
    elif cls in (isa.JMP, isa.JMP32):
        text = _jmp(insn, helpers, functions)
    elif cls == isa.LDX:
        text = _ldx(insn)
    elif cls == isa.ST:
        text = _st(insn)
    elif cls == isa.STX:
        text = _stx(insn)
    else:
        text = _ld(insn)
    return raw(insn) if text is None else text


def disasm_bytes(
    code: bytes | bytearray | memoryview,
    *,
    relocs: Mapping[int, tuple[str, int]] | None = None,
) -> list[str]:
    """Disassemble raw (unlinked) code, one line per instruction (LD_IMM64 takes two slots).

    ``relocs`` maps a slot to ``(symbol, addend)``: a CALL prints ``call SYMBOL`` and an LD_IMM64
    prints ``rX = SYMBOL + ADDEND ll`` (the syntax ``vm/asm.py`` turns back into relocations)."""
    relocs = relocs or {}
    insns = isa.decode_all(bytes(code[: len(code) - len(code) % 8]))
    out: list[str] = []
    slot = 0
    while slot < len(insns):
        insn = insns[slot]
        width = _lddw_width(insns, slot)
        if width == 2:
            out.append(_lddw_line(insn, insns[slot + 1], relocs.get(slot)))
        elif insn.op == isa.OP_CALL and slot in relocs and not (insn.dst or insn.off):
            out.append(f"call {relocs[slot][0]}" if insn.src == 1 and insn.imm == -1 else raw(insn))
        else:
            out.append(raw(insn) if insn.op == isa.OP_LDDW else disasm_insn(insn))
        slot += width
    return out


def _lddw_width(insns: Sequence[Insn], slot: int) -> int:
    insn = insns[slot]
    if insn.op != isa.OP_LDDW or insn.src or insn.off or slot + 1 >= len(insns):
        return 1
    nxt = insns[slot + 1]
    return 2 if (nxt.op, nxt.dst, nxt.src, nxt.off) == (0, 0, 0, 0) else 1


def _lddw_line(insn: Insn, nxt: Insn, reloc: tuple[str, int] | None) -> str:
    value = (insn.imm & MASK32) | ((nxt.imm & MASK32) << 32)
    if reloc is None:
        return f"r{insn.dst} = 0x{value:x} ll"
    return f"r{insn.dst} = {reloc[0]} + {value} ll"


def disasm_function(code: LinkedCode, index: int) -> list[str]:
    """Every instruction of linked function ``index`` (the second LD_IMM64 slot is skipped)."""
    func = code.functions[index]
    names = [f.name for f in code.functions]
    out: list[str] = []
    slot = func.start
    while slot < func.end:
        insn = code.insns[slot]
        out.append(disasm_insn(insn, helpers=code.helpers, functions=names, pc=slot - func.start))
        slot += 2 if insn.op == isa.OP_LDDW else 1
    return out


def dump(code: LinkedCode, report: VerifyReport | None = None) -> str:
    """A readable listing for ``wakeful vm dump``: the report's summary, then each function with pcs."""
    out: list[str] = []
    if report is not None:
        out += [
            f"sha256 {report.sha256}  ({report.elf_bytes} bytes)",
            f"entry {report.entry}, {report.instructions} instructions, stack {report.stack_bytes} bytes",
            f"call chain {' → '.join(report.call_chain)}",
            f"helpers {', '.join(report.helpers) or '-'}",
            "image " + ", ".join(f"{k} {v}" for k, v in report.image.items()),
        ]
    for index, func in enumerate(code.functions):
        out.append(f"{func.name} ({func.section}, {func.end - func.start} slots, frame {func.frame_bytes} bytes):")
        slot = func.start
        for line in disasm_function(code, index):
            out.append(f"{slot - func.start:6d}: {line}")
            slot += 2 if code.insns[slot].op == isa.OP_LDDW else 1
    return "\n".join(out) + "\n"
