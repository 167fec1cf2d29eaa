"""eBPF instruction encoding (RFC 9669): opcode constants, the decoded ``Insn`` and slot decoding.

Shared by the loader, verifier, disassembler, assembler, translator and reference interpreter.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

# -- instruction classes (RFC 9669 §3) --
LD, LDX, ST, STX, ALU, JMP, JMP32, ALU64 = range(8)

# -- source bit --
K = 0x00
X = 0x08

# -- ALU operations (upper nibble) --
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70
NEG, MOD, XOR, MOV, ARSH, END = 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0

# -- JMP operations (upper nibble) --
JA, JEQ, JGT, JGE, JSET, JNE, JSGT, JSGE = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70
CALL, EXIT, JLT, JLE, JSLT, JSLE = 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0

# -- memory sizes and modes --
SIZE_W, SIZE_H, SIZE_B, SIZE_DW = 0x00, 0x08, 0x10, 0x18
SIZE_BYTES = {SIZE_W: 4, SIZE_H: 2, SIZE_B: 1, SIZE_DW: 8}
MODE_IMM, MODE_ABS, MODE_IND, MODE_MEM, MODE_MEMSX, MODE_ATOMIC = 0x00, 0x20, 0x40, 0x60, 0x80, 0xC0

# -- atomic selectors (imm of STX ATOMIC) --
FETCH = 0x01
ATOMIC_ADD, ATOMIC_OR, ATOMIC_AND, ATOMIC_XOR = 0x00, 0x40, 0x50, 0xA0
ATOMIC_XCHG = 0xE0 | FETCH
ATOMIC_CMPXCHG = 0xF0 | FETCH
LOAD_ACQ, STORE_REL = 0x100, 0x110

# -- whole opcodes used often --
OP_LDDW = LD | MODE_IMM | SIZE_DW  # 0x18, LD_IMM64
OP_CALL = JMP | CALL  # 0x85
OP_EXIT = JMP | EXIT  # 0x95
OP_JA = JMP | JA  # 0x05
OP_GOTOL = JMP32 | JA  # 0x06
OP_GOTOX = JMP | JA | X  # 0x0d, refused (JUMP_TABLE)

# -- CALL pseudo sources --
PSEUDO_HELPER = 0  # after linking: imm = index into LinkedCode.helpers
PSEUDO_CALL = 1  # after linking: imm = index into LinkedCode.functions
PSEUDO_KFUNC = 2  # refused

MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
SIGN64 = 1 << 63
SIGN32 = 1 << 31

# -- guest memory map (vm.md §5) --
BASE = 0x10000

_SLOT = struct.Struct("<BBhi")


class Insn(NamedTuple):
    """One decoded 8-byte slot. ``imm`` is the signed 32-bit field, except in a *linked* LD_IMM64
    first slot, where it is the full unsigned 64-bit constant (relocation applied); the second slot
    of a linked LD_IMM64 is ``Insn(0, 0, 0, 0, 0)``."""

    op: int
    dst: int
    src: int
    off: int
    imm: int


def decode(code: bytes | bytearray | memoryview, slot: int) -> Insn:
    """Decode slot ``slot`` of ``code`` (raw, unlinked)."""
    op, regs, off, imm = _SLOT.unpack_from(code, slot * 8)
    return Insn(op, regs & 0x0F, regs >> 4, off, imm)


def decode_all(code: bytes | bytearray | memoryview) -> list[Insn]:
    """Decode every slot of ``code`` (length must be a multiple of 8)."""
    return [Insn(op, regs & 0x0F, regs >> 4, off, imm) for op, regs, off, imm in _SLOT.iter_unpack(code)]


def encode(op: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """Encode one slot. ``imm`` may be given signed or as its unsigned 32-bit pattern."""
    if imm >= SIGN32:
        imm -= 1 << 32
    return _SLOT.pack(op, (src << 4) | (dst & 0x0F), off, imm)


def insn_class(op: int) -> int:
    return op & 0x07


def is_ldimm64(insn: Insn) -> bool:
    return insn.op == OP_LDDW
