"""vm.md §4.1 semantics of every opcode class, in both engines (interpreter and translator must agree,
and both must give the RFC 9669 result written here by hand)."""

from __future__ import annotations

import pytest
from vmexec_kit import build, r0_of, run

M64 = (1 << 64) - 1
MIN64 = 1 << 63


def neg(v: int) -> int:
    return v & M64


# (name, program, expected r0). Programs end with exit; values are written from RFC 9669, not from the VM.
ALU_CASES = [
    # registers hold u64; ALU64 results wrap
    ("add64 wraps", "r0 = -1\nr0 += 1\nexit", 0),
    ("sub64 wraps", "r0 = 0\nr0 -= 1\nexit", M64),
    ("mul64 wraps", "r0 = 0x100000000 ll\nr1 = 0x100000001 ll\nr0 *= r1\nexit", 1 << 32),
    # K immediates are sign-extended for ALU64 (then unsigned, DIV/MOD included)
    ("mov64 imm sign-extends", "r0 = -2\nexit", neg(-2)),
    ("add64 imm sign-extends", "r0 = 5\nr0 += -1\nexit", 4),
    ("div64 by -1 imm is unsigned", "r0 = 10\nr0 /= -1\nexit", 0),
    ("div64 max by -1 imm", "r0 = -1\nr0 /= -1\nexit", 1),
    ("mod64 imm sign-extended divisor", "r0 = 10\nr0 %= -1\nexit", 10),
    # ALU32 results are zero-extended; the immediate is the low 32 bits
    ("mov32 imm", "w0 = -1\nexit", 0xFFFFFFFF),
    ("add32 drops high bits", "r0 = 0x100000005 ll\nw0 += 0\nexit", 5),
    ("add32 wraps", "w0 = -1\nw0 += 1\nexit", 0),
    ("sub32 wraps", "w0 = 0\nw0 -= 1\nexit", 0xFFFFFFFF),
    ("mul32", "r0 = 0x123456789 ll\nw0 *= 16\nexit", 0x34567890),
    ("or32 zero-extends", "r0 = 0xffffffff00000000 ll\nw0 |= 1\nexit", 1),
    ("and32", "r0 = -1\nw0 &= -16\nexit", 0xFFFFFFF0),
    ("xor32", "r0 = -1\nw0 ^= 1\nexit", 0xFFFFFFFE),
    ("mov32 reg truncates", "r1 = -1\nw0 = w1\nexit", 0xFFFFFFFF),
    ("neg64", "r0 = 1\nr0 = -r0\nexit", M64),
    ("neg32", "r0 = 1\nw0 = -w0\nexit", 0xFFFFFFFF),
    ("neg64 of min", f"r0 = 0x{MIN64:x} ll\nr0 = -r0\nexit", MIN64),
    # shift counts are masked to 63 / 31
    ("lsh64 by 65 in a register", "r0 = 1\nr1 = 65\nr0 <<= r1\nexit", 2),
    ("lsh64 by 63", "r0 = 3\nr0 <<= 63\nexit", MIN64),
    ("rsh64 by 64 in a register", "r0 = -1\nr1 = 64\nr0 >>= r1\nexit", M64),
    ("lsh32 by 33 in a register", "w0 = 1\nw1 = 33\nw0 <<= w1\nexit", 2),
    ("lsh32 drops high bits", "w0 = 3\nw0 <<= 31\nexit", 0x80000000),
    ("rsh32 of a wide register", "r0 = 0xffffffff00000010 ll\nw0 >>= 4\nexit", 1),
    ("arsh64", f"r0 = 0x{MIN64:x} ll\nr0 s>>= 63\nexit", M64),
    ("arsh64 by 64+1 in a register", f"r0 = 0x{MIN64:x} ll\nr1 = 65\nr0 s>>= r1\nexit", 0xC000000000000000),
    ("arsh32", "w0 = -2147483648\nw0 s>>= 31\nexit", 0xFFFFFFFF),
    ("arsh32 positive", "w0 = 0x40000000\nw0 s>>= 30\nexit", 1),
    # unsigned division by zero: DIV -> 0; MOD -> dst (ALU64) / low 32 bits zero-extended (ALU)
    ("div64 by zero reg", "r0 = 7\nr1 = 0\nr0 /= r1\nexit", 0),
    ("mod64 by zero reg", "r0 = -7\nr1 = 0\nr0 %= r1\nexit", neg(-7)),
    ("div32 by zero reg", "r0 = 7\nw1 = 0\nw0 /= w1\nexit", 0),
    ("mod32 by zero reg", "r0 = 0x1234500000007 ll\nw1 = 0\nw0 %= w1\nexit", 7),
    ("mod32 by zero imm", "r0 = 0x1234500000007 ll\nw0 %= 0\nexit", 7),
    ("div64 by zero imm", "r0 = 7\nr0 /= 0\nexit", 0),
    ("mod64 by zero imm", "r0 = -7\nr0 %= 0\nexit", neg(-7)),
    ("div32 uses low bits of the divisor", "w0 = 100\nr1 = 0x100000000a ll\nw0 /= w1\nexit", 10),
    ("div64 unsigned", "r0 = -1\nr1 = 2\nr0 /= r1\nexit", M64 // 2),
    # SDIV/SMOD truncate toward zero; MIN / -1 = MIN; % -1 = 0; /0 = 0; %0 keeps dst
    ("sdiv64 truncates", "r0 = -7\nr0 s/= 2\nexit", neg(-3)),
    ("sdiv64 reg", "r0 = 7\nr1 = -2\nr0 s/= r1\nexit", neg(-3)),
    ("smod64 sign of dividend", "r0 = -7\nr0 s%= 2\nexit", neg(-1)),
    ("smod64 negative divisor", "r0 = 7\nr1 = -2\nr0 s%= r1\nexit", 1),
    ("smod64 both negative", "r0 = -7\nr1 = -2\nr0 s%= r1\nexit", neg(-1)),
    ("sdiv64 min by -1", f"r0 = 0x{MIN64:x} ll\nr1 = -1\nr0 s/= r1\nexit", MIN64),
    ("sdiv64 min by -1 imm", f"r0 = 0x{MIN64:x} ll\nr0 s/= -1\nexit", MIN64),
    ("smod64 min by -1", f"r0 = 0x{MIN64:x} ll\nr1 = -1\nr0 s%= r1\nexit", 0),
    ("smod64 min by -1 imm", f"r0 = 0x{MIN64:x} ll\nr0 s%= -1\nexit", 0),
    ("sdiv64 by zero", "r0 = -7\nr1 = 0\nr0 s/= r1\nexit", 0),
    ("smod64 by zero", "r0 = -7\nr1 = 0\nr0 s%= r1\nexit", neg(-7)),
    ("smod64 by zero imm", "r0 = -7\nr0 s%= 0\nexit", neg(-7)),
    ("sdiv32 min by -1", "w0 = -2147483648\nw1 = -1\nw0 s/= w1\nexit", 0x80000000),
    ("sdiv32 truncates", "w0 = -7\nw0 s/= 2\nexit", 0xFFFFFFFD),
    ("smod32 negative", "w0 = -7\nw1 = 3\nw0 s%= w1\nexit", 0xFFFFFFFF),
    ("smod32 by zero zero-extends", "r0 = -7\nw1 = 0\nw0 s%= w1\nexit", 0xFFFFFFF9),
    ("sdiv32 ignores high bits", "r0 = 0x10000000a ll\nw0 s/= 5\nexit", 2),
    # MOVSX sign-extends the low 8/16/32 bits of the source
    ("movsx64 s8", "r1 = 0x180\nr0 = (s8)r1\nexit", neg(-128)),
    ("movsx64 s16", "r1 = 0x18000\nr0 = (s16)r1\nexit", neg(-32768)),
    ("movsx64 s32", "r1 = 0x180000000 ll\nr0 = (s32)r1\nexit", neg(-(1 << 31))),
    ("movsx64 positive", "r1 = 0x17f\nr0 = (s8)r1\nexit", 0x7F),
    ("movsx32 s8", "w1 = 0x80\nw0 = (s8)w1\nexit", 0xFFFFFF80),
    ("movsx32 s16", "w1 = 0x8000\nw0 = (s16)w1\nexit", 0xFFFF8000),
    # END and BSWAP
    ("le16 truncates", "r0 = 0x123456789abcdef0 ll\nr0 = le16 r0\nexit", 0xDEF0),
    ("le32 truncates", "r0 = 0x123456789abcdef0 ll\nr0 = le32 r0\nexit", 0x9ABCDEF0),
    ("le64 is identity", "r0 = 0x123456789abcdef0 ll\nr0 = le64 r0\nexit", 0x123456789ABCDEF0),
    ("be16", "r0 = 0x123456789abcdef0 ll\nr0 = be16 r0\nexit", 0xF0DE),
    ("be32", "r0 = 0x123456789abcdef0 ll\nr0 = be32 r0\nexit", 0xF0DEBC9A),
    ("be64", "r0 = 0x123456789abcdef0 ll\nr0 = be64 r0\nexit", 0xF0DEBC9A78563412),
    ("bswap16", "r0 = 0x123456789abcdef0 ll\nr0 = bswap16 r0\nexit", 0xF0DE),
    ("bswap32", "r0 = 0x123456789abcdef0 ll\nr0 = bswap32 r0\nexit", 0xF0DEBC9A),
    ("bswap64", "r0 = 0x123456789abcdef0 ll\nr0 = bswap64 r0\nexit", 0xF0DEBC9A78563412),
    # LD_IMM64 loads both immediate halves
    ("ld_imm64", "r0 = 0xfedcba9876543210 ll\nexit", 0xFEDCBA9876543210),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in ALU_CASES], ids=[c[0] for c in ALU_CASES])
