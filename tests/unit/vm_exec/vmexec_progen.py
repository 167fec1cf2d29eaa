"""Random eBPF programs for the S9 differential test (vm.md §9.2).

``generate(seed)`` returns assembler functions (``[(name, text)]``) plus section contents. Programs keep
pointers valid (r10-relative inside the frame, data-section addresses inside the image), run bounded
loops (r8/r9 counters), make local calls down a DAG (≤ 8 deep, no recursion) and helper calls with valid
arguments, and cover every ALU, JMP, JMP32, load, store and atomic opcode of cpu v1–v4. About one program
in twelve strays: a computed access through an arbitrary register, or a store to rodata.

For S10 (vm.md §5.1) programs also keep r10-derived pointers in r7 across jump targets and loops, walk them
through local arrays in loops, and index local arrays with (often negative) registers. They use
``[-STACK_SPAN - PATTERN_SPAN, -STACK_SPAN)``, below every constant r10 offset, so a frame computed too small
shows, and read back only what they wrote. Every callee first zeroes the constant-offset stack it uses, so
no result depends on what an earlier call left below its caller's frame (where that lies depends on the frame
sizes); main overwrites r1 (END) in nine programs of ten, so few results depend on where the stack lies.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from wakeful.vm import asm, isa

DATA_BYTES = 256
RODATA_BYTES = 64
BSS_BYTES = 64
STACK_SPAN = 256  # r10-relative accesses use [-STACK_SPAN, 0)
PATTERN_SPAN = 256  # stack patterns (r7 = r10 - k ...) use [-STACK_SPAN - PATTERN_SPAN, -STACK_SPAN)
FREE = (0, 1, 2, 3, 4, 5, 6, 7)  # registers random code may write; r8/r9 are loop counters
PTR = 7  # holds a live r10-derived pointer during a stack pattern (random code leaves it alone then)

INTERESTING64 = [0, 1, 2, 3, 7, 8, 31, 32, 33, 63, 64, 65, 0xFF, 0x80, 0x7FFF, 0x8000, 0xFFFF,
                 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1,
                 (1 << 64) - 2, (1 << 63) + 1, 0xFFFFFFFF80000000, 0x123456789ABCDEF0]
INTERESTING32 = [0, 1, -1, 2, -2, 7, 31, 32, 63, 64, 0x7FFFFFFF, -0x80000000, 0xFF, -0x80, 0x10000, 100]

ALU_CODES = [isa.ADD, isa.SUB, isa.MUL, isa.DIV, isa.OR, isa.AND, isa.LSH, isa.RSH, isa.NEG, isa.MOD,
             isa.XOR, isa.MOV, isa.ARSH]
JMP_CODES = [isa.JEQ, isa.JGT, isa.JGE, isa.JSET, isa.JNE, isa.JSGT, isa.JSGE, isa.JLT, isa.JLE,
             isa.JSLT, isa.JSLE]
SIZES = [isa.SIZE_B, isa.SIZE_H, isa.SIZE_W, isa.SIZE_DW]
RMW = [isa.ATOMIC_ADD, isa.ATOMIC_OR, isa.ATOMIC_AND, isa.ATOMIC_XOR]


@dataclass
class Program:
    funcs: list[tuple[str, str]]  # assembler text (saved to the corpus)
    rodata: bytes
    data: bytes
    bss: int = BSS_BYTES
    strays: bool = False
    binary: list[tuple[str, bytes, list[asm.Reloc]]] = field(default_factory=list)  # the same, assembled
    stack_patterns: list[str] = field(default_factory=list)  # "across" | "walk" | "indexed", as emitted


@dataclass
class _Fn:
    """Items of one function: ('raw', op, dst, src, off, imm) | ('label', n) | ('jump', op, dst, src,
    imm, label) | ('text', line, slots)."""

    index: int
    items: list[tuple[object, ...]] = field(default_factory=list)
    labels: int = 0
    low: int = 0  # lowest r10 offset the function touches

    def raw(self, op: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> None:
        self.items.append(("raw", op, dst, src, off, imm))

    def text(self, line: str, slots: int = 1) -> None:
        self.items.append(("text", line, slots))

    def label(self) -> str:
        self.labels += 1
        return f"L{self.index}_{self.labels}"

    def place(self, name: str) -> None:
        self.items.append(("label", name))

    def jump(self, op: int, dst: int, src: int, imm: int, label: str) -> None:
        self.items.append(("jump", op, dst, src, imm, label))

    def binary(self) -> tuple[bytes, list[asm.Reloc]]:
        """The same function as raw slots plus relocations (skips the text assembler: faster)."""
        where, slot = {}, 0
        for it in self.items:
            if it[0] == "label":
                where[it[1]] = slot
            else:
                slot += int(it[2]) if it[0] == "text" else 1  # type: ignore[call-overload]
        out, relocs, slot = bytearray(), [], 0
        for it in self.items:
            kind = it[0]
            if kind == "label":
                continue
            if kind == "text":
                line = str(it[1])
                if line.startswith("call "):
                    relocs.append(asm.Reloc(slot * 8, asm.R_BPF_64_32, line[5:]))
                    out += isa.encode(isa.OP_CALL, 0, isa.PSEUDO_CALL, 0, -1)
                else:  # "rN = SECTION + ADDEND ll" or "rN = 0xVALUE ll"
                    reg, rest = line[1:].split(" = ", 1)
                    rest = rest[:-3]
                    if "+" in rest:
                        name, addend = rest.split(" + ")
                        value = int(addend)
                        relocs.append(asm.Reloc(slot * 8, asm.R_BPF_64_64, asm.SECTION_ALIASES[name]))
                    else:
                        value = int(rest, 16)
                    out += isa.encode(isa.OP_LDDW, int(reg), 0, 0, value & isa.MASK32)
                    out += isa.encode(0, 0, 0, 0, value >> 32)
                slot += int(it[2])  # type: ignore[call-overload]
                continue
            if kind == "jump":
                _, op, dst, src, imm, label = it
                rel = where[label] - slot - 1  # type: ignore[index]
                if op == isa.OP_GOTOL:
                    out += isa.encode(op, 0, 0, 0, rel)
                else:
                    out += isa.encode(op, dst, src, rel, imm)  # type: ignore[arg-type]
            else:
                _, op, dst, src, off, imm = it
                out += isa.encode(op, dst, src, off, imm)  # type: ignore[arg-type]
            slot += 1
        return bytes(out), relocs

    def render(self) -> str:
        slot, where = 0, {}
        for it in self.items:
            if it[0] == "label":
                where[it[1]] = slot
            else:
                slot += int(it[2]) if it[0] == "text" else 1  # type: ignore[call-overload]
        lines, slot = [], 0
        for it in self.items:
            kind = it[0]
            if kind == "label":
                continue
            if kind == "text":
                lines.append(str(it[1]))
                slot += int(it[2])  # type: ignore[call-overload]
                continue
            if kind == "jump":
                _, op, dst, src, imm, label = it
                rel = where[label] - slot - 1  # type: ignore[index]
                if op == isa.OP_GOTOL:
                    lines.append(f".raw 0x{op:02x} 0 0 0 {rel}")
                else:
                    lines.append(f".raw 0x{op:02x} {dst} {src} {rel} {imm}")
            else:
                _, op, dst, src, off, imm = it
                lines.append(f".raw 0x{op:02x} {dst} {src} {off} {imm}")
            slot += 1
        return "\n".join(lines) + "\n"


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        r = self.rng
        self.nfuncs = r.choice([1, 1, 2, 3, 4, 5])
        self.strays = r.random() < 1 / 12
        self.helpers = r.random() < 0.5
        self.busy: set[int] = set()  # registers holding a live stack pointer
        self.patterns: list[str] = []

    # -- operands --

    def imm32(self) -> int:
        r = self.rng
        return r.choice(INTERESTING32) if r.random() < 0.6 else r.randint(-(1 << 31), (1 << 31) - 1)

    def reg(self) -> int:
        return self.rng.choice([x for x in FREE if x not in self.busy])

    def src_reg(self) -> int:
        roll = self.rng.random()
        if roll < 0.004:  # r10 as a value: rare, it makes the frame 4,096 bytes and the result placement-bound
            return 10
        if roll < 0.2:
            return self.rng.choice([x for x in (*FREE, 8, 9) if x not in self.busy])
        return self.reg()

    # -- statements --

    def const(self, f: _Fn, dst: int) -> None:
        value = self.rng.choice(INTERESTING64) if self.rng.random() < 0.7 else self.rng.getrandbits(64)
        f.text(f"r{dst} = 0x{value:x} ll", 2)

    def alu(self, f: _Fn) -> None:
        r = self.rng
        cls = r.choice((isa.ALU, isa.ALU64))
        dst = self.reg()
        if r.random() < 0.12:
            return self._end(f, dst)
        code = r.choice(ALU_CODES)
        x = r.random() < 0.5
        off = 0
        if code in (isa.DIV, isa.MOD) and r.random() < 0.5:
            off = 1  # SDIV / SMOD
        if code == isa.MOV and x and r.random() < 0.4:
            off = r.choice((8, 16, 32) if cls == isa.ALU64 else (8, 16))  # MOVSX
        if code == isa.NEG:
            f.raw(cls | code, dst)
            return
        if x:
            f.raw(cls | code | isa.X, dst, self.src_reg(), off)
            return
        imm = self.imm32()
        if code in (isa.LSH, isa.RSH, isa.ARSH):
            imm = r.randrange(64 if cls == isa.ALU64 else 32)
        f.raw(cls | code, dst, 0, off, imm)

    def _end(self, f: _Fn, dst: int) -> None:
        width = self.rng.choice((16, 32, 64))
        op = self.rng.choice((isa.ALU | isa.END, isa.ALU | isa.END | isa.X, isa.ALU64 | isa.END))
        f.raw(op, dst, 0, 0, width)

    def pointer(self, f: _Fn, size: int, write: bool) -> tuple[int, int]:
        """(base register, off) of a valid access of ``size`` bytes: the stack, or a section via r6."""
        r = self.rng
        if r.random() < 0.5:
            off = -r.randint(1, STACK_SPAN // size) * size if r.random() < 0.7 else -r.randint(size, STACK_SPAN)
            f.low = min(f.low, off)
            return 10, off
        sections = [("data", DATA_BYTES), ("bss", BSS_BYTES)]
        if not write:
            sections.append(("rodata", RODATA_BYTES))
        name, length = r.choice(sections)
        start = r.randrange(0, length - size + 1)
        addend = r.randrange(0, start + 1) if r.random() < 0.5 else start
        f.text(f"r6 = {name} + {addend} ll", 2)
        return 6, start - addend

    def memory(self, f: _Fn) -> None:
        r = self.rng
        kind = r.choice(("ldx", "ldx", "ldsx", "st", "stx", "stx", "atomic", "acqrel"))
        size = r.choice(SIZES)
        if kind in ("ldx", "ldsx"):
            if kind == "ldsx" and size == isa.SIZE_DW:
                size = isa.SIZE_W
            base, off = self.pointer(f, isa.SIZE_BYTES[size], False)
            mode = isa.MODE_MEMSX if kind == "ldsx" else isa.MODE_MEM
            f.raw(isa.LDX | mode | size, self.reg(), base, off)
        elif kind == "st":
            base, off = self.pointer(f, isa.SIZE_BYTES[size], True)
            f.raw(isa.ST | isa.MODE_MEM | size, base, 0, off, self.imm32())
        elif kind == "stx":
            base, off = self.pointer(f, isa.SIZE_BYTES[size], True)
            f.raw(isa.STX | isa.MODE_MEM | size, base, self.src_reg(), off)
        elif kind == "acqrel":
            base, off = self.pointer(f, isa.SIZE_BYTES[size], True)
            if r.random() < 0.5:
                f.raw(isa.STX | isa.MODE_ATOMIC | size, self.reg(), base, off, isa.LOAD_ACQ)
            else:
                f.raw(isa.STX | isa.MODE_ATOMIC | size, base, self.src_reg(), off, isa.STORE_REL)
        else:
            self.atomic(f)

    def atomic(self, f: _Fn) -> None:
        r = self.rng
        size = r.choice((isa.SIZE_W, isa.SIZE_DW))
        base, off = self.pointer(f, isa.SIZE_BYTES[size], True)
        sel = r.choice([*RMW, *(s | isa.FETCH for s in RMW), isa.ATOMIC_XCHG, isa.ATOMIC_CMPXCHG])
        src = r.choice([x for x in FREE if x != base and x not in self.busy])
        f.raw(isa.STX | isa.MODE_ATOMIC | size, base, src, off, sel)

    def stray(self, f: _Fn) -> None:
        """A deliberately unchecked access (vm.md §9.2: a minority strays to exercise faults)."""
        r = self.rng
        size = r.choice(SIZES)
        if r.random() < 0.3:
            f.text(f"r6 = rodata + {r.randrange(RODATA_BYTES)} ll", 2)
            f.raw(isa.STX | isa.MODE_MEM | size, 6, self.reg(), r.randint(-8, 8))
            return
        base = self.reg()
        if r.random() < 0.5:
            self.const(f, base)
        op = r.choice((isa.LDX | isa.MODE_MEM | size, isa.STX | isa.MODE_MEM | size, isa.ST | isa.MODE_MEM | size))
        if op & 0x07 == isa.LDX:
            f.raw(op, self.reg(), base, r.randint(-64, 64))
        elif op & 0x07 == isa.ST:
            f.raw(op, base, 0, r.randint(-64, 64), self.imm32())
        else:
            f.raw(op, base, self.reg(), r.randint(-64, 64))

    def cond_jump(self, f: _Fn, depth: int, counters: tuple[int, ...]) -> None:
        r = self.rng
        cls = r.choice((isa.JMP, isa.JMP32))
        code = r.choice(JMP_CODES)
        label = f.label()
        if r.random() < 0.5:
            f.jump(cls | code | isa.X, self.src_reg(), self.src_reg(), 0, label)
        else:
            f.jump(cls | code, self.src_reg(), 0, self.imm32(), label)
        self.block(f, depth + 1, r.randint(1, 4), counters)
        if r.random() < 0.3:  # an else-branch: skip over it with ja / gotol
            after = f.label()
            f.jump(r.choice((isa.OP_JA, isa.OP_GOTOL)), 0, 0, 0, after)
            f.place(label)
            self.block(f, depth + 1, r.randint(1, 3), counters)
            f.place(after)
        else:
            f.place(label)

    def loop(self, f: _Fn, depth: int, counters: tuple[int, ...]) -> None:
        r = self.rng
        counter, rest = counters[0], counters[1:]
        f.raw(isa.ALU64 | isa.MOV, counter, 0, 0, r.randint(1, 4))
        head = f.label()
        if r.random() < 0.5:  # do-while: a self-loop or a loop with inner blocks
            f.place(head)
            self.block(f, depth + 1, r.randint(1, 4), rest)
            f.raw(isa.ALU64 | isa.ADD, counter, 0, 0, -1)
            op = r.choice((isa.JMP | isa.JNE, isa.JMP32 | isa.JNE, isa.JMP | isa.JGT))
            f.jump(op, counter, 0, 0, head)
        else:  # while: test at the top, back-edge by ja / gotol
            out = f.label()
            f.place(head)
            f.jump(isa.JMP | isa.JEQ, counter, 0, 0, out)
            self.block(f, depth + 1, r.randint(1, 4), rest)
            f.raw(isa.ALU64 | isa.SUB, counter, 0, 0, 1)
            f.jump(r.choice((isa.OP_JA, isa.OP_GOTOL)), 0, 0, 0, head)
            f.place(out)

    def helper_call(self, f: _Fn) -> None:
        r = self.rng
        name = r.choice(("memcpy", "memset", "memcmp", "sf_now_mono_ms", "sf_yield", "sf_sleep_ms"))
        if name in ("memcpy", "memcmp"):
            n = r.randint(0, 48)
            a = r.randrange(0, 100 - n + 1)
            b = r.randrange(120, DATA_BYTES - n + 1)
            src_sec = "rodata" if name == "memcmp" and r.random() < 0.3 else "data"
            b = min(b, RODATA_BYTES - n) if src_sec == "rodata" else b
            f.text(f"r1 = data + {a} ll", 2)
            f.text(f"r2 = {src_sec} + {b} ll", 2)
            f.raw(isa.ALU64 | isa.MOV, 3, 0, 0, n)
        elif name == "memset":
            n = r.randint(0, 64)
            f.text(f"r1 = data + {r.randrange(0, DATA_BYTES - n + 1)} ll", 2)
            f.raw(isa.ALU64 | isa.MOV, 2, 0, 0, self.imm32())
            f.raw(isa.ALU64 | isa.MOV, 3, 0, 0, n)
        elif name == "sf_sleep_ms":
            f.raw(isa.ALU64 | isa.MOV, 1, 0, 0, r.randint(0, 50))
        f.text(f"call {name}")

    # -- r10-derived pointers (vm.md §5.1, §9.2) --

    def stack_store(self, f: _Fn, off_lo: int, off_hi: int) -> tuple[int, int]:
        """Store through r7 at an offset in [off_lo, off_hi); returns (size, off) for reading it back."""
        r = self.rng
        size = r.choice(SIZES)
        width = isa.SIZE_BYTES[size]
        off = r.randrange(off_lo, off_hi - width + 1, width) if r.random() < 0.8 else r.randint(off_lo, off_hi - width)
        if r.random() < 0.5:
            f.raw(isa.ST | isa.MODE_MEM | size, PTR, 0, off, self.imm32())
        else:
            f.raw(isa.STX | isa.MODE_MEM | size, PTR, self.reg(), off)
        return size, off

    def read_back(self, f: _Fn, size: int, off: int, call: bool = True) -> None:
        """Load what stack_store wrote, perhaps after a call (whose frame lies below this one)."""
        if call and f.index + 1 < self.nfuncs and self.rng.random() < 0.5:
            f.text(f"call f{self.rng.randint(f.index + 1, self.nfuncs - 1)}")
        f.raw(isa.LDX | isa.MODE_MEM | size, self.reg(), PTR, off)

    def derive(self, f: _Fn, k: int) -> None:
        f.raw(isa.ALU64 | isa.MOV | isa.X, PTR, 10)
        f.raw(isa.ALU64 | isa.ADD, PTR, 0, 0, k)

    def across(self, f: _Fn, depth: int, counters: tuple[int, ...]) -> None:
        """r7 = r10 - k, kept across a branch or a loop, then used below -k."""
        k = STACK_SPAN + 8 * self.rng.randint(0, 8)
        self.derive(f, -k)
        if counters and self.rng.random() < 0.5:
            self.loop(f, depth + 1, counters)
        else:
            self.cond_jump(f, depth + 1, counters)
        for _ in range(self.rng.randint(1, 2)):
            self.read_back(f, *self.stack_store(f, k - STACK_SPAN - PATTERN_SPAN, 0))

    def walk(self, f: _Fn, depth: int, counters: tuple[int, ...]) -> None:
        """r7 walked down (or up) a local array by a counted loop, as clang -O2 fills arrays back to front."""
        r = self.rng
        counter, rest = counters[0], counters[1:]
        n, step = r.randint(1, 6), r.choice((8, 16)) * r.choice((-1, -1, 1))
        if step < 0:
            start = -STACK_SPAN - 8 * r.randint(1, (PATTERN_SPAN + step * n) // 8)
        else:
            start = -STACK_SPAN - PATTERN_SPAN + 8 * r.randint(0, 4)
        self.derive(f, start)
        f.raw(isa.ALU64 | isa.MOV, counter, 0, 0, n)
        head = f.label()
        f.place(head)
        size, _ = self.stack_store(f, 0, 8)
        if r.random() < 0.5:
            self.read_back(f, size, 0, call=False)
        if r.random() < 0.4:
            self.block(f, depth + 1, r.randint(1, 3), rest)
        f.raw(isa.ALU64 | isa.ADD, PTR, 0, 0, step)
        f.raw(isa.ALU64 | isa.ADD, counter, 0, 0, -1)
        f.jump(r.choice((isa.JMP | isa.JNE, isa.JMP32 | isa.JNE)), counter, 0, 0, head)
        self.read_back(f, size, -step)  # the last element

    def indexed(self, f: _Fn) -> None:
        """A local array indexed by a register: r7 = r10 + top, r7 += rI (rI often negative)."""
        r = self.rng
        low = -STACK_SPAN - PATTERN_SPAN
        top = -STACK_SPAN - 8 * r.randint(0, PATTERN_SPAN // 8 - 1)
        index = 8 * r.randint((low - top) // 8, (-STACK_SPAN - 8 - top) // 8)
        self.derive(f, top)
        reg = self.reg()
        f.raw(isa.ALU64 | isa.MOV, reg, 0, 0, abs(index) // 8)
        f.raw(isa.ALU64 | isa.LSH, reg, 0, 0, 3)
        if index < 0:
            f.raw(isa.ALU64 | isa.NEG, reg)
        f.raw(isa.ALU64 | isa.ADD | isa.X, PTR, reg)
        self.read_back(f, *self.stack_store(f, 0, 8))

    def stack_pattern(self, f: _Fn, depth: int, counters: tuple[int, ...]) -> None:
        kinds = ["across", "indexed"] + (["walk"] if counters else [])
        kind = self.rng.choice(kinds)
        self.patterns.append(kind)
        self.busy.add(PTR)
        if kind == "across":
            self.across(f, depth, counters)
        elif kind == "walk":
            self.walk(f, depth, counters)
        else:
            self.indexed(f)
        self.busy.discard(PTR)
        f.raw(isa.ALU64 | isa.MOV, PTR, 0, 0, self.imm32())  # dead: random code must not store or mix it

    def block(self, f: _Fn, depth: int, n: int, counters: tuple[int, ...] = (9, 8)) -> None:
        r = self.rng
        for _ in range(n):
            if not self.busy and depth < 3 and r.random() < 0.03:
                self.stack_pattern(f, depth, counters)
                continue
            roll = r.random()
            if roll < 0.45:
                self.alu(f)
            elif roll < 0.62:
                self.memory(f)
            elif roll < 0.66:
                self.const(f, self.reg())
            elif roll < 0.76 and depth < 3:
                self.cond_jump(f, depth, counters)
            elif roll < 0.83 and counters:
                self.loop(f, depth, counters)
            elif roll < 0.88 and self.helpers:
                self.helper_call(f)
            elif roll < 0.93 and f.index + 1 < self.nfuncs:
                f.text(f"call f{r.randint(f.index + 1, self.nfuncs - 1)}")
            elif roll < 0.95 and self.strays:
                self.stray(f)
            else:
                self.alu(f)

    def function(self, index: int) -> tuple[str, str, tuple[bytes, list[asm.Reloc]]]:
        f = _Fn(index)
        r = self.rng
        if index == 0:
            for reg in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9):
                if r.random() < (0.9 if reg == 1 else 0.7):
                    self.const(f, reg)
        self.block(f, 0, r.randint(4, 14) if index == 0 else r.randint(2, 8))
        if index:  # zero the stack this callee uses (see the module docstring)
            f.items[:0] = [("raw", isa.ST | isa.MODE_MEM | isa.SIZE_DW, 10, 0, -8 * i, 0)
                           for i in range(1, (7 - f.low) // 8 + 1)]
        if index == 0:  # spill every register so memory comparison covers them (vm.md §9.2)
            for reg in range(10):
                f.raw(isa.STX | isa.MODE_MEM | isa.SIZE_DW, 10, reg, -8 * (reg + 1))
        f.raw(isa.OP_EXIT)
        return ("main" if index == 0 else f"f{index}"), f.render(), f.binary()


def generate(seed: int) -> Program:
    g = _Gen(seed)
    made = [g.function(i) for i in range(g.nfuncs)]
    rng = random.Random(seed ^ 0x5EED)
    return Program([(n, t) for n, t, _ in made], rng.randbytes(RODATA_BYTES), rng.randbytes(DATA_BYTES),
                   BSS_BYTES, g.strays, [(n, b[0], b[1]) for n, _, b in made], g.patterns)
