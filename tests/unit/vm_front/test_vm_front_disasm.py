"""The pseudo-C grammar of vm.md §4.2: one pinned example per instruction class, linked names, dumps."""

from __future__ import annotations

import pytest

from wakeful.vm import asm, isa, loader
from wakeful.vm.disasm import disasm_bytes, disasm_function, disasm_insn, dump
from wakeful.vm.isa import Insn

# the table of vm.md §4.2, built from encodings (not from the assembler)
PINNED = [
    (Insn(0x07, 1, 0, 0, 8), "r1 += 8"),  # ALU64 K
    (Insn(0xBF, 2, 3, 0, 0), "r2 = r3"),  # ALU64 MOV X
    (Insn(0x3F, 0, 1, 1, 0), "r0 s/= r1"),  # SDIV
    (Insn(0xBF, 1, 2, 8, 0), "r1 = (s8)r2"),  # MOVSX
    (Insn(0x04, 1, 0, 0, 8), "w1 += 8"),  # ALU K
    (Insn(0x87, 1, 0, 0, 0), "r1 = -r1"),  # NEG
    (Insn(0xDC, 1, 0, 0, 32), "r1 = be32 r1"),  # END to-be
    (Insn(0xD7, 1, 0, 0, 64), "r1 = bswap64 r1"),  # ALU64 BSWAP
    (Insn(0x18, 1, 0, 0, 0x10000), "r1 = 0x10000 ll"),  # LD_IMM64 (linked)
    (Insn(0x79, 0, 10, -8, 0), "r0 = *(u64 *)(r10 - 8)"),  # LDX
    (Insn(0x91, 0, 1, 3, 0), "r0 = *(s8 *)(r1 + 3)"),  # LDX MEMSX
    (Insn(0x62, 10, 0, -4, 7), "*(u32 *)(r10 - 4) = 7"),  # ST
    (Insn(0x7B, 1, 2, 0, 0), "*(u64 *)(r1 + 0) = r2"),  # STX
    (Insn(0xDB, 1, 2, 0, 0x00), "lock *(u64 *)(r1 + 0) += r2"),  # atomic add
    (Insn(0xDB, 1, 2, 0, 0x01), "r2 = atomic_fetch_add((u64 *)(r1 + 0), r2)"),  # fetch add
    (Insn(0xDB, 1, 2, 0, 0xF1), "r0 = cmpxchg_64(r1 + 0, r0, r2)"),  # cmpxchg
    (Insn(0x25, 1, 0, 40, 0x40), "if r1 > 0x40 goto +40"),  # JMP K
    (Insn(0xCE, 1, 2, -3, 0), "if w1 s< w2 goto -3"),  # JMP32 X
    (Insn(0x05, 0, 0, 5, 0), "goto +5"),  # JA
    (Insn(0x06, 0, 0, 0, 70000), "gotol +70000"),  # JMP32 JA
    (Insn(0x95, 0, 0, 0, 0), "exit"),
    (Insn(0x0D, 1, 0, 0, 0), "gotox r1"),
]


@pytest.mark.parametrize(("insn", "text"), PINNED)
def test_pinned_examples(insn: Insn, text: str) -> None:
    assert disasm_insn(insn) == text


def test_immediates_signed_decimal_comparisons_hex() -> None:
    assert disasm_insn(Insn(0x07, 1, 0, 0, -1)) == "r1 += -1"
    assert disasm_insn(Insn(0x72, 1, 0, 2, -2)) == "*(u8 *)(r1 + 2) = -2"
    assert disasm_insn(Insn(0x15, 1, 0, -1, -1)) == "if r1 == 0xffffffff goto -1"
    assert disasm_insn(Insn(0x18, 3, 0, 0, (1 << 64) - 1)) == "r3 = 0xffffffffffffffff ll"


def test_linked_calls_print_names() -> None:
    helpers, functions = ("sf_json_parse",), ("main", "walk")
    assert disasm_insn(Insn(0x85, 0, 0, 0, 0), helpers=helpers, functions=functions) == "call sf_json_parse"
    assert disasm_insn(Insn(0x85, 0, 1, 0, 1), helpers=helpers, functions=functions) == "call walk"
    assert disasm_insn(Insn(0x85, 0, 1, 0, -1)) == "call pc-1"


def test_disasm_function_of_linked_code() -> None:
    data = asm.elf([asm.Func("main", "r1 = rodata + 1 ll\ncall sf_log_raw\ncall walk\nexit"),
                    asm.Func("walk", "r0 = 0\nexit")], rodata=b"xy")
    p = loader.prepare(data, cache=None)
    assert disasm_function(p.code, 0) == ["r1 = 0x10001 ll", "call sf_log_raw", "call walk", "exit"]
    assert disasm_function(p.code, 1) == ["r0 = 0", "exit"]


def test_raw_bytes_variant_handles_truncated_ldimm64() -> None:
    code = isa.encode(0x18, 1, 0, 0, 5)
    assert disasm_bytes(code) == [".raw 0x18 1 0 0 5"]
    assert disasm_bytes(code + b"\x95" + bytes(7) + b"xyz") == [".raw 0x18 1 0 0 5", "exit"]


def test_dump_lists_report_and_every_function_with_pcs() -> None:
    data = asm.elf([asm.Func("main", "r1 = rodata + 1 ll\ncall walk\nexit"),
                    asm.Func("walk", "*(u64 *)(r10 - 8) = 0\ncall sf_yield\nexit")], rodata=b"xy")
    p = loader.prepare(data, cache=None)
    text = dump(p.code, p.report)
    assert "entry main, 7 instructions, stack 8 bytes" in text
    assert "call chain main → walk" in text and "helpers sf_yield" in text
    assert "main (spinfoam.main, 4 slots, frame 0 bytes):\n     0: r1 = 0x10001 ll\n     2: call walk\n     3: exit" in text
    assert "walk (.text, 3 slots, frame 8 bytes):\n     0: *(u64 *)(r10 - 8) = 0\n     1: call sf_yield" in text