def test_alu(text: str, expected: int) -> None:
    assert r0_of(text) == expected


def jump(cond_line: str, setup: str = "") -> int:
    """1 when the conditional jump is taken, else 0."""
    return r0_of(f"{setup}\nr0 = 0\n{cond_line} goto yes\nexit\nyes:\nr0 = 1\nexit")


JUMP_CASES = [
    ("jeq", "r1 = 5", "if r1 == 0x5", 1),
    ("jne", "r1 = 5", "if r1 != 0x5", 0),
    ("jgt unsigned", "r1 = -1", "if r1 > 0x7fffffff", 1),
    ("jsgt signed", "r1 = -1", "if r1 s> 0x7fffffff", 0),
    ("jslt negative", "r1 = -1", "if r1 s< 0x0", 1),
    ("jlt", "r1 = 3", "if r1 < 0x4", 1),
    ("jle equal", "r1 = 4", "if r1 <= 0x4", 1),
    ("jge", "r1 = 3", "if r1 >= 0x4", 0),
    ("jsge", "r1 = -4", "if r1 s>= 0xfffffffc", 1),
    ("jsle", "r1 = -5", "if r1 s<= 0xfffffffc", 1),
    ("jset", "r1 = 6", "if r1 & 0x2", 1),
    ("jset clear", "r1 = 6", "if r1 & 0x1", 0),
    # K immediates are sign-extended for JMP: -1 matches u64 max
    ("jeq imm sign-extends", "r1 = -1", "if r1 == 0xffffffff", 1),
    ("jgt imm sign-extends", "r1 = 0xffffffff ll", "if r1 > 0xffffffff", 0),
    # JMP32 compares the low 32 bits (signed forms as 32-bit signed)
    ("jeq32 ignores high bits", "r1 = 0x100000000 ll", "if w1 == 0x0", 1),
    ("jeq64 sees high bits", "r1 = 0x100000000 ll", "if r1 == 0x0", 0),
    ("jslt32", "r1 = 0x80000000 ll", "if w1 s< 0x0", 1),
    ("jslt64 same value", "r1 = 0x80000000 ll", "if r1 s< 0x0", 0),
    ("jgt32 reg", "r1 = 0x100000001 ll\nr2 = 0x200000000 ll", "if w1 > w2", 1),
    ("jgt64 reg", "r1 = 0x100000001 ll\nr2 = 0x200000000 ll", "if r1 > r2", 0),
    ("jsgt reg", "r1 = 1\nr2 = -1", "if r1 s> r2", 1),
    ("jsgt32 reg", "r1 = 1\nr2 = 0xffffffff ll", "if w1 s> w2", 1),
    ("jset32", "r1 = 0x100000000 ll\nr2 = -1", "if w1 & w2", 0),
    ("jne32 imm", "w1 = -1", "if w1 != 0xffffffff", 0),
    ("jsle32 imm", "w1 = -1", "if w1 s<= 0xffffffff", 1),
]


