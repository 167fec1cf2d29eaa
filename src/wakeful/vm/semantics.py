"""RFC 9669 instruction semantics (vm.md §4.1) as small functions and tables, plus guest memory faults (§8).

The reference interpreter calls these directly; the translator emits text equivalents and is held to them by
the differential tests (vm.md §9.2).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from wakeful.errors import GuestFault
from wakeful.vm import isa
from wakeful.vm.isa import BASE, MASK32, MASK64, Insn

__all__ = [
    "ALU32",
    "ALU64",
    "ATOMIC_RMW",
    "COND32",
    "COND64",
    "alu",
    "atomic_rmw",
    "cond",
    "endian",
    "guest_address",
    "memory_fault",
    "sext",
    "sdiv",
    "smod",
]

Op2 = Callable[[int, int], int]

# ---------------------------------------------------------------- integer helpers


def sext(value: int, bits: int) -> int:
    """The low ``bits`` of ``value`` read as a two's-complement signed integer."""
    sign = 1 << (bits - 1)
    return ((value & ((sign << 1) - 1)) ^ sign) - sign


def sdiv(a: int, b: int, bits: int) -> int:
    """vm.md §4.1: signed division truncating toward zero; /0 = 0; MIN / -1 = MIN (as unsigned)."""
    mask = (1 << bits) - 1
    x, y = sext(a, bits), sext(b, bits)
    if y == 0:
        return 0
    q = abs(x) // abs(y)
    return (q if (x < 0) == (y < 0) else -q) & mask


def smod(a: int, b: int, bits: int) -> int:
    """vm.md §4.1: signed modulo with the dividend's sign (C); %0 keeps dst (low ``bits``); % -1 = 0."""
    mask = (1 << bits) - 1
    x, y = sext(a, bits), sext(b, bits)
    if y == 0:
        return a & mask
    r = abs(x) % abs(y)
    return (-r if x < 0 else r) & mask


# ---------------------------------------------------------------- ALU / ALU64 (RFC 9669 §4.1)


def _udiv(mask: int) -> Op2:
    return lambda a, b: (a & mask) // (b & mask) if b & mask else 0


def _umod(mask: int) -> Op2:
    return lambda a, b: (a & mask) % (b & mask) if b & mask else a & mask


def _arsh(bits: int) -> Op2:
    return lambda a, b: (sext(a, bits) >> (b & (bits - 1))) & ((1 << bits) - 1)


def _table(bits: int) -> dict[int, Op2]:
    m = (1 << bits) - 1
    return {
        isa.ADD: lambda a, b: (a + b) & m,
        isa.SUB: lambda a, b: (a - b) & m,
        isa.MUL: lambda a, b: (a * b) & m,
        isa.DIV: _udiv(m),
        isa.OR: lambda a, b: (a | b) & m,
        isa.AND: lambda a, b: (a & b) & m,
        isa.LSH: lambda a, b: (a << (b & (bits - 1))) & m,
        isa.RSH: lambda a, b: (a & m) >> (b & (bits - 1)),
        isa.NEG: lambda a, b: -a & m,
        isa.MOD: _umod(m),
        isa.XOR: lambda a, b: (a ^ b) & m,
        isa.MOV: lambda a, b: b & m,
        isa.ARSH: _arsh(bits),
    }


# operation (upper nibble) -> f(dst, src) for the plain (off == 0) forms
ALU64: dict[int, Op2] = _table(64)
ALU32: dict[int, Op2] = _table(32)


def alu(op: int, off: int, a: int, b: int) -> int:
    """Result of ALU/ALU64 instruction ``op`` (not END) on dst ``a`` and source ``b`` (already an
    unsigned 64-bit value: the sign-extended immediate or the register). ``off`` selects SDIV/SMOD
    (1) and MOVSX (8/16/32)."""
    wide = op & 0x07 == isa.ALU64
    code = op & 0xF0
    bits = 64 if wide else 32
    if off and code in (isa.DIV, isa.MOD):
        return sdiv(a, b, bits) if code == isa.DIV else smod(a, b, bits)
    if off and code == isa.MOV:
        return sext(b, off) & (MASK64 if wide else MASK32)
    return (ALU64 if wide else ALU32)[code](a, b)


