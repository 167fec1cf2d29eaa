"""Properties of vm/semantics.py against independent formulations of RFC 9669 (vm.md §4.1)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from wakeful.vm import isa
from wakeful.vm.semantics import alu, cond, endian, sdiv, sext, smod

u64 = st.one_of(st.integers(0, (1 << 64) - 1), st.sampled_from([0, 1, (1 << 63), (1 << 64) - 1, (1 << 63) - 1]))
widths = st.sampled_from([32, 64])


def signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@given(u64, u64, widths)
def test_sdiv_truncates_toward_zero(a: int, b: int, bits: int) -> None:
    x, y = signed(a, bits), signed(b, bits)
    mask = (1 << bits) - 1
    if y == 0:
        expected = 0
    elif x == -(1 << (bits - 1)) and y == -1:
        expected = x & mask
    else:
        q = Fraction(x, y)
        expected = (int(q) if q >= 0 else -int(-q)) & mask  # int() truncates toward zero
    assert sdiv(a, b, bits) == expected


@given(u64, u64, widths)
def test_smod_matches_c_remainder(a: int, b: int, bits: int) -> None:
    x, y = signed(a, bits), signed(b, bits)
    mask = (1 << bits) - 1
    if y == 0:
        assert smod(a, b, bits) == a & mask
        return
    if y == -1:
        assert smod(a, b, bits) == 0
        return
    q = int(Fraction(x, y)) if Fraction(x, y) >= 0 else -int(-Fraction(x, y))
    assert smod(a, b, bits) == (x - q * y) & mask
    assert signed(smod(a, b, bits), bits) == 0 or (signed(smod(a, b, bits), bits) < 0) == (x < 0)


@given(u64, st.sampled_from([8, 16, 32]))
def test_sext_is_twos_complement(v: int, bits: int) -> None:
    assert sext(v, bits) == signed(v, bits)


@given(u64, u64)
def test_alu32_results_are_zero_extended(a: int, b: int) -> None:
    for code in (isa.ADD, isa.SUB, isa.MUL, isa.DIV, isa.OR, isa.AND, isa.LSH, isa.RSH, isa.NEG, isa.MOD,
                 isa.XOR, isa.MOV, isa.ARSH):
        assert alu(isa.ALU | code, 0, a, b) < (1 << 32)
        assert alu(isa.ALU64 | code, 0, a, b) < (1 << 64)


@given(u64, u64)
def test_shift_counts_are_masked(a: int, b: int) -> None:
    assert alu(isa.ALU64 | isa.LSH, 0, a, b) == (a << (b % 64)) % (1 << 64)
    assert alu(isa.ALU | isa.RSH, 0, a, b) == (a % (1 << 32)) >> (b % 32)
    assert alu(isa.ALU64 | isa.ARSH, 0, a, b) == (signed(a, 64) >> (b % 64)) % (1 << 64)


@given(u64, u64)
def test_jmp32_compares_low_halves(a: int, b: int) -> None:
    lo_a, lo_b = a % (1 << 32), b % (1 << 32)
    assert cond(isa.JMP32 | isa.JGT, a, b) == (lo_a > lo_b)
    assert cond(isa.JMP32 | isa.JSLT, a, b) == (signed(lo_a, 32) < signed(lo_b, 32))
    assert cond(isa.JMP | isa.JSGE, a, b) == (signed(a, 64) >= signed(b, 64))


@given(u64)
def test_byte_swaps(v: int) -> None:
    assert endian(isa.ALU64 | isa.END, 64, v) == int.from_bytes(v.to_bytes(8, "little"), "big")
    assert endian(isa.ALU | isa.END | isa.X, 16, v) == int.from_bytes((v % 65536).to_bytes(2, "big"), "little")
    assert endian(isa.ALU | isa.END, 32, v) == v % (1 << 32)
