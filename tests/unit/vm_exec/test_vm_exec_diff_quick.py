"""S9 (vm.md §9.2), quick half: replay the saved differential corpus and a few hundred fresh programs.

The 20,000-program run lives in tests/integration/vm_exec/test_vm_exec_diff_full.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from vmexec_kit import corpus_programs, corpus_settings, diff_seed, replay
from vmexec_progen import SIZES, generate

from wakeful.vm import asm, isa

SETTINGS = corpus_settings()


@pytest.mark.parametrize(("name", "entry"), corpus_programs(), ids=[n for n, _ in corpus_programs()])
def test_corpus_program_agrees(name: str, entry: dict[str, Any]) -> None:
    a, b = replay(entry)
    assert a.comparable() == b.comparable(), name
    assert a.r0 is not None or a.fault is not None


def test_fresh_programs_agree() -> None:
    base, count = SETTINGS["quick_base"], SETTINGS["quick_count"]
    failures = [reason for seed in range(base, base + count) if (reason := diff_seed(seed, SETTINGS)[2])]
    assert not failures, failures[:5]


def accepted_variants() -> set[tuple[int, int, int]]:
    """(opcode, off, imm) for every instruction form of vm.md §4.1 the generator must cover."""
    out: set[tuple[int, int, int]] = set()
    for cls in (isa.ALU, isa.ALU64):
        for code in (isa.ADD, isa.SUB, isa.MUL, isa.DIV, isa.OR, isa.AND, isa.LSH, isa.RSH, isa.MOD,
                     isa.XOR, isa.MOV, isa.ARSH):
            out |= {(cls | code | x, 0, -1) for x in (isa.K, isa.X)}
        out |= {(cls | isa.DIV | x, 1, -1) for x in (isa.K, isa.X)} | {(cls | isa.MOD | x, 1, -1) for x in (0, 8)}
        out |= {(cls | isa.MOV | isa.X, off, -1) for off in ((8, 16, 32) if cls == isa.ALU64 else (8, 16))}
        out.add((cls | isa.NEG, 0, -1))
    out |= {(op, 0, w) for op in (0xD4, 0xDC, 0xD7) for w in (16, 32, 64)}
    for cls in (isa.JMP, isa.JMP32):
        for code in (isa.JEQ, isa.JGT, isa.JGE, isa.JSET, isa.JNE, isa.JSGT, isa.JSGE, isa.JLT, isa.JLE,
                     isa.JSLT, isa.JSLE):
            out |= {(cls | code | x, 0, -1) for x in (isa.K, isa.X)}
    out |= {(isa.OP_JA, 0, -1), (isa.OP_GOTOL, 0, -1), (isa.OP_CALL, 0, -1), (isa.OP_EXIT, 0, -1),
            (isa.OP_LDDW, 0, -1)}
    for size in SIZES:
        out |= {(isa.LDX | isa.MODE_MEM | size, 0, -1), (isa.ST | isa.MODE_MEM | size, 0, -1),
                (isa.STX | isa.MODE_MEM | size, 0, -1)}
        out |= {(isa.STX | isa.MODE_ATOMIC | size, 0, sel) for sel in (isa.LOAD_ACQ, isa.STORE_REL)}
        if size != isa.SIZE_DW:
            out.add((isa.LDX | isa.MODE_MEMSX | size, 0, -1))
    for size in (isa.SIZE_W, isa.SIZE_DW):
        for sel in (isa.ATOMIC_ADD, isa.ATOMIC_OR, isa.ATOMIC_AND, isa.ATOMIC_XOR):
            out |= {(isa.STX | isa.MODE_ATOMIC | size, 0, sel), (isa.STX | isa.MODE_ATOMIC | size, 0, sel | 1)}
        out |= {(isa.STX | isa.MODE_ATOMIC | size, 0, s) for s in (isa.ATOMIC_XCHG, isa.ATOMIC_CMPXCHG)}
    return out


def variant_of(insn: isa.Insn) -> tuple[int, int, int]:
    cls = insn.op & 0x07
    if cls in (isa.ALU, isa.ALU64) and insn.op & 0xF0 == isa.END:
        return insn.op, 0, insn.imm
    if cls in (isa.ALU, isa.ALU64):
        return insn.op, insn.off, -1
    if insn.op & 0xE7 == isa.STX | isa.MODE_ATOMIC:
        return insn.op, 0, insn.imm
    return insn.op, 0, -1


def test_generator_covers_every_accepted_instruction_and_some_faults() -> None:
    seen: set[tuple[int, int, int]] = set()
    strays = 0
    for seed in range(SETTINGS["full_base"], SETTINGS["full_base"] + 600):
        prog = generate(seed)
        strays += prog.strays
        for _, text in prog.funcs:
            raw, _ = asm.assemble(text)
            seen |= {variant_of(i) for i in isa.decode_all(raw)}
    missing = accepted_variants() - seen
    assert not missing, sorted(missing)
    assert 0.02 < strays / 600 < 0.2
