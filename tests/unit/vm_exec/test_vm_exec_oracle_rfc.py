"""The oracle itself against values fixed by RFC 9669 and the Linux selftests, independent of wakeful's
engines; and proof that the three-way comparison can fail (a weakened oracle is caught)."""

from __future__ import annotations

import struct

import oracle_ebpf as oracle
import oracle_glue as glue
import pytest
from oracle_ebpf import U32, U64, alu, byte_swap, compare
from oracle_edges import alu_edge_cases

MIN64 = 1 << 63


def test_signed_division_truncates_toward_zero() -> None:
    # RFC 9669 §4.1: signed modulo uses truncated division, -13 % 3 == -1
    assert alu("smod", 64, -13 & U64, 3) == -1 & U64
    assert alu("smod", 64, 13, -3 & U64) == 1
    assert alu("sdiv", 64, -7 & U64, 2) == -3 & U64
    assert alu("sdiv", 32, -7 & U32, 2) == -3 & U32
    assert alu("smod", 32, -7 & U32, 2) == -1 & U32


def test_division_extremes() -> None:
    # vm.md §4.1: MIN s/ -1 = MIN, MIN s% -1 = 0; /0 = 0; %0 keeps dst (ALU: its low 32 bits)
    assert alu("sdiv", 64, MIN64, U64) == MIN64
    assert alu("smod", 64, MIN64, U64) == 0
    assert alu("sdiv", 32, 0xDEAD_8000_0000, U32) == 0x8000_0000
    assert alu("smod", 32, 0x8000_0000, U32) == 0
    for name in ("div", "sdiv"):
        assert alu(name, 64, 1234, 0) == 0
    for name in ("mod", "smod"):
        assert alu(name, 64, 0xFFFF_FFFF_1234_5678, 0) == 0xFFFF_FFFF_1234_5678
        assert alu(name, 32, 0xFFFF_FFFF_1234_5678, 1 << 32) == 0x1234_5678
    # K operands are the immediate sign-extended to 64 bits, then unsigned: r1 /= -1 is a huge divisor
    assert alu("div", 64, 5, -1 & U64) == 0
    assert alu("div", 32, 5, -1 & U64) == 0


def test_shifts_mask_the_count_by_width() -> None:
    assert alu("lsh", 64, 1, 65) == 2
    assert alu("lsh", 32, 1, 33) == 2
    assert alu("rsh", 32, 0x1_0000_0004, 2) == 1  # ALU32 reads the low 32 bits of dst
    assert alu("arsh", 32, 0x8000_0000, 31) == U32
    assert alu("arsh", 64, MIN64, 64 + 63) == U64


def test_sign_extending_moves() -> None:
    assert alu("movsx8", 64, 0, 0x80) == 0xFFFF_FFFF_FFFF_FF80
    assert alu("movsx8", 32, 0, 0x80) == 0xFFFF_FF80  # ALU: to 32 bits, upper half zeroed
    assert alu("movsx16", 64, 0, 0x1_7FFF) == 0x7FFF
    assert alu("movsx32", 64, 0, 0x8000_0000) == 0xFFFF_FFFF_8000_0000
    assert alu("mov", 32, 0, U64) == U32


def test_byte_swaps() -> None:
    # Linux tools/testing/selftests/bpf/progs/verifier_bswap.c
    assert byte_swap("bswap", 16, 0xFF23) == 0x23FF
    assert byte_swap("bswap", 32, 0xFF23) == 0x23FF_0000
    assert byte_swap("bswap", 64, 0xFF12_FF34_FF56_FF78) == 0x78FF_56FF_34FF_12FF
    assert byte_swap("be", 16, 0x1234_5678) == 0x7856
    assert byte_swap("le", 16, 0x1234_5678) == 0x5678  # little-endian host: truncation only
    assert byte_swap("le", 64, U64) == U64


def test_comparisons() -> None:
    assert compare("jslt", 32, 0xFFFF_FFFF, 0)  # JMP32: -1 < 0
    assert not compare("jslt", 64, 0xFFFF_FFFF, 0)
    assert compare("jgt", 64, U64, 1) and not compare("jsgt", 64, U64, 1)
    assert compare("jeq", 32, 0x1_0000_0005, 5) and not compare("jeq", 64, 0x1_0000_0005, 5)
    assert compare("jset", 64, 0b1010, 0b0010) and not compare("jset", 32, 1 << 32, 1 << 32)


def _slot(op: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhI", op, src << 4 | dst, off, imm & U32)


def _run(*slots: bytes) -> oracle.Result:
    func = oracle.Func("main", b"".join(slots), (), 16)
    return oracle.run([func], oracle.Image(b"", bytes(8), 0, 16), lambda n, a: 0, {})


@pytest.mark.parametrize(("slots", "r0"), [
    ((_slot(0xB7, 0, 0, 0, 0), _slot(0x17, 0, 0, 0, 1)), U64),  # r0 = 0; r0 -= 1
    ((_slot(0xB4, 0, 0, 0, -1),), U32),  # w0 = -1 zero-extends
    ((_slot(0xB7, 0, 0, 0, -1),), U64),  # r0 = -1 sign-extends
    ((_slot(0x18, 0, 0, 0, 0x89ABCDEF), _slot(0, 0, 0, 0, 0x01234567)), 0x01234567_89ABCDEF),
    ((_slot(0xB7, 0, 0, 0, 5), _slot(0x37, 0, 0, 0, -1)), 0),  # r0 /= -1 (unsigned 2^64 - 1)
    ((_slot(0xB7, 0, 0, 0, 9), _slot(0x06, 0, 0, 0, 1), _slot(0xB7, 0, 0, 0, 1)), 9),  # gotol +1
    ((_slot(0xB7, 1, 0, 0, -1), _slot(0xB7, 0, 0, 0, 1), _slot(0x6E, 1, 0, 1, 0), _slot(0xB7, 0, 0, 0, 2)),
     2),  # if w1 s> w0 goto +1: -1 s> 1 is false
    ((_slot(0xBF, 0, 10), _slot(0x7B, 10, 0, -8), _slot(0xC3, 0, 10, -8, 0x100)), 0x10018),  # load-acquire of END
])
def test_small_programs(slots: tuple[bytes, ...], r0: int) -> None:
    result = _run(*slots, _slot(0x95))
    assert result.fault is None and result.r0 == r0


def test_the_oracle_faults_outside_guest_memory() -> None:
    # vm.md §5: r1 = END at entry; reading it faults with the address
    result = _run(_slot(0x71, 0, 1, 0, 0), _slot(0x95))
    assert result.fault == ("MEMORY_READ", 0x10000 + 8 + 16, 1, "main", 0)


def test_a_weakened_oracle_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: Python's floor division in place of C's truncation disagrees."""
    case = next(iter(alu_edge_cases()))
    assert glue.run_three(glue.assemble(case.funcs), rodata=case.rodata, data=case.data).agree()
    monkeypatch.setattr(oracle, "trunc_div", lambda a, b: a // b)
    assert not glue.run_three(glue.assemble(case.funcs), rodata=case.rodata, data=case.data).agree()
