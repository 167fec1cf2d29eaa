"""A second program generator for the oracle, unlike vmexec_progen's: dense dataflow over six registers
seeded with edge values, every ALU/ALU32 form (MOVSX, SDIV/SMOD, byte swaps, shifts of any count),
sign-extending and plain loads and stores on one data area, atomics, and forward JMP/JMP32 skips.
Loop-free, so every program ends; all registers are spilled before exit.
"""

from __future__ import annotations

import random

from oracle_edges import ALU_OPS, JMP_OPS, V64

DATA = 64  # bytes of .data the programs read and write through r6
REGS = (0, 1, 2, 3, 4, 5)


def _imm(r: random.Random) -> int:
    return r.choice((0, 1, -1, 2, 31, 32, 63, 64, -0x80000000, 0x7FFFFFFF, -2, 0xFF, 8, 16)) \
        if r.random() < 0.7 else r.randint(-(1 << 31), (1 << 31) - 1)


def _alu(r: random.Random) -> str:
    cls = r.choice((0x07, 0x04))
    dst, src = r.choice(REGS), r.choice(REGS)
    roll = r.random()
    if roll < 0.08:
        return f".raw 0x{cls | 0x80:02x} {dst} 0 0 0"  # neg
    if roll < 0.18:
        op, width = r.choice(((0xD4, 0), (0xDC, 0), (0xD7, 0))), r.choice((16, 32, 64))
        return f".raw 0x{op[0]:02x} {dst} 0 0 {width}"
    if roll < 0.28:
        bits = r.choice((8, 16, 32) if cls == 0x07 else (8, 16))
        return f".raw 0x{cls | 0xB8:02x} {dst} {src} {bits} 0"
    code, off = ALU_OPS[r.choice(list(ALU_OPS))]
    if r.random() < 0.5:
        return f".raw 0x{cls | code | 8:02x} {dst} {src} {off} 0"
    return f".raw 0x{cls | code:02x} {dst} 0 {off} {_imm(r)}"


def _memory(r: random.Random) -> str:
    size, nbytes = r.choice(((0x10, 1), (0x08, 2), (0x00, 4), (0x18, 8)))
    at = r.randrange(0, DATA - nbytes + 1)
    reg = r.choice(REGS)
    roll = r.random()
    if roll < 0.3:
        return f".raw 0x{0x61 | size:02x} {reg} 6 {at} 0"
    if roll < 0.5 and nbytes < 8:
        return f".raw 0x{0x81 | size:02x} {reg} 6 {at} 0"  # MEMSX
    if roll < 0.65:
        return f".raw 0x{0x62 | size:02x} 6 0 {at} {_imm(r)}"
    if roll < 0.8 or nbytes < 4:
        return f".raw 0x{0x63 | size:02x} 6 {reg} {at} 0"
    at -= at % nbytes
    sel = r.choice((0x00, 0x01, 0x40, 0x41, 0x50, 0x51, 0xA0, 0xA1, 0xE1, 0xF1))
    return f".raw 0x{0xC3 | size:02x} 6 {reg} {at} {sel}"


def program(seed: int) -> tuple[list[tuple[str, str]], bytes]:
    """One function plus the initial bytes of .data."""
    r = random.Random(seed)
    lines = ["r6 = data + 0 ll"]
    for reg in REGS:
        lines.append(f"r{reg} = 0x{r.choice(V64) if r.random() < 0.8 else r.getrandbits(64):x} ll")
    n = r.randint(10, 40)
    body: list[str] = []
    for _ in range(n):
        roll = r.random()
        if roll < 0.6:
            body.append(_alu(r))
        elif roll < 0.85:
            body.append(_memory(r))
        else:
            cls, code = r.choice((0x05, 0x06)), JMP_OPS[r.choice(list(JMP_OPS))]
            skip = r.randint(0, 3)
            if r.random() < 0.5:
                body.append(f".raw 0x{cls | code | 8:02x} {r.choice(REGS)} {r.choice(REGS)} {skip} 0")
            else:
                body.append(f".raw 0x{cls | code:02x} {r.choice(REGS)} 0 {skip} {_imm(r)}")
    # forward skips land inside the body or on the first spill; pad so no jump leaves the function
    lines += body + [f".raw 0x7b 10 {reg} {-8 * (reg + 1)} 0" for reg in (*REGS, 6)]
    lines += ["r0 = 0", "exit"]
    return [("main", "\n".join(lines) + "\n")], r.randbytes(DATA)