@pytest.mark.parametrize(("setup", "cond", "taken"), [c[1:] for c in JUMP_CASES], ids=[c[0] for c in JUMP_CASES])
def test_jumps(setup: str, cond: str, taken: int) -> None:
    assert jump(cond, setup) == taken


def test_ja_and_gotol_skip() -> None:
    assert r0_of("r0 = 1\ngoto out\nr0 = 2\nout:\nexit") == 1
    assert r0_of("r0 = 1\ngotol out\nr0 = 2\nout:\nexit") == 1


MEM_CASES = [
    ("ldx u8", "*(u64 *)(r10 - 8) = -1\nr0 = *(u8 *)(r10 - 8)\nexit", 0xFF),
    ("ldx u16", "*(u64 *)(r10 - 8) = -1\nr0 = *(u16 *)(r10 - 7)\nexit", 0xFFFF),
    ("ldx u32", "*(u64 *)(r10 - 8) = -1\nr0 = *(u32 *)(r10 - 8)\nexit", 0xFFFFFFFF),
    ("st u64 sign-extends imm", "*(u64 *)(r10 - 8) = -2\nr0 = *(u64 *)(r10 - 8)\nexit", neg(-2)),
    ("st u32 keeps neighbours", "*(u64 *)(r10 - 8) = 0\n*(u32 *)(r10 - 4) = -1\nr0 = *(u64 *)(r10 - 8)\nexit",
     0xFFFFFFFF00000000),
    ("stx u16 truncates", "r1 = 0x12345\n*(u16 *)(r10 - 2) = r1\nr0 = *(u16 *)(r10 - 2)\nexit", 0x2345),
    ("stx u8 little-endian", "r1 = 0x1234\n*(u16 *)(r10 - 2) = r1\nr0 = *(u8 *)(r10 - 2)\nexit", 0x34),
    ("ldsx s8", "*(u8 *)(r10 - 1) = 0x80\nr0 = *(s8 *)(r10 - 1)\nexit", neg(-128)),
    ("ldsx s16", "*(u16 *)(r10 - 2) = 0x8001\nr0 = *(s16 *)(r10 - 2)\nexit", neg(-32767)),
    ("ldsx s32", "*(u32 *)(r10 - 4) = -3\nr0 = *(s32 *)(r10 - 4)\nexit", neg(-3)),
    ("ldsx positive", "*(u32 *)(r10 - 4) = 5\nr0 = *(s32 *)(r10 - 4)\nexit", 5),
    ("computed stack pointer", "r1 = r10\nr1 += -16\n*(u64 *)(r1 + 8) = 9\nr0 = *(u64 *)(r10 - 8)\nexit", 9),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in MEM_CASES], ids=[c[0] for c in MEM_CASES])