def _bswap(value: int, nbytes: int) -> int:
    return int.from_bytes((value & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little"), "big")


def endian(op: int, imm: int, a: int) -> int:
    """END (ALU: to-le without the source bit, to-be with it) and BSWAP (ALU64), width ``imm`` bits."""
    nbytes = imm // 8
    if op & 0x07 == isa.ALU and not op & isa.X:
        return a & ((1 << imm) - 1)
    return _bswap(a, nbytes)


# ---------------------------------------------------------------- JMP / JMP32 conditions (RFC 9669 §4.3)


def _cond_table(bits: int) -> dict[int, Callable[[int, int], bool]]:
    m = (1 << bits) - 1
    s = 1 << (bits - 1)
    return {
        isa.JEQ: lambda a, b: a & m == b & m,
        isa.JNE: lambda a, b: a & m != b & m,
        isa.JGT: lambda a, b: a & m > b & m,
        isa.JGE: lambda a, b: a & m >= b & m,
        isa.JLT: lambda a, b: a & m < b & m,
        isa.JLE: lambda a, b: a & m <= b & m,
        isa.JSET: lambda a, b: a & b & m != 0,
        isa.JSGT: lambda a, b: (a & m) ^ s > (b & m) ^ s,
        isa.JSGE: lambda a, b: (a & m) ^ s >= (b & m) ^ s,
        isa.JSLT: lambda a, b: (a & m) ^ s < (b & m) ^ s,
        isa.JSLE: lambda a, b: (a & m) ^ s <= (b & m) ^ s,
    }


COND64 = _cond_table(64)
COND32 = _cond_table(32)


def cond(op: int, a: int, b: int) -> bool:
    """Whether conditional jump ``op`` (JMP or JMP32) is taken for dst ``a`` and source ``b``."""
    return (COND32 if op & 0x07 == isa.JMP32 else COND64)[op & 0xF0](a, b)


# ---------------------------------------------------------------- atomics (RFC 9669 §5.3)

ATOMIC_RMW: dict[int, Op2] = {
    isa.ATOMIC_ADD: lambda old, v: old + v,
    isa.ATOMIC_OR: lambda old, v: old | v,
    isa.ATOMIC_AND: lambda old, v: old & v,
    isa.ATOMIC_XOR: lambda old, v: old ^ v,
    isa.ATOMIC_XCHG & ~isa.FETCH: lambda old, v: v,
}


def atomic_rmw(selector: int, old: int, value: int, nbytes: int) -> int:
    """New memory value of an ADD/OR/AND/XOR/XCHG atomic (``selector`` with or without FETCH)."""
    return ATOMIC_RMW[selector & ~isa.FETCH](old, value) & ((1 << (8 * nbytes)) - 1)


# ---------------------------------------------------------------- memory structs and faults (vm.md §5, §8)

# (size code, signed) -> struct for loads; stores use the unsigned ones.
STRUCTS: dict[tuple[int, bool], struct.Struct] = {
    (isa.SIZE_B, False): struct.Struct("<B"),
    (isa.SIZE_H, False): struct.Struct("<H"),
    (isa.SIZE_W, False): struct.Struct("<I"),
    (isa.SIZE_DW, False): struct.Struct("<Q"),
    (isa.SIZE_B, True): struct.Struct("<b"),
    (isa.SIZE_H, True): struct.Struct("<h"),
    (isa.SIZE_W, True): struct.Struct("<i"),
}


def guest_address(base: int, off: int) -> int:
    """The guest address ``base + off`` wrapped to 64 bits, as the hardware would compute it."""
    return (base + off) & MASK64


def access_code(write: bool, address: int, writable_index: int) -> str:
    """vm.md §8: the fault code for a faulting access at ``address``."""
    if write and BASE <= address < BASE + writable_index:
        return "RODATA_WRITE"
    return "MEMORY_WRITE" if write else "MEMORY_READ"


def memory_fault(
    write: bool, address: int, size: int, writable_index: int, *, function: str, pc: int, insn: str
) -> GuestFault:
    """vm.md §8: the GuestFault of an out-of-range load or store."""
    code = access_code(write, address, writable_index)
    where = f"({function}+{pc} '{insn}')"
    if code == "RODATA_WRITE":
        message = f"write to read-only data at 0x{address:x} {where}"
    else:
        message = f"memory fault: {'write' if write else 'read'} {size} bytes at 0x{address:x} {where}"
    return GuestFault(code, message, address=address, size=size, function=function, pc=pc, insn=insn)


def memory_access(insn: Insn) -> tuple[int, int, bool]:
    """(base register, size in bytes, is-write) of a load/store/atomic instruction."""
    cls = insn.op & 0x07
    size = isa.SIZE_BYTES[insn.op & 0x18]
    if cls == isa.LDX:
        return insn.src, size, False
    if insn.op & 0xE0 == isa.MODE_ATOMIC and insn.imm == isa.LOAD_ACQ:
        return insn.src, size, False
    return insn.dst, size, True

