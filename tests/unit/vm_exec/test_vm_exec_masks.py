"""Mask elision (vm.md §6.2) must never drop a mask that matters: every producer of a wide value, followed
by every 32-bit consumer, in the same block and across a join, agrees with the reference interpreter."""

from __future__ import annotations

import pytest
from vmexec_kit import both

# each leaves a value with high bits set in r1 (r2 = 0x1_0000_0003 and r3 = -1 are available)
PRODUCERS = {
    "mov64 imm": "r1 = -5",
    "add64 imm": "r1 = r2\nr1 += 7",
    "add64 reg": "r1 = 9\nr1 += r2",
    "sub64": "r1 = 3\nr1 -= 9",
    "mul64": "r1 = r2\nr1 *= 3",
    "lsh64": "r1 = 7\nr1 <<= 33",
    "neg64": "r1 = 5\nr1 = -r1",
    "arsh64": "r1 = r3\nr1 s>>= 3",
    "or64": "r1 = 5\nr1 |= r2",
    "xor64": "r1 = 5\nr1 ^= r3",
    "and64": "r1 = r3\nr1 &= r2",
    "rsh64 of wide": "r1 = r3\nr1 >>= 1",
    "div64 of wide": "r1 = r3\nr1 /= 3",
    "mod64 of wide": "r1 = r3\nr1 %= 0x7fffffff",
    "sdiv64": "r1 = r3\nr1 s/= 2\nr1 += r2",
    "mov64 reg": "r1 = r2",
    "movsx": "r1 = 0x80\nr1 = (s8)r1",
    "movsx32 to 64": "r1 = 0x80000001 ll\nr1 = (s32)r1",
    "ld_imm64": "r1 = 0x1234567800000009 ll",
    "ldx u64": "*(u64 *)(r10 - 8) = r2\nr1 = *(u64 *)(r10 - 8)",
    "ldsx s32": "*(u32 *)(r10 - 8) = -3\nr1 = *(s32 *)(r10 - 8)",
    "ldsx s8": "*(u8 *)(r10 - 8) = 0x85\nr1 = *(s8 *)(r10 - 8)",
    "bswap64": "r1 = 0x99\nr1 = bswap64 r1",
    "le64 keeps": "r1 = r2\nr1 = le64 r1",
    "be64": "r1 = 0x77\nr1 = be64 r1",
    "fetch_add64": "*(u64 *)(r10 - 8) = r2\nr4 = r10\nr4 += -8\nr1 = 1\nr1 = atomic_fetch_add((u64 *)(r4 + 0), r1)",
    "xchg64": "*(u64 *)(r10 - 8) = r2\nr4 = r10\nr4 += -8\nr1 = 1\nr1 = xchg_64(r4 + 0, r1)",
    "cmpxchg64 r0": "*(u64 *)(r10 - 8) = r2\nr4 = r10\nr4 += -8\nr0 = 0\nr5 = 1\nr0 = cmpxchg_64(r4 + 0, r0, r5)\nr1 = r0",
    "load_acquire64": "*(u64 *)(r10 - 8) = r2\nr4 = r10\nr4 += -8\nr1 = load_acquire((u64 *)(r4 + 0))",
    "helper result": "call sf_now_mono_ms\nr1 = r0\nr1 -= 100",
    "r10 copy": "r1 = r10\nr1 += r2",
}

CONSUMERS = {
    "mov32": "w0 = w1",
    "rsh32": "w1 >>= 1\nr0 = r1",
    "arsh32": "w1 s>>= 1\nr0 = r1",
    "div32": "w1 /= 3\nr0 = r1",
    "mod32": "w1 %= 3\nr0 = r1",
    "div32 reg": "w5 = 7\nw5 /= w1\nr0 = r5",
    "or32": "w1 |= 0\nr0 = r1",
    "xor32": "w1 ^= 0\nr0 = r1",
    "and32": "w1 &= -1\nr0 = r1",
    "jeq32": "r0 = 1\nif w1 == 0x3 goto +1\nr0 = 2",
    "jgt32 reg": "w5 = 5\nr0 = 1\nif w1 > w5 goto +1\nr0 = 2",
    "jslt32": "r0 = 1\nif w1 s< 0x0 goto +1\nr0 = 2",
    "store32": "*(u32 *)(r10 - 16) = r1\nr0 = *(u64 *)(r10 - 16)",
    "atomic add32": "*(u64 *)(r10 - 16) = 0\nr4 = r10\nr4 += -16\nlock *(u32 *)(r4 + 0) += w1\nr0 = *(u64 *)(r10 - 16)",
    "fetch32 result": "*(u64 *)(r10 - 16) = 0\nr4 = r10\nr4 += -16\nw1 = atomic_fetch_add((u32 *)(r4 + 0), w1)\n"
                      "r0 = r1\nr0 += 1",
}

SETUP = "r2 = 0x100000003 ll\nr3 = -1\n"


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
@pytest.mark.parametrize("join", [False, True], ids=["same-block", "after-join"])
def test_wide_values_keep_their_masks(producer: str, join: bool) -> None:
    for name, consumer in CONSUMERS.items():
        middle = "r7 = 1\nif r7 == 0x0 goto +1\nr7 = 2\n" if join else ""
        text = f"{SETUP}{PRODUCERS[producer]}\n{middle}{consumer}\nexit"
        a, b = both([("main", text)])
        assert a.comparable() == b.comparable(), (producer, name, a.r0, b.r0)
        assert a.fault is None, (producer, name, a.fault)