def test_memory(text: str, expected: int) -> None:
    assert r0_of(text) == expected


def atomic(setup_value: int, op_line: str, result: str, src: int = 0, r0: int = 0) -> int:
    return r0_of(
        f"r1 = r10\nr1 += -8\nr3 = 0x{setup_value:x} ll\n*(u64 *)(r1 + 0) = r3\n"
        f"r2 = 0x{src & M64:x} ll\nr0 = 0x{r0 & M64:x} ll\n{op_line}\n{result}\nexit"
    )


MEMORY_WORD = "r0 = *(u64 *)(r10 - 8)"
ATOMIC_CASES = [
    ("add64", 5, "lock *(u64 *)(r1 + 0) += r2", MEMORY_WORD, 3, 0, 8),
    ("add64 wraps", M64, "lock *(u64 *)(r1 + 0) += r2", MEMORY_WORD, 2, 0, 1),
    ("add32 wraps in 32 bits", 0x1FFFFFFFF, "lock *(u32 *)(r1 + 0) += w2", MEMORY_WORD, 1, 0, 0x100000000),
    ("or64", 0x10, "lock *(u64 *)(r1 + 0) |= r2", MEMORY_WORD, 1, 0, 0x11),
    ("and64", 0x13, "lock *(u64 *)(r1 + 0) &= r2", MEMORY_WORD, 6, 0, 2),
    ("xor32", 0xFF, "lock *(u32 *)(r1 + 0) ^= w2", MEMORY_WORD, 0xF, 0, 0xF0),
    ("fetch_add64 returns old", 5, "r2 = atomic_fetch_add((u64 *)(r1 + 0), r2)", "r0 = r2", 3, 0, 5),
    ("fetch_add64 memory", 5, "r2 = atomic_fetch_add((u64 *)(r1 + 0), r2)", MEMORY_WORD, 3, 0, 8),
    ("fetch_or32 zero-extends old", 0xFFFFFFFF80000000, "w2 = atomic_fetch_or((u32 *)(r1 + 0), w2)", "r0 = r2",
     -1, 0, 0x80000000),
    ("fetch_and32", 0xF0, "w2 = atomic_fetch_and((u32 *)(r1 + 0), w2)", MEMORY_WORD, 0x3C, 0, 0x30),
    ("fetch_xor64", 0xF0, "r2 = atomic_fetch_xor((u64 *)(r1 + 0), r2)", MEMORY_WORD, 0xFF, 0, 0x0F),
    ("xchg64", 7, "r2 = xchg_64(r1 + 0, r2)", "r0 = r2", 9, 0, 7),
    ("xchg64 memory", 7, "r2 = xchg_64(r1 + 0, r2)", MEMORY_WORD, 9, 0, 9),
    ("xchg32 memory", 0x1_0000_0007, "w2 = xchg32_32(r1 + 0, w2)", MEMORY_WORD, -1, 0, 0x1FFFFFFFF),
    ("cmpxchg64 match", 7, "r0 = cmpxchg_64(r1 + 0, r0, r2)", MEMORY_WORD, 9, 7, 9),
    ("cmpxchg64 match returns old", 7, "r0 = cmpxchg_64(r1 + 0, r0, r2)", "", 9, 7, 7),
    ("cmpxchg64 mismatch", 7, "r0 = cmpxchg_64(r1 + 0, r0, r2)", MEMORY_WORD, 9, 8, 7),
    ("cmpxchg32 compares low bits of r0", 7, "w0 = cmpxchg32_32(r1 + 0, w0, w2)", MEMORY_WORD, 9, 0x500000007, 9),
    ("cmpxchg32 old zero-extended", 0xFFFFFFFF, "w0 = cmpxchg32_32(r1 + 0, w0, w2)", "", 9, 0, 0xFFFFFFFF),
    ("load_acquire u16", 0x12345678, "w0 = load_acquire((u16 *)(r1 + 0))", "", 0, 0, 0x5678),
    ("load_acquire u64", 0x1234567890, "r0 = load_acquire((u64 *)(r1 + 0))", "", 0, 0, 0x1234567890),
    ("store_release u8", 0x1234, "store_release((u8 *)(r1 + 0), w2)", MEMORY_WORD, 0x1FF, 0, 0x12FF),
    ("store_release u64", 0, "store_release((u64 *)(r1 + 0), r2)", MEMORY_WORD, -5, 0, neg(-5)),
]


@pytest.mark.parametrize(("value", "line", "result", "src", "r0", "expected"), [c[1:] for c in ATOMIC_CASES],
                         ids=[c[0] for c in ATOMIC_CASES])
def test_atomics(value: int, line: str, result: str, src: int, r0: int, expected: int) -> None:
    assert atomic(value, line, result, src, r0) == expected


def test_uninitialised_registers_and_stack_are_zero() -> None:
    # vm.md §9.1 item 6: zeros, deterministic
    text = "r0 = r2\nr0 |= r3\nr0 |= r4\nr0 |= r5\nr0 |= r6\nr0 |= r7\nr0 |= r8\nr0 |= r9\n"
    text += "r1 = *(u64 *)(r10 - 8)\nr0 |= r1\nr1 = *(u64 *)(r10 - 512)\nr0 |= r1\nexit"
    assert r0_of(text) == 0


def test_entry_registers_r1_and_r10_are_end() -> None:
    assert r0_of("r0 = r1\nr0 -= r10\nexit") == 0
    for engine in ("interp", "translate"):
        program = build([("main", "r0 = r10\n*(u64 *)(r10 - 8) = r0\nexit")], engine=engine)
        assert run(program).r0 == program.layout.end
