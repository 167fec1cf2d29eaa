"""Edge-case programs for the oracle (issue 14): every ALU/ALU32/JMP/JMP32/load/store/atomic form of
cpu v1-v4 with edge operands (0, -1, INT32_MIN, INT64_MIN, shift counts >= width, ...), byte swaps,
sign-extending forms, local calls and memory faults, as ``vm/asm.py`` text.

Each ``Case`` is one program; straight-line cases store every result into ``.data`` through r6, so the
memory comparison checks each of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

U64 = (1 << 64) - 1
BASE = 0x10000

V64 = [0, 1, 2, 7, 31, 32, 63, 64, 65, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000,
       0xFFFFFFFF, 1 << 32, 0x100000001, (1 << 63) - 1, 1 << 63, (1 << 63) + 1, U64, U64 - 1, U64 - 6,
       0xFFFFFFFF80000000, 0x123456789ABCDEF0, 0xFFFFFFFF7FFFFFFF, 0x80000000FFFFFFFF]
SRC64 = [0, 1, 2, 3, 31, 32, 33, 63, 64, 65, 0x80000000, 0xFFFFFFFF, 1 << 63, U64, U64 - 1, U64 - 2,
         0xFFFFFFFF00000000, 0x100000000, 0x123456789ABCDEF0, 0x80000000FFFFFFFF]
IMMS = [0, 1, -1, 2, -2, 3, -3, 7, 31, 32, 33, 63, 64, 65, 0x7FFFFFFF, -0x80000000, 0xFF, -0x80, 0x10000, -7]

ALU_OPS = {"add": (0x00, 0), "sub": (0x10, 0), "mul": (0x20, 0), "div": (0x30, 0), "sdiv": (0x30, 1),
           "or": (0x40, 0), "and": (0x50, 0), "lsh": (0x60, 0), "rsh": (0x70, 0), "mod": (0x90, 0),
           "smod": (0x90, 1), "xor": (0xA0, 0), "mov": (0xB0, 0), "arsh": (0xC0, 0)}
JMP_OPS = {"jeq": 0x10, "jgt": 0x20, "jge": 0x30, "jset": 0x40, "jne": 0x50, "jsgt": 0x60, "jsge": 0x70,
           "jlt": 0xA0, "jle": 0xB0, "jslt": 0xC0, "jsle": 0xD0}
CHUNK = 420  # a multiple of 3: an atomic case is three bodies that must stay together


@dataclass
class Case:
    name: str
    funcs: list[tuple[str, str]]
    rodata: bytes = b""
    data: bytes = b""
    bss: int = 0


def _straight(name: str, bodies: list[list[str]], *, data: bytes = b"", rodata: bytes = b"") -> Iterator[Case]:
    """Programs of at most CHUNK cases; case i stores its result at data + 8 * (i + len(data) / 8)."""
    skip = len(data) // 8
    for n in range(0, len(bodies), CHUNK):
        chunk = bodies[n:n + CHUNK]
        lines = ["r6 = data + 0 ll"]
        for i, body in enumerate(chunk):
            lines += [line.replace("{slot}", str(8 * (skip + i))).replace("{next}", str(8 * (skip + i) + 4))
                      for line in body]
        lines += ["r0 = r1", "exit"]
        yield Case(f"{name}-{n // CHUNK}", [("main", "\n".join(lines) + "\n")], rodata,
                   data + bytes(8 * len(chunk)))


def _set(reg: int, value: int) -> str:
    return f"r{reg} = 0x{value & U64:x} ll"


# ---------------------------------------------------------------- ALU / ALU64


def alu_cases() -> Iterator[Case]:
    for cls, width in ((0x07, "alu64"), (0x04, "alu32")):
        for name, (code, off) in ALU_OPS.items():
            x = [[_set(1, a), _set(2, b), f".raw 0x{cls | code | 8:02x} 1 2 {off} 0", _slot(1)]
                 for a in V64 for b in SRC64]
            yield from _straight(f"{width}-{name}-x", x)
            k = [[_set(1, a), f".raw 0x{cls | code:02x} 1 0 {off} {imm}", _slot(1)] for a in V64 for imm in IMMS]
            yield from _straight(f"{width}-{name}-k", k)
        neg = [[_set(1, a), f".raw 0x{cls | 0x80:02x} 1 0 0 0", _slot(1)] for a in V64]
        yield from _straight(f"{width}-neg", neg)
        for bits in (8, 16, 32) if width == "alu64" else (8, 16):
            movsx = [[_set(1, a), _set(2, b), f".raw 0x{cls | 0xB8:02x} 1 2 {bits} 0", _slot(1)]
                     for a in (0, U64) for b in [*V64, *SRC64]]
            yield from _straight(f"{width}-movsx{bits}", movsx)


def _slot(reg: int) -> str:
    return f".raw 0x7b 6 {reg} {{slot}} 0"


def alu_edge_cases() -> Iterator[Case]:
    """The RFC 9669 division rules at the extremes: INT_MIN / -1, INT_MIN % -1, by zero."""
    bodies = []
    for cls, bits in ((0x07, 64), (0x04, 32)):
        low = 1 << (bits - 1)
        for code, off in ((0x30, 1), (0x90, 1), (0x30, 0), (0x90, 0)):
            for a in (low, low | (0xDEAD << 32 if bits == 32 else 0), low + 1, 7, U64 - 6):
                for b in (U64, 0, U64 - 1, 1, 0xFFFFFFFF, 0x1FFFFFFFF):
                    bodies.append([_set(1, a), _set(2, b), f".raw 0x{cls | code | 8:02x} 1 2 {off} 0", _slot(1)])
                for imm in (-1, 0, -2, 1):
                    bodies.append([_set(1, a), f".raw 0x{cls | code:02x} 1 0 {off} {imm}", _slot(1)])
    yield from _straight("division-extremes", bodies)


def swap_cases() -> Iterator[Case]:
    bodies = [[_set(1, v), f".raw 0x{op:02x} 1 0 0 {w}", _slot(1)]
              for op in (0xD4, 0xDC, 0xD7) for w in (16, 32, 64) for v in [*V64, 0xFF23, 0xFF12FF34FF56FF78]]
    yield from _straight("byte-swaps", bodies)


def ldimm64_cases() -> Iterator[Case]:
    yield from _straight("ld-imm64", [[_set(1, v), _slot(1)] for v in V64])


# ---------------------------------------------------------------- JMP / JMP32


def jump_cases() -> Iterator[Case]:
    for cls, width in ((0x05, "jmp"), (0x06, "jmp32")):
        for name, code in JMP_OPS.items():
            # r3 stays 0 when the branch is taken (it skips the r3 = 1)
            x = [[_set(1, a), _set(2, b), "r3 = 0", f".raw 0x{cls | code | 8:02x} 1 2 1 0", "r3 = 1", _slot(3)]
                 for a in V64 for b in SRC64[::2]]
            yield from _straight(f"{width}-{name}-x", x)
            k = [[_set(1, a), "r3 = 0", f".raw 0x{cls | code:02x} 1 0 1 {imm}", "r3 = 1", _slot(3)]
                 for a in V64 for imm in IMMS]
            yield from _straight(f"{width}-{name}-k", k)
    ja = [["r3 = 0", ".raw 0x05 0 0 1 0", "r3 = 1", ".raw 0x06 0 0 0 1", "r3 = 2", _slot(3)],
          ["r3 = 0", ".raw 0x05 0 0 0 0", "r3 = 1", ".raw 0x06 0 0 0 0", "r3 += 2", _slot(3)]]
    yield from _straight("ja-gotol", ja)


# ---------------------------------------------------------------- loads, stores, atomics

PATTERN = bytes([0x80, 0x7F, 0xFF, 0x00, 0x01, 0xFE, 0x81, 0x7E, 0x00, 0x80, 0xFF, 0x7F, 0x12, 0x34, 0x56, 0x78,
                 0x9A, 0xBC, 0xDE, 0xF0, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x80, 0xFF, 0xFF, 0xFF, 0x7F])
SIZE = {"b": 0x10, "h": 0x08, "w": 0x00, "dw": 0x18}
NBYTES = {"b": 1, "h": 2, "w": 4, "dw": 8}


def load_cases() -> Iterator[Case]:
    bodies = []
    for section in ("data", "rodata"):
        for mode, sizes in ((0x60, ("b", "h", "w", "dw")), (0x80, ("b", "h", "w"))):
            for size in sizes:
                for at in range(0, len(PATTERN) - NBYTES[size] + 1):
                    bodies.append([f"r7 = {section} + {at} ll", f".raw 0x{0x01 | mode | SIZE[size]:02x} 1 7 0 0", _slot(1)])
                    if section == "rodata":
                        continue
                    # the same through a negative offset from a pointer past the byte
                    bodies.append([f"r7 = {section} + {at + 9} ll", f".raw 0x{0x01 | mode | SIZE[size]:02x} 1 7 -9 0",
                                   _slot(1)])
    yield from _straight("loads", bodies, data=PATTERN, rodata=PATTERN)


def store_cases() -> Iterator[Case]:
    bodies = []
    for size in SIZE:
        for imm in IMMS:
            bodies.append([f".raw 0x{0x62 | SIZE[size]:02x} 6 0 {{slot}} {imm}"])  # ST: *(size *)(r6 + slot) = imm
        for v in V64:
            bodies.append([_set(1, v), f".raw 0x{0x63 | SIZE[size]:02x} 6 1 {{slot}} 0"])
            bodies.append([_set(1, v), f".raw 0x{0xC3 | SIZE[size]:02x} 6 1 {{slot}} 272"])  # store-release
        for at in (0, 3, 8):  # load-acquire from the pattern
            bodies.append([f"r7 = data + {at} ll", f".raw 0x{0xC3 | SIZE[size]:02x} 1 7 0 256", _slot(1)])
        # stack round trip
        bodies.append([_set(1, 0x8182838485868788), f".raw 0x{0x63 | SIZE[size]:02x} 10 1 -16 0",
                       f".raw 0x{0x61 | SIZE[size]:02x} 2 10 -16 0", _slot(2)])
    yield from _straight("stores", bodies, data=PATTERN)


ATOMIC = {"add": 0x00, "or": 0x40, "and": 0x50, "xor": 0xA0, "add_fetch": 0x01, "or_fetch": 0x41,
          "and_fetch": 0x51, "xor_fetch": 0xA1, "xchg": 0xE1, "cmpxchg": 0xF1}


def atomic_cases() -> Iterator[Case]:
    bodies = []
    mems = (0x00000000FFFFFFFF, 0x8000000080000000, 0x123456789ABCDEF0)
    srcs = (0x1, U64, 0xFFFFFFFF00000001, 0x8000000080000000)
    for size, op in (("w", 0xC3), ("dw", 0xDB)):
        for name, sel in ATOMIC.items():
            for m in mems:
                for s in srcs:
                    # r0: equal to memory, equal in its low 32 bits only, and different
                    for r0 in (m, m ^ (0xABCD << 32), m ^ 1):
                        # three bodies: the memory word, then src, then r0 after the atomic
                        bodies.append([_set(1, m), ".raw 0x7b 6 1 {slot} 0", _set(2, s), _set(0, r0),
                                       f".raw 0x{op:02x} 6 2 {{slot}} {sel}"])
                        bodies += [[_slot(2)], [_slot(0)]]
                        if name != "cmpxchg":
                            break
            if size == "w":  # the other half of a 64-bit word next to a W atomic stays untouched
                bodies += [[_set(1, U64), ".raw 0x7b 6 1 {slot} 0", "r2 = 5", f".raw 0x{op:02x} 6 2 {{next}} {sel}"],
                           [_slot(2)], [_slot(0)]]
    yield from _straight("atomics", bodies)


# ---------------------------------------------------------------- calls and faults

CALLER = """
r1 = 0x1111 ll
r2 = 0x2222 ll
r3 = 0x3333 ll
r4 = 0x4444 ll
r5 = 0x5555 ll
r6 = 0x6666 ll
r7 = 0x7777 ll
r8 = data + 0 ll
r9 = 0x9999 ll
*(u64 *)(r10 - 8) = r9
call f1
*(u64 *)(r8 + 0) = r0
*(u64 *)(r8 + 8) = r1
*(u64 *)(r8 + 16) = r2
*(u64 *)(r8 + 24) = r3
*(u64 *)(r8 + 32) = r4
*(u64 *)(r8 + 40) = r5
*(u64 *)(r8 + 48) = r6
*(u64 *)(r8 + 56) = r7
*(u64 *)(r8 + 64) = r9
r1 = *(u64 *)(r10 - 8)
*(u64 *)(r8 + 72) = r1
r0 += r1
exit
"""

CALLEE = """
r8 = data + 80 ll
*(u64 *)(r8 + 0) = r0
*(u64 *)(r8 + 8) = r1
*(u64 *)(r8 + 16) = r5
*(u64 *)(r8 + 24) = r6
*(u64 *)(r8 + 32) = r7
*(u64 *)(r8 + 40) = r9
*(u64 *)(r10 - 8) = r1
r1 = r10
*(u64 *)(r8 + 48) = r1
r1 = 0
r2 = 0
r3 = 0
r4 = 0
r5 = 0
r6 = 0
r7 = 0
r9 = 0
call f2
r1 = *(u64 *)(r10 - 8)
r0 += r1
exit
"""

LEAF = """
r3 = r10
r3 += -8
*(u64 *)(r3 + 0) = r0
r0 = 0x77 ll
exit
"""


POINTER_CALLER = """
r9 = 5
*(u64 *)(r10 - 16) = r9
r1 = r10
r1 += -16
call g
r0 = *(u64 *)(r10 - 16)
r1 = data + 0 ll
*(u64 *)(r1 + 0) = r0
exit
"""

POINTER_CALLEE = """
r2 = *(u64 *)(r1 + 0)
r2 *= 3
*(u64 *)(r1 + 0) = r2
*(u64 *)(r10 - 8) = r2
r0 = 0
exit
"""


def call_cases() -> Iterator[Case]:
    yield Case("local-calls", [("main", CALLER), ("f1", CALLEE), ("f2", LEAF)], data=bytes(160))
    # a callee writing its caller's frame through a passed pointer (vm.md §5 frames)
    # vm.md §3: CALL src 1 without a relocation is a relative local call (pc + imm + 1)
    yield Case("call-relative", [("main", "r1 = 5\ncall pc+2\nr0 += 1\nexit\nr0 = r1\nr0 *= 3\nexit\n")])
    yield Case("call-with-stack-pointer", [("main", POINTER_CALLER), ("g", POINTER_CALLEE)], data=bytes(8))


def _faulting(name: str, body: str) -> Case:
    return Case(name, [("main", body + "\nexit\n")], rodata=PATTERN, data=PATTERN, bss=8)


def fault_cases() -> Iterator[Case]:
    """vm.md §5 / §8 / §9.1.1: every width at 0, BASE - 1, END - 1 (straddle), END, 2^63, 2^64 - 1."""
    for size, code in SIZE.items():
        for at in ("0", f"0x{BASE - 1:x}", "0x8000000000000000", "0xffffffffffffffff"):
            yield _faulting(f"read-{size}-{at}", f"r1 = {at} ll\n.raw 0x{0x61 | code:02x} 0 1 0 0")
            yield _faulting(f"write-{size}-{at}", f"r1 = {at} ll\n.raw 0x{0x62 | code:02x} 1 0 0 7")
        for back in (1, 0):  # END - 1 straddles for size > 1; END itself always faults
            yield _faulting(f"read-{size}-end-{back}", f"r1 = r10\nr1 += -{back}\n.raw 0x{0x61 | code:02x} 0 1 0 0")
            yield _faulting(f"write-{size}-end-{back}", f"r1 = r10\n.raw 0x{0x63 | code:02x} 1 1 -{back} 0")
        yield _faulting(f"write-rodata-{size}", f"r1 = rodata + 4 ll\n.raw 0x{0x63 | code:02x} 1 1 0 0")
        yield _faulting(f"store-release-rodata-{size}", f"r1 = rodata + 0 ll\n.raw 0x{0xC3 | code:02x} 1 1 0 272")
        yield _faulting(f"load-acquire-null-{size}", f"r1 = 0 ll\n.raw 0x{0xC3 | code:02x} 0 1 8 256")
    for op in (0xC3, 0xDB):
        for sel in (0x00, 0x01, 0xE1, 0xF1):
            yield _faulting(f"atomic-rodata-{op:x}-{sel:x}", f"r1 = rodata + 8 ll\nr2 = 1\n.raw 0x{op:02x} 1 2 0 {sel}")
            yield _faulting(f"atomic-low-{op:x}-{sel:x}", f"r1 = 0x{BASE:x} ll\nr2 = 1\n.raw 0x{op:02x} 1 2 -4 {sel}")
    # vm.md §9.1.4: walk down from r10 through stack, data and rodata to below BASE; up from data past END
    walk = "r6 = data + 0 ll\n{start}\nr2 = 0\nloop:\nr1 += {step}\nr3 = *(u8 *)(r1 + 0)\nr2 *= 31\n" \
           "r2 += r3\n*(u64 *)(r6 + 0) = r2\ngoto loop"
    yield _faulting("walk-down", walk.format(start="r1 = r10", step=-1))
    yield _faulting("walk-up", walk.format(start="r1 = data + 8 ll", step=1))
    yield _faulting("below-base-by-wrap", f"r1 = 0x{BASE:x} ll\nr0 = *(u8 *)(r1 - 1)")
    yield _faulting("rodata-data-straddle", "r1 = data + 0 ll\n*(u64 *)(r1 - 4) = r1")
    yield _faulting("end-is-r1", "r0 = *(u8 *)(r1 + 0)")
    yield _faulting("helper-pointer", "r1 = rodata + 0 ll\nr2 = data + 0 ll\nr3 = 4\ncall memcpy")
    yield _faulting("helper-after-calls", "r1 = data + 0 ll\nr2 = 7\nr3 = 8\ncall memset\nr1 = 0 ll\nr2 = 1\n"
                    "r3 = 1\ncall memset")


def all_cases() -> list[Case]:
    return [*alu_cases(), *alu_edge_cases(), *swap_cases(), *ldimm64_cases(), *jump_cases(), *load_cases(),
            *store_cases(), *atomic_cases(), *call_cases(), *fault_cases()]
