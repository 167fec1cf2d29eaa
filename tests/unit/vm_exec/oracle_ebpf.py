"""An independent eBPF interpreter: the second oracle of the differential tests (issue 14, vm.md §9.2).

``vm/interp.py`` and ``vm/translate.py`` share ``vm/semantics.py``, so their agreement cannot catch a
semantic error they share. This module is written from RFC 9669 directly and imports nothing from
``wakeful`` (nor anything else but the standard library): it decodes the raw, unlinked instruction bytes
itself, links calls and LD_IMM64 relocations itself, lays out guest memory itself and implements every
instruction with its own arithmetic (floor-corrected division instead of ``abs``, signed values instead of
bias compares, ``struct`` byte swaps). Test code only.

What it takes from wakeful is the *interface*, not the semantics (kept in :class:`Image`, :class:`Func`
and the ``helper`` callback, and described in docs/decisions-vm-exec.md):

* the memory map of vm.md §5 (BASE, packed sections, END, which ranges read/write/fault);
* each function's frame size and the stack size (computed by the verifier, vm.md §5.1: layout facts);
* wakeful's local-call convention (vm.md §5, §6.1): the callee gets r1-r5, r0 = r6..r9 = 0 and
  r10 = caller's r10 - caller's frame; after the call the caller's r1-r9 are as before, r0 is the result;
  helpers leave r1-r5 alone too;
* the fault codes of vm.md §8 and their (code, address, size, function, pc) record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

BASE = 0x10000  # vm.md §5
U64 = (1 << 64) - 1
U32 = (1 << 32) - 1
MAX_DEPTH = 8  # vm.md §4 CALL_DEPTH
STEP_LIMIT = 5_000_000

R_BPF_64_64, R_BPF_64_32 = 1, 10  # vm.md §3


class OracleError(Exception):
    """The oracle cannot run this program (a harness bug or an encoding it does not know)."""


class OracleFault(Exception):
    """A guest fault (vm.md §8). Helpers raise it without ``function``/``pc``; the oracle fills them."""

    def __init__(self, code: str, address: int | None, size: int | None,
                 function: str | None = None, pc: int | None = None) -> None:
        super().__init__(code, address, size, function, pc)
        self.code, self.address, self.size, self.function, self.pc = code, address, size, function, pc

    def record(self) -> tuple[str, int | None, int | None, str | None, int | None]:
        return (self.code, self.address, self.size, self.function, self.pc)


@dataclass(frozen=True)
class Func:
    """One function as the ELF holds it: raw slots, REL relocations ``(byte offset, type, symbol)``
    and its frame size (the verifier's figure, vm.md §5.1)."""

    name: str
    code: bytes
    relocs: Sequence[tuple[int, int, str]]
    frame: int


@dataclass(frozen=True)
class Image:
    """Section contents and the stack size; addresses follow vm.md §5 (every section 8-aligned, as
    vm/asm.py writes them): rodata at BASE, data at BASE + R, bss after data, then the stack."""

    rodata: bytes
    data: bytes
    bss: int
    stack: int

    @property
    def r(self) -> int:
        return _up(len(self.rodata))

    @property
    def bss_at(self) -> int:
        return self.r + _up(len(self.data))

    @property
    def d(self) -> int:
        return _up(self.bss_at + self.bss - self.r)

    def section_address(self, name: str) -> int:
        at = {".rodata": 0, ".data": self.r, ".bss": self.bss_at}.get(name)
        if at is None:
            raise OracleError(f"unknown section {name!r}")
        return BASE + at

    def memory(self) -> bytearray:
        mem = bytearray(self.r + self.d + self.stack)
        mem[0:len(self.rodata)] = self.rodata
        mem[self.r:self.r + len(self.data)] = self.data
        return mem


def _up(n: int) -> int:
    return -(-n // 8) * 8


@dataclass
class Result:
    r0: int | None
    fault: tuple[str, int | None, int | None, str | None, int | None] | None
    mem: bytes
    steps: int


Helper = Callable[[str, tuple[int, ...]], int]

# ---------------------------------------------------------------- integers (RFC 9669 §2.2 notation)


def signed(value: int, bits: int) -> int:
    """``(sN)value``: the low ``bits`` bits as a two's-complement number."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def trunc_div(a: int, b: int) -> int:
    """C division (truncates toward zero, RFC 9669 §4.1) from Python's floor division."""
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return q


# ---------------------------------------------------------------- decoding and linking (RFC 9669 §3)


@dataclass
class Slot:
    op: int
    dst: int
    src: int
    off: int
    imm: int  # signed 32-bit, or the full u64 of a LD_IMM64
    variant: str
    target: tuple[str, int | str] | None = None  # calls: ("local", function index) | ("helper", name)


@dataclass
class Code:
    names: list[str]
    slots: list[list[Slot]]
    frames: list[int]
    starts: dict[str, int] = field(default_factory=dict)


def fields(code: bytes, i: int) -> tuple[int, int, int, int, int]:
    raw = code[8 * i:8 * i + 8]
    off = int.from_bytes(raw[2:4], "little", signed=True)
    imm = int.from_bytes(raw[4:8], "little", signed=True)
    return raw[0], raw[1] & 0x0F, raw[1] >> 4, off, imm


def link(funcs: Sequence[Func], image: Image) -> Code:
    names = [f.name for f in funcs]
    code = Code(names, [], [f.frame for f in funcs])
    for f in funcs:
        relocs = {off // 8: (kind, sym) for off, kind, sym in f.relocs}
        slots: list[Slot] = []
        n = len(f.code) // 8
        for i in range(n):
            op, dst, src, off, imm = fields(f.code, i)
            if slots and slots[-1].op == 0x18 and len(slots) == i:  # second slot of LD_IMM64
                prev = slots[-1]
                prev.imm = (prev.imm & U32) | ((imm & U32) << 32)
                if i - 1 in relocs:
                    prev.imm = (prev.imm + image.section_address(relocs[i - 1][1])) & U64
                slots.append(Slot(0, 0, 0, 0, 0, "ld_imm64.hi"))
                continue
            slot = Slot(op, dst, src, off, imm, variant_of(op, src, off, imm))
            if op == 0x85:  # the relocation, not src, tells a helper from a local call (vm.md §3)
                slot.target = _call_target(names, relocs.get(i), src, imm, len(slots))
                slot.variant = f"call.{slot.target[0]}"
            slots.append(slot)
        code.slots.append(slots)
    return code


def _call_target(names: list[str], reloc: tuple[int, str] | None, src: int, imm: int,
                 pc: int) -> tuple[str, int | str]:
    """vm.md §3: R_BPF_64_32 to a defined function is a local call to ``start + imm + 1``; to an
    undefined symbol a helper by name. The generator and the edge tests only call function starts."""
    if reloc is None:
        raise OracleError(f"call at {pc} without relocation (src={src})")
    kind, sym = reloc
    if kind != R_BPF_64_32:
        raise OracleError(f"relocation type {kind} on a call")
    if sym in names:
        if imm != -1:
            raise OracleError("local call into the middle of a function")
        return ("local", names.index(sym))
    return ("helper", sym)


# ---------------------------------------------------------------- the instruction set, by name

ALU_NAMES = {0x0: "add", 0x1: "sub", 0x2: "mul", 0x3: "div", 0x4: "or", 0x5: "and", 0x6: "lsh", 0x7: "rsh",
             0x8: "neg", 0x9: "mod", 0xA: "xor", 0xB: "mov", 0xC: "arsh"}
JMP_NAMES = {0x1: "jeq", 0x2: "jgt", 0x3: "jge", 0x4: "jset", 0x5: "jne", 0x6: "jsgt", 0x7: "jsge",
             0xA: "jlt", 0xB: "jle", 0xC: "jslt", 0xD: "jsle"}
SIZE_NAMES = {0x00: "w", 0x08: "h", 0x10: "b", 0x18: "dw"}
SIZE_BYTES = {"w": 4, "h": 2, "b": 1, "dw": 8}
ATOMIC_NAMES = {0x00: "add", 0x40: "or", 0x50: "and", 0xA0: "xor"}


def variant_of(op: int, src: int, off: int, imm: int) -> str:
    """A readable name of the instruction form (opcode plus the offset/imm/src that select a variant)."""
    cls = op & 7
    if cls in (4, 7):
        width = "alu32" if cls == 4 else "alu64"
        code, x = op >> 4, "x" if op & 8 else "k"
        if code == 0xD:
            kind = {0xD4: "le", 0xDC: "be", 0xD7: "bswap"}.get(op, f"end?{op:#x}")
            return f"{kind}{imm}"
        name = ALU_NAMES.get(code, f"alu?{code:#x}")
        if off == 1 and name in ("div", "mod"):
            name = "s" + name
        if off in (8, 16, 32) and name == "mov":
            name = f"movsx{off}"
        return f"{width}.{name}" if name == "neg" else f"{width}.{name}.{x}"
    if cls in (5, 6):
        width = "jmp" if cls == 5 else "jmp32"
        code = op >> 4
        if code == 0x0:
            return f"{width}.ja"
        if code == 0x8:
            return "call"
        if code == 0x9:
            return "exit"
        return f"{width}.{JMP_NAMES.get(code, '?')}.{'x' if op & 8 else 'k'}"
    if op == 0x18:
        return "ld_imm64"
    size = SIZE_NAMES[op & 0x18]
    mode = op & 0xE0
    if cls == 1:
        return f"ldx.{'memsx' if mode == 0x80 else 'mem'}.{size}"
    if cls == 2:
        return f"st.mem.{size}"
    if mode == 0xC0:
        if imm == 0x100:
            return f"load_acq.{size}"
        if imm == 0x110:
            return f"store_rel.{size}"
        name = {0xE1: "xchg", 0xF1: "cmpxchg"}.get(imm) or ATOMIC_NAMES.get(imm & ~1, "?") + (
            "_fetch" if imm & 1 else "")
        return f"atomic.{size}.{name}"
    return f"stx.mem.{size}"


def all_variants() -> set[str]:
    """Every instruction form vm.md §4.1 accepts (RFC 9669 cpu v1-v4 plus load-acquire/store-release)."""
    out: set[str] = set()
    for width in ("alu32", "alu64"):
        for name in ("add", "sub", "mul", "div", "sdiv", "or", "and", "lsh", "rsh", "mod", "smod", "xor",
                     "mov", "arsh"):
            out |= {f"{width}.{name}.k", f"{width}.{name}.x"}
        out.add(f"{width}.neg")
        out |= {f"{width}.movsx{b}.x" for b in ((8, 16) if width == "alu32" else (8, 16, 32))}
    out |= {f"{k}{w}" for k in ("le", "be", "bswap") for w in (16, 32, 64)}
    for width in ("jmp", "jmp32"):
        out.add(f"{width}.ja")
        out |= {f"{width}.{n}.{x}" for n in JMP_NAMES.values() for x in "kx"}
    out |= {"call.local", "call.helper", "exit", "ld_imm64"}
    for size in SIZE_NAMES.values():
        out |= {f"ldx.mem.{size}", f"st.mem.{size}", f"stx.mem.{size}", f"load_acq.{size}", f"store_rel.{size}"}
        if size != "dw":
            out.add(f"ldx.memsx.{size}")
    for size in ("w", "dw"):
        for name in ATOMIC_NAMES.values():
            out |= {f"atomic.{size}.{name}", f"atomic.{size}.{name}_fetch"}
        out |= {f"atomic.{size}.xchg", f"atomic.{size}.cmpxchg"}
    return out


# ---------------------------------------------------------------- arithmetic (RFC 9669 §4.1, §4.2)


def alu(name: str, bits: int, dst: int, operand: int) -> int:
    """``dst = dst OP operand`` in ``bits`` (32: both read as their low 32 bits, result zero-extended).
    ``operand`` is the source register or the immediate sign-extended to 64 bits."""
    mask = (1 << bits) - 1
    a, b = dst & mask, operand & mask
    if name == "add":
        r = a + b
    elif name == "sub":
        r = a - b
    elif name == "mul":
        r = a * b
    elif name == "div":  # division by zero sets dst to 0
        r = a // b if b else 0
    elif name == "sdiv":
        r = trunc_div(signed(a, bits), signed(b, bits)) if b else 0
    elif name == "mod":  # modulo by zero leaves dst (ALU: its low 32 bits)
        r = a % b if b else a
    elif name == "smod":  # truncated: a - n * trunc(a / n), the sign of the dividend
        sa, sb = signed(a, bits), signed(b, bits)
        r = sa - sb * trunc_div(sa, sb) if sb else a
    elif name == "or":
        r = a | b
    elif name == "and":
        r = a & b
    elif name == "xor":
        r = a ^ b
    elif name == "lsh":  # shift counts are masked to 63 / 31
        r = a << (b % bits)
    elif name == "rsh":
        r = a >> (b % bits)
    elif name == "arsh":
        r = signed(a, bits) >> (b % bits)
    elif name == "neg":
        r = -a
    elif name == "mov":
        r = b
    elif name.startswith("movsx"):  # (s8/s16/s32)src, then to the class width
        r = signed(operand, int(name[5:]))
    else:
        raise OracleError(f"unknown ALU operation {name}")
    return r & mask


_SWAP = {16: ("<H", ">H"), 32: ("<I", ">I"), 64: ("<Q", ">Q")}


def byte_swap(kind: str, width: int, value: int) -> int:
    """RFC 9669 §4.2 on a little-endian host: ``le`` truncates to ``width`` bits, ``be`` and the
    unconditional ``bswap`` (ALU64) reverse the low ``width / 8`` bytes; the rest is zeroed."""
    if width not in _SWAP:
        raise OracleError(f"byte swap width {width}")
    low = value & ((1 << width) - 1)
    if kind == "le":
        return low
    little, big = _SWAP[width]
    swapped: int = struct.unpack(big, struct.pack(little, low))[0]
    return swapped


def compare(name: str, bits: int, a: int, b: int) -> bool:
    """RFC 9669 §4.3: JMP compares 64 bits, JMP32 the low 32 bits; ``js*`` compare signed values."""
    ua, ub = a & ((1 << bits) - 1), b & ((1 << bits) - 1)
    sa, sb = signed(a, bits), signed(b, bits)
    return {
        "jeq": ua == ub, "jne": ua != ub, "jset": ua & ub != 0,
        "jgt": ua > ub, "jge": ua >= ub, "jlt": ua < ub, "jle": ua <= ub,
        "jsgt": sa > sb, "jsge": sa >= sb, "jslt": sa < sb, "jsle": sa <= sb,
    }[name]


def edge_tags(variant: str, dst: int, operand: int) -> list[str]:
    """Operand edge cases of an ALU instruction, for the coverage report."""
    parts = variant.split(".")
    if len(parts) < 2:
        return []
    bits = 32 if parts[0] == "alu32" else 64
    name = parts[1]
    tags = []
    if name in ("div", "sdiv", "mod", "smod") and operand & ((1 << bits) - 1) == 0:
        tags.append(f"{variant}:by-zero")
    if name in ("sdiv", "smod") and signed(operand, bits) == -1 and signed(dst, bits) == -(1 << (bits - 1)):
        tags.append(f"{variant}:min/-1")
    if name in ("sdiv", "smod") and signed(dst, bits) < 0 and signed(operand, bits) not in (0, -1):
        tags.append(f"{variant}:negative")
    if name in ("lsh", "rsh", "arsh") and operand & U64 >= bits:
        tags.append(f"{variant}:count>=width")
    if name.startswith("movsx") and signed(operand, int(name[5:])) < 0:
        tags.append(f"{variant}:negative")
    return tags


def all_edge_tags() -> set[str]:
    out: set[str] = set()
    for width in ("alu32", "alu64"):
        for x in "kx":
            out |= {f"{width}.{n}.{x}:by-zero" for n in ("div", "sdiv", "mod", "smod")}
            out |= {f"{width}.{n}.{x}:min/-1" for n in ("sdiv", "smod")}
            out |= {f"{width}.{n}.{x}:negative" for n in ("sdiv", "smod")}
        out |= {f"{width}.{n}.{x}:count>=width" for n in ("lsh", "rsh", "arsh") for x in "kx"}
        out |= {f"{width}.movsx{b}.x:negative" for b in ((8, 16) if width == "alu32" else (8, 16, 32))}
    return out


# ---------------------------------------------------------------- the machine


class Machine:
    """One run of a linked program over its own memory (vm.md §5) with wakeful's call convention."""

    def __init__(self, code: Code, mem: bytearray, writable: int, helper: Helper, arity: dict[str, int],
                 coverage: set[str] | None = None) -> None:
        self.code = code
        self.mem = mem
        self.end = BASE + len(mem)
        self.writable = writable  # guest address of the first writable byte
        self.helper, self.arity = helper, arity
        self.coverage = coverage
        # vm.md §5 entry registers: r1 = r10 = END, all others 0
        self.regs = [0] * 11
        self.regs[1] = self.regs[10] = self.end
        self.func, self.pc = 0, 0
        self.frames: list[tuple[int, int, list[int]]] = []
        self.steps = 0

    # -- memory: reads [BASE, END), writes [BASE + W, END); anything else faults (vm.md §5, §8) --

    def _address(self, base: int, off: int) -> int:
        return (base + off) & U64

    def read(self, address: int, size: int, sign: bool = False) -> int:
        if not (address >= BASE and address + size <= self.end):
            raise OracleFault("MEMORY_READ", address, size)
        i = address - BASE
        return int.from_bytes(self.mem[i:i + size], "little", signed=sign) & U64

    def check_write(self, address: int, size: int) -> None:
        if not (self.writable <= address and address + size <= self.end):
            code = "RODATA_WRITE" if BASE <= address < self.writable else "MEMORY_WRITE"
            raise OracleFault(code, address, size)

    def write(self, address: int, size: int, value: int) -> None:
        self.check_write(address, size)
        i = address - BASE
        self.mem[i:i + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")

    # -- running --

    def run(self) -> Result:
        try:
            r0 = self._loop()
        except OracleFault as fault:
            if fault.function is None:
                fault.function, fault.pc = self.code.names[self.func], self.pc
            return Result(None, fault.record(), bytes(self.mem), self.steps)
        return Result(r0, None, bytes(self.mem), self.steps)

    def _loop(self) -> int:
        while True:
            self.steps += 1
            if self.steps > STEP_LIMIT:
                raise OracleError("step limit reached")
            slot = self.code.slots[self.func][self.pc]
            if self.coverage is not None:
                self.coverage.add(slot.variant)
            cls = slot.op & 7
            if cls in (4, 7):
                self._alu(slot)
            elif cls in (5, 6):
                done = self._jump(slot)
                if done is not None:
                    return done
            elif slot.op == 0x18:  # RFC 9669 §5.4: dst = imm64
                self.regs[slot.dst] = slot.imm
                self.pc += 2
            elif cls in (1, 2, 3):
                self._memory(slot)
                self.pc += 1
            else:
                raise OracleError(f"opcode {slot.op:#x}")

    def _alu(self, s: Slot) -> None:
        regs = self.regs
        parts = s.variant.split(".")
        if len(parts) == 1:  # le16 / be32 / bswap64 ...
            kind = s.variant.rstrip("0123456789")
            regs[s.dst] = byte_swap(kind, s.imm, regs[s.dst])
        else:
            bits = 32 if parts[0] == "alu32" else 64
            # RFC 9669 §4.1: K operands are the immediate sign-extended to 64 bits (ALU uses its low 32)
            operand = regs[s.src] if s.op & 8 else s.imm & U64
            if self.coverage is not None:
                self.coverage.update(edge_tags(s.variant, regs[s.dst], operand))
            regs[s.dst] = alu(parts[1], bits, regs[s.dst], operand)
        self.pc += 1

    def _jump(self, s: Slot) -> int | None:
        code = s.op >> 4
        if code == 0x9:
            return self._exit()
        if code == 0x8:
            self._call(s)
            return None
        if code == 0x0:  # JA: PC += offset (JMP) or imm (JMP32, gotol)
            self.pc += 1 + (s.off if s.op & 7 == 5 else s.imm)
            return None
        bits = 64 if s.op & 7 == 5 else 32
        operand = self.regs[s.src] if s.op & 8 else s.imm & U64
        taken = compare(JMP_NAMES[code], bits, self.regs[s.dst], operand)
        self.pc += 1 + (s.off if taken else 0)
        return None

    def _call(self, s: Slot) -> None:
        assert s.target is not None
        kind, target = s.target
        regs = self.regs
        if kind == "helper":
            name = str(target)
            if name not in self.arity:
                raise OracleError(f"helper {name} has no arity")
            regs[0] = self.helper(name, tuple(regs[1:1 + self.arity[name]])) & U64
            self.pc += 1
            return
        if len(self.frames) + 1 >= MAX_DEPTH:
            raise OracleError("call depth")
        # vm.md §5: the callee's r10 is the caller's r10 minus the caller's frame size
        callee = [0, *regs[1:6], 0, 0, 0, 0, regs[10] - self.code.frames[self.func]]
        self.frames.append((self.func, self.pc + 1, regs[:]))
        self.regs = callee
        self.func, self.pc = int(target), 0

    def _exit(self) -> int | None:
        if not self.frames:
            return self.regs[0]
        r0 = self.regs[0]
        self.func, self.pc, self.regs = self.frames.pop()
        self.regs[0] = r0
        return None

    def _memory(self, s: Slot) -> None:
        regs = self.regs
        parts = s.variant.split(".")
        kind, mode = parts[0], parts[1]
        size = SIZE_BYTES[SIZE_NAMES[s.op & 0x18]]
        if kind == "ldx":  # RFC 9669 §5.1/§5.2: zero- or sign-extending load
            regs[s.dst] = self.read(self._address(regs[s.src], s.off), size, sign=mode == "memsx")
        elif kind == "st":
            self.write(self._address(regs[s.dst], s.off), size, s.imm)
        elif kind == "stx":
            self.write(self._address(regs[s.dst], s.off), size, regs[s.src])
        elif kind == "load_acq":  # vm.md §4.1: a plain zero-extending load here (one thread)
            regs[s.dst] = self.read(self._address(regs[s.src], s.off), size)
        elif kind == "store_rel":
            self.write(self._address(regs[s.dst], s.off), size, regs[s.src])
        else:
            self._atomic(s, parts[2], size)

    def _atomic(self, s: Slot, name: str, size: int) -> None:
        """RFC 9669 §5.3 on one thread: read, modify, write; FETCH puts the old value in src."""
        if size not in (4, 8):
            raise OracleError("atomic of 1 or 2 bytes")
        regs = self.regs
        address = self._address(regs[s.dst], s.off)
        self.check_write(address, size)
        old = self.read(address, size)
        width = (1 << (8 * size)) - 1
        value = regs[s.src] & width
        if name == "cmpxchg":  # compare with r0 (its low bits for W); r0 gets the old value
            if old == regs[0] & width:
                self.write(address, size, value)
            regs[0] = old
            return
        if name == "xchg":
            new = value
        else:
            op = name.removesuffix("_fetch")
            new = {"add": old + value, "or": old | value, "and": old & value, "xor": old ^ value}[op]
        self.write(address, size, new)
        if name.endswith("_fetch") or name == "xchg":
            regs[s.src] = old


def run(funcs: Sequence[Func], image: Image, helper: Helper, arity: dict[str, int],
        coverage: set[str] | None = None) -> Result:
    """Run the entry (the first function) to its exit or fault."""
    return Machine(link(funcs, image), image.memory(), BASE + image.r, helper, arity, coverage).run()
