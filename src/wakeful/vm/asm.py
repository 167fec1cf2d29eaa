"""Assembler and ET_REL ELF writer for tests and benchmarks (vm.md §1): builds objects clang cannot.

Text syntax = the disassembler's (vm.md §4.2, ``vm/disasm.py``) plus labels, symbolic calls/addresses, ``.raw``.

Syntax summary (one instruction per line; ``;`` or ``#`` start a comment)::

    loop:                          a label, local to its Func; usable by goto/gotol/if ... goto
    if r1 > 0x40 goto loop         (or goto +3 / goto -1: relative slot offsets)
    call sf_log_raw                R_BPF_64_32 against the (undefined) helper symbol
    call walk                      R_BPF_64_32 against the function symbol ``walk`` (local call)
    call pc+3 / call 5             relative local call without relocation / numeric helper id
    r1 = rodata + 8 ll             R_BPF_64_64 against the section symbol of .rodata (also data, bss,
                                   any section name, or any symbol name), addend 8
    .raw 0x85 0 2 0 7              one slot with arbitrary fields (op dst src off imm)

Adversarial objects: ``builder(...)`` returns an :class:`ElfBuilder` whose sections, symbols,
relocations and header fields can be edited before ``build()``; ``Section``/``Symbol``/``Reloc`` can
also be passed to ``elf()`` directly, and ``patch_shdr``/``patch_ehdr`` edit finished bytes.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from wakeful.errors import InvalidParams
from wakeful.vm import isa
from wakeful.vm.disasm import ALU_OPS, JMP_OPS, SIGNED_ALU_OPS

__all__ = [
    "ENTRY_SECTION",
    "AsmError",
    "ElfBuilder",
    "Func",
    "Reloc",
    "Section",
    "Symbol",
    "assemble",
    "builder",
    "elf",
    "patch_ehdr",
    "patch_shdr",
]

ENTRY_SECTION = "spinfoam.main"

# ELF constants (System V gABI)
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 1, 2, 3, 4, 8, 9
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
STB_LOCAL, STB_GLOBAL = 0, 1
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION = 0, 1, 2, 3
R_BPF_64_64, R_BPF_64_ABS64, R_BPF_64_ABS32, R_BPF_64_NODYLD32, R_BPF_64_32 = 1, 2, 3, 4, 10

SECTION_ALIASES = {"rodata": ".rodata", "data": ".data", "bss": ".bss"}


class AsmError(InvalidParams):
    """Bad assembler text or builder input (a test-authoring mistake, never hostile input)."""


@dataclass(frozen=True)
class Reloc:
    """A REL relocation at byte ``offset`` (of a Func's code, or of a section) against ``symbol``
    (a name, resolved at build time, or a raw symbol index)."""

    offset: int
    type: int
    symbol: str | int


@dataclass(frozen=True)
class Func:
    """One function: assembler text or raw slot bytes (then ``relocs`` are taken as given)."""

    name: str
    code: str | bytes
    section: str | None = None
    relocs: Sequence[Reloc] = ()


@dataclass
class Section:
    """A section header plus contents; ``size`` overrides ``len(data)`` (NOBITS, or hostile sizes)."""

    name: str
    type: int = SHT_PROGBITS
    flags: int = SHF_ALLOC
    data: bytes = b""
    align: int = 8
    size: int | None = None
    link: int = 0
    info: int = 0
    entsize: int = 0


@dataclass
class Symbol:
    """A symbol; ``section`` is a section name, a raw shndx, or None (undefined)."""

    name: str
    value: int = 0
    size: int = 0
    type: int = STT_NOTYPE
    bind: int = STB_GLOBAL
    section: str | int | None = None


# ---------------------------------------------------------------- assembler

_NUM = r"-?(?:0x[0-9a-fA-F]+|\d+)"
_NAME = r"[A-Za-z_.$][\w.$]*"
_TARGET = rf"([+-]\d+|{_NAME})"
_MEMOP = r"\*?\(([us])(8|16|32|64)\s*\*\)\s*\(r(\d+)\s*([+-])\s*(\d+)\)"
_SIZES = {8: isa.SIZE_B, 16: isa.SIZE_H, 32: isa.SIZE_W, 64: isa.SIZE_DW}
_ALU_BY_NAME = {v: k for k, v in ALU_OPS.items()}
_SIGNED_BY_NAME = {v: k for k, v in SIGNED_ALU_OPS.items()}
_JMP_BY_NAME = {v: k for k, v in JMP_OPS.items()}
_ALU_OP_RE = "|".join(re.escape(o) for o in sorted({*ALU_OPS.values(), *SIGNED_ALU_OPS.values()}, key=len, reverse=True))
_JMP_OP_RE = "|".join(re.escape(o) for o in sorted(JMP_OPS.values(), key=len, reverse=True))
_FETCH_BY_NAME = {"atomic_fetch_add": isa.ATOMIC_ADD, "atomic_fetch_or": isa.ATOMIC_OR,
                  "atomic_fetch_and": isa.ATOMIC_AND, "atomic_fetch_xor": isa.ATOMIC_XOR}
_LOCK_BY_NAME = {"+=": isa.ATOMIC_ADD, "|=": isa.ATOMIC_OR, "&=": isa.ATOMIC_AND, "^=": isa.ATOMIC_XOR}


def _int(text: str) -> int:
    return int(text, 0)


def _reg(kind_num: str) -> tuple[str, int]:
    return kind_num[0], int(kind_num[1:])


class _Fn:
    """Assembly state of one function: slots, pending label fix-ups, relocations."""

    def __init__(self) -> None:
        self.slots: list[list[int]] = []  # [op, dst, src, off, imm]
        self.labels: dict[str, int] = {}
        self.fixups: list[tuple[int, str, str, int]] = []  # (slot, field, label, lineno)
        self.relocs: list[Reloc] = []

    def emit(self, op: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> int:
        self.slots.append([op, dst, src, off, imm])
        return len(self.slots) - 1

    def target(self, slot: int, fld: str, target: str, lineno: int) -> None:
        if target[0] in "+-" and target[1:].isdigit():
            self.slots[slot][3 if fld == "off" else 4] = int(target)
        else:
            self.fixups.append((slot, fld, target, lineno))

    def finish(self) -> tuple[bytes, list[Reloc]]:
        for slot, fld, label, lineno in self.fixups:
            if label not in self.labels:
                raise AsmError(f"line {lineno}: unknown label {label!r}")
            self.slots[slot][3 if fld == "off" else 4] = self.labels[label] - slot - 1
        out = bytearray()
        for op, dst, src, off, imm in self.slots:
            if not -0x8000 <= off < 0x8000 or not -(1 << 31) <= imm < (1 << 32):
                raise AsmError(f"field out of range in slot {len(out) // 8}: off={off} imm={imm}")
            out += struct.pack("<BBhi", op, ((src & 0xF) << 4) | (dst & 0xF), off,
                               imm - (1 << 32) if imm >= 1 << 31 else imm)
        return bytes(out), self.relocs


def assemble(text: str) -> tuple[bytes, list[Reloc]]:
    """Assemble one function's text to raw slots plus relocations (byte offsets in the function)."""
    fn = _Fn()
    for lineno, line in enumerate(text.splitlines(), 1):
        stmt = re.split(r"[;#]", line, maxsplit=1)[0].strip()
        while (m := re.match(rf"^({_NAME}):\s*", stmt)) and not stmt.startswith(".raw"):
            fn.labels[m.group(1)] = len(fn.slots)
            stmt = stmt[m.end():]
        if stmt:
            _statement(fn, stmt, lineno)
    return fn.finish()


def _statement(fn: _Fn, stmt: str, lineno: int) -> None:
    stmt = re.sub(r"\s+", " ", stmt)
    for handler in _HANDLERS:
        if handler(fn, stmt, lineno):
            return
    raise AsmError(f"line {lineno}: cannot assemble {stmt!r}")


def _raw(fn: _Fn, s: str, n: int) -> bool:
    m = re.fullmatch(r"\.raw (\S+) (\S+) (\S+) (\S+) (\S+)", s)
    if m:
        fn.emit(*(_int(g) for g in m.groups()))
    return m is not None


def _jumps(fn: _Fn, s: str, n: int) -> bool:
    if s == "exit":
        fn.emit(isa.OP_EXIT)
    elif m := re.fullmatch(rf"goto {_TARGET}", s):
        fn.target(fn.emit(isa.OP_JA), "off", m.group(1), n)
    elif m := re.fullmatch(rf"gotol {_TARGET}", s):
        fn.target(fn.emit(isa.OP_GOTOL), "imm", m.group(1), n)
    elif m := re.fullmatch(r"gotox r(\d+)", s):
        fn.emit(isa.OP_GOTOX, int(m.group(1)))
    elif m := re.fullmatch(r"callx r(\d+)", s):
        fn.emit(isa.OP_CALL | isa.X, int(m.group(1)))
    elif m := re.fullmatch(r"call pc([+-]\d+)", s):
        fn.emit(isa.OP_CALL, src=isa.PSEUDO_CALL, imm=int(m.group(1)))
    elif m := re.fullmatch(rf"call ({_NUM})", s):
        fn.emit(isa.OP_CALL, imm=_int(m.group(1)))
    elif m := re.fullmatch(rf"call ({_NAME})", s):
        slot = fn.emit(isa.OP_CALL, src=isa.PSEUDO_CALL, imm=-1)
        fn.relocs.append(Reloc(slot * 8, R_BPF_64_32, m.group(1)))
    else:
        return False
    return True


_COND_JUMP = rf"if ([rw]\d+) ({_JMP_OP_RE}) ([rw]\d+|{_NUM}) goto {_TARGET}"


def _reg_form(pattern: str, s: str, wide: int, narrow: int) -> tuple[re.Match[str], str, int, int] | None:
    """``s`` matched in full by ``pattern``, whose group 1 is a register → (match, kind, register, class):
    the class is ``wide`` for an ``r`` register and ``narrow`` for a ``w`` one."""
    m = re.fullmatch(pattern, s)
    if not m:
        return None
    kind, dst = _reg(m.group(1))
    return m, kind, dst, wide if kind == "r" else narrow


def _cond_jump(fn: _Fn, s: str, n: int) -> bool:
    if (form := _reg_form(_COND_JUMP, s, isa.JMP, isa.JMP32)) is None:
        return False
    m, kind, dst, cls = form
    slot = _reg_or_imm(fn, cls | _JMP_BY_NAME[m.group(2)], kind, dst, m.group(3), n)
    fn.target(slot, "off", m.group(4), n)
    return True


def _reg_or_imm(fn: _Fn, op: int, kind: str, dst: int, operand: str, n: int, off: int = 0) -> int:
    """Emit ``op`` with a register source (``| X``) or an immediate, whichever ``operand`` names → the slot."""
    if operand[0] in "rw":
        skind, src = _reg(operand)
        _same_kind(kind, skind, n)
        return fn.emit(op | isa.X, dst, src, off)
    return fn.emit(op, dst, 0, off, _int(operand))


def _same_kind(a: str, b: str, n: int) -> None:
    if a != b:
        raise AsmError(f"line {n}: mixed r/w registers")


def _ldimm64(fn: _Fn, s: str, n: int) -> bool:
    if m := re.fullmatch(rf"r(\d+) = ({_NUM}) ll", s):
        value = _int(m.group(2)) & isa.MASK64
        fn.emit(isa.OP_LDDW, int(m.group(1)), imm=value & isa.MASK32)
        fn.emit(0, imm=value >> 32)
        return True
    m = re.fullmatch(rf"r(\d+) = ({_NAME})(?: ([+-]) ({_NUM}))? ll", s)
    if not m:
        return False
    addend = _int(m.group(4) or "0") * (-1 if m.group(3) == "-" else 1) & isa.MASK64
    slot = fn.emit(isa.OP_LDDW, int(m.group(1)), imm=addend & isa.MASK32)
    fn.emit(0, imm=addend >> 32)
    symbol = SECTION_ALIASES.get(m.group(2), m.group(2))
    fn.relocs.append(Reloc(slot * 8, R_BPF_64_64, symbol))
    return True


def _memory(fn: _Fn, s: str, n: int) -> bool:
    if m := re.fullmatch(rf"r(\d+) = {_MEMOP}", s):
        dst, sign, bits, base, pm, off = m.groups()
        mode = isa.MODE_MEMSX if sign == "s" else isa.MODE_MEM
        fn.emit(isa.LDX | mode | _SIZES[int(bits)], int(dst), int(base), _signed(pm, off))
    elif m := re.fullmatch(rf"{_MEMOP} = (r\d+|{_NUM})", s):
        _sign, bits, base, pm, off, value = m.groups()
        size = _SIZES[int(bits)]
        if value[0] == "r":
            fn.emit(isa.STX | isa.MODE_MEM | size, int(base), int(value[1:]), _signed(pm, off))
        else:
            fn.emit(isa.ST | isa.MODE_MEM | size, int(base), 0, _signed(pm, off), _int(value))
    else:
        return False
    return True


def _signed(pm: str, num: str) -> int:
    return -int(num) if pm == "-" else int(num)


def _atomic(fn: _Fn, s: str, n: int) -> bool:
    ptr = r"\(u(8|16|32|64) \*\)\(r(\d+) ([+-]) (\d+)\)"
    addr = r"r(\d+) ([+-]) (\d+)"
    stx = isa.STX | isa.MODE_ATOMIC
    if m := re.fullmatch(rf"lock \*{ptr} (\+=|\|=|&=|\^=) [rw](\d+)", s):
        bits, base, pm, off, op, src = m.groups()
        fn.emit(stx | _SIZES[int(bits)], int(base), int(src), _signed(pm, off), _LOCK_BY_NAME[op])
    elif m := re.fullmatch(rf"[rw](\d+) = (atomic_fetch_\w+)\({ptr}, [rw](\d+)\)", s):
        _dst, name, bits, base, pm, off, src = m.groups()
        sel = _FETCH_BY_NAME.get(name)
        if sel is None:
            raise AsmError(f"line {n}: unknown atomic {name}")
        fn.emit(stx | _SIZES[int(bits)], int(base), int(src), _signed(pm, off), sel | isa.FETCH)
    elif m := re.fullmatch(rf"[rw](\d+) = xchg(_64|32_32)\({addr}, [rw](\d+)\)", s):
        _dst, width, base, pm, off, src = m.groups()
        size = isa.SIZE_DW if width == "_64" else isa.SIZE_W
        fn.emit(stx | size, int(base), int(src), _signed(pm, off), isa.ATOMIC_XCHG)
    elif m := re.fullmatch(rf"[rw]0 = cmpxchg(_64|32_32)\({addr}, [rw]0, [rw](\d+)\)", s):
        width, base, pm, off, src = m.groups()
        size = isa.SIZE_DW if width == "_64" else isa.SIZE_W
        fn.emit(stx | size, int(base), int(src), _signed(pm, off), isa.ATOMIC_CMPXCHG)
    elif m := re.fullmatch(rf"[rw](\d+) = load_acquire\({ptr}\)", s):
        dst, bits, base, pm, off = m.groups()
        fn.emit(stx | _SIZES[int(bits)], int(dst), int(base), _signed(pm, off), isa.LOAD_ACQ)
    elif m := re.fullmatch(rf"store_release\({ptr}, [rw](\d+)\)", s):
        bits, base, pm, off, src = m.groups()
        fn.emit(stx | _SIZES[int(bits)], int(base), int(src), _signed(pm, off), isa.STORE_REL)
    else:
        return False
    return True


def _alu(fn: _Fn, s: str, n: int) -> bool:
    if m := re.fullmatch(r"r(\d+) = (be|le|bswap)(16|32|64) r(\d+)", s):
        dst, kind, bits, src = m.groups()
        if dst != src:
            raise AsmError(f"line {n}: byte swap must name one register")
        op = {"le": isa.ALU | isa.END, "be": isa.ALU | isa.END | isa.X, "bswap": isa.ALU64 | isa.END}[kind]
        fn.emit(op, int(dst), imm=int(bits))
    elif m := re.fullmatch(r"([rw]\d+) = -([rw]\d+)", s):
        kind, dst = _reg(m.group(1))
        if m.group(1) != m.group(2):
            raise AsmError(f"line {n}: negation must name one register")
        fn.emit((isa.ALU64 if kind == "r" else isa.ALU) | isa.NEG, dst)
    elif m := re.fullmatch(r"([rw]\d+) = \(s(8|16|32)\)([rw]\d+)", s):
        (kind, dst), (skind, src) = _reg(m.group(1)), _reg(m.group(3))
        _same_kind(kind, skind, n)
        fn.emit((isa.ALU64 if kind == "r" else isa.ALU) | isa.MOV | isa.X, dst, src, int(m.group(2)))
    else:
        return False
    return True


_ALU_BINARY = rf"([rw]\d+) ({_ALU_OP_RE}) ([rw]\d+|{_NUM})"


def _alu_binary(fn: _Fn, s: str, n: int) -> bool:
    if (form := _reg_form(_ALU_BINARY, s, isa.ALU64, isa.ALU)) is None:
        return False
    m, kind, dst, cls = form
    name = m.group(2)
    code, off = (_SIGNED_BY_NAME[name], 1) if name in _SIGNED_BY_NAME else (_ALU_BY_NAME[name], 0)
    _reg_or_imm(fn, cls | code, kind, dst, m.group(3), n, off)
    return True


# tried in this order; each either assembles the statement and says True or leaves it and says False
_HANDLERS = (_raw, _jumps, _cond_jump, _ldimm64, _memory, _atomic, _alu, _alu_binary)


# ---------------------------------------------------------------- ELF writer


@dataclass
class ElfBuilder:
    """Everything ``build()`` writes; edit fields freely to make adversarial objects."""

    sections: list[Section] = field(default_factory=list)
    symbols: list[Symbol] = field(default_factory=list)
    relocs: dict[str, list[Reloc]] = field(default_factory=dict)  # target section name -> relocs
    header: dict[str, int] = field(default_factory=dict)  # overrides: e_type, e_machine, e_shstrndx, ...
    ident: bytes = b"\x7fELF\x02\x01\x01\x00" + bytes(8)
    rel_type: int = SHT_REL

    def add_reloc(self, section: str, reloc: Reloc) -> None:
        self.relocs.setdefault(section, []).append(reloc)

    def build(self) -> bytes:
        """Serialise: header, section contents, section header table last."""
        return _Writer(self).write()


class _Writer:
    """One serialisation of an ElfBuilder."""

    def __init__(self, b: ElfBuilder) -> None:
        self.b = b
        self.names = [s.name for s in b.sections]
        self.sec_index: dict[str, int] = {}
        for i, name in enumerate(self.names):
            self.sec_index.setdefault(name, i + 1)  # by name: the first section of that name

    def write(self) -> bytes:
        symtab, strtab, locals_ = self._symtab()
        rels = [self._rel_section(name, rl) for name, rl in self.b.relocs.items()]
        n_base = len(self.b.sections)
        sym_idx = n_base + len(rels) + 1
        for rel in rels:
            rel.link = sym_idx
        tables = [
            Section(".symtab", SHT_SYMTAB, 0, symtab, 8, link=sym_idx + 1, info=locals_, entsize=24),
            Section(".strtab", SHT_STRTAB, 0, strtab, 1),
        ]
        every = [*self.b.sections, *rels, *tables]
        shstr, name_offs = _strtab([s.name for s in every] + [".shstrtab"])
        every.append(Section(".shstrtab", SHT_STRTAB, 0, shstr, 1))
        return self._serialise(every, name_offs)

    def _rel_section(self, target: str, relocs: list[Reloc]) -> Section:
        entry = 24 if self.b.rel_type == SHT_RELA else 16
        body = b"".join(self._rel_entry(r) for r in relocs)
        info = self.sec_index.get(target, 0)
        prefix = ".rela" if self.b.rel_type == SHT_RELA else ".rel"
        return Section(prefix + target, self.b.rel_type, 0, body, 8, info=info, entsize=entry)

    def _rel_entry(self, r: Reloc) -> bytes:
        sym = r.symbol if isinstance(r.symbol, int) else self.sym_index[r.symbol]
        out = struct.pack("<QQ", r.offset, (sym << 32) | r.type)
        return out + (bytes(8) if self.b.rel_type == SHT_RELA else b"")

    def _symtab(self) -> tuple[bytes, bytes, int]:
        syms = [s for s in self.b.symbols if s.bind == STB_LOCAL]
        syms += [s for s in self.b.symbols if s.bind != STB_LOCAL]
        known = {s.name for s in syms}
        for rl in self.b.relocs.values():
            for r in rl:
                if isinstance(r.symbol, str) and r.symbol not in known and r.symbol not in self.sec_index:
                    syms.append(Symbol(r.symbol))
                    known.add(r.symbol)
        strtab, offs = _strtab([s.name for s in syms])
        self.sym_index: dict[str, int] = {}
        for name, idx in self.sec_index.items():
            self.sym_index[name] = idx  # section symbols come first: index == section index
        out = bytearray(bytes(24))
        for i in range(len(self.names)):
            out += struct.pack("<IBBHQQ", 0, STT_SECTION, 0, i + 1, 0, 0)
        base = len(self.names) + 1
        for i, s in enumerate(syms):
            self.sym_index.setdefault(s.name, base + i)
            out += struct.pack("<IBBHQQ", offs[s.name], (s.bind << 4) | s.type, 0, self._shndx(s),
                               s.value, s.size)
        locals_ = base + sum(1 for s in syms if s.bind == STB_LOCAL)
        return bytes(out), strtab, locals_

    def _shndx(self, s: Symbol) -> int:
        if s.section is None:
            return 0
        if isinstance(s.section, int):
            return s.section
        return self.sec_index[s.section]

    def _serialise(self, every: list[Section], name_offs: dict[str, int]) -> bytes:
        body = bytearray(64)
        placed: list[tuple[Section, int, int]] = []
        for s in every:
            while len(body) % max(1, s.align):
                body.append(0)
            off = len(body)
            if s.type != SHT_NOBITS:
                body += s.data
            placed.append((s, off, s.size if s.size is not None else len(s.data)))
        while len(body) % 8:
            body.append(0)
        shoff = len(body)
        body += bytes(64)
        for s, off, size in placed:
            body += struct.pack("<IIQQQQIIQQ", name_offs[s.name], s.type, s.flags, 0, off, size,
                                s.link, s.info, s.align, s.entsize)
        hdr = {"e_type": 1, "e_machine": 247, "e_version": 1, "e_entry": 0, "e_phoff": 0,
               "e_shoff": shoff, "e_flags": 0, "e_ehsize": 64, "e_phentsize": 0, "e_phnum": 0,
               "e_shentsize": 64, "e_shnum": len(every) + 1, "e_shstrndx": len(every)}
        hdr.update(self.b.header)
        body[0:16] = self.b.ident[:16].ljust(16, b"\0")
        body[16:64] = _EHDR.pack(*(hdr[k] for k in _EHDR_FIELDS))
        return bytes(body)


_EHDR_FIELDS = ("e_type", "e_machine", "e_version", "e_entry", "e_phoff", "e_shoff", "e_flags",
                "e_ehsize", "e_phentsize", "e_phnum", "e_shentsize", "e_shnum", "e_shstrndx")
_EHDR = struct.Struct("<HHIQQQIHHHHHH")
_SHDR_FIELDS = ("sh_name", "sh_type", "sh_flags", "sh_addr", "sh_offset", "sh_size", "sh_link",
                "sh_info", "sh_addralign", "sh_entsize")
_SHDR = struct.Struct("<IIQQQQIIQQ")


def _strtab(names: Sequence[str]) -> tuple[bytes, dict[str, int]]:
    out = bytearray(b"\0")
    offs: dict[str, int] = {"": 0}
    for name in names:
        if name not in offs:
            offs[name] = len(out)
            out += name.encode() + b"\0"
    return bytes(out), offs


class Contents(TypedDict, total=False):
    """What an object holds besides its functions (``builder``/``elf`` keywords); absent means empty."""

    rodata: bytes
    data: bytes
    bss: int
    extra_sections: Sequence[Section]
    extra_symbols: Sequence[Symbol]
    extra_relocs: Sequence[tuple[str, Reloc]]


def builder(
    functions: Sequence[Func],
    *,
    rodata: bytes = b"",
    data: bytes = b"",
    bss: int = 0,
    extra_sections: Sequence[Section] = (),
    extra_symbols: Sequence[Symbol] = (),
    extra_relocs: Sequence[tuple[str, Reloc]] = (),
) -> ElfBuilder:
    """An editable description of the object ``elf()`` would write."""
    b = ElfBuilder()
    placed = _place_functions(functions)
    for name, (code, funcs, relocs) in placed.items():
        flags = SHF_ALLOC | SHF_EXECINSTR
        b.sections.append(Section(name, SHT_PROGBITS, flags, code, 8))
        for fname, off, size in funcs:
            b.symbols.append(Symbol(fname, off, size, STT_FUNC, STB_GLOBAL, name))
        for r in relocs:
            b.add_reloc(name, r)
    if rodata:
        b.sections.append(Section(".rodata", SHT_PROGBITS, SHF_ALLOC, rodata, 8))
    if data:
        b.sections.append(Section(".data", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, data, 8))
    if bss:
        b.sections.append(Section(".bss", SHT_NOBITS, SHF_ALLOC | SHF_WRITE, b"", 8, size=bss))
    b.sections.extend(extra_sections)
    b.symbols.extend(extra_symbols)
    for section, r in extra_relocs:
        b.add_reloc(section, r)
    return b


def elf(functions: Sequence[Func], **contents: Unpack[Contents]) -> bytes:
    """An ET_REL EM_BPF object: the entry is the Func with ``section="spinfoam.main"``, else the first;
    other Funcs default to ``.text``; relocations become ``.rel<section>``."""
    return builder(functions, **contents).build()


def _place_functions(
    functions: Sequence[Func],
) -> dict[str, tuple[bytes, list[tuple[str, int, int]], list[Reloc]]]:
    explicit_entry = any(f.section == ENTRY_SECTION for f in functions)
    out: dict[str, tuple[bytearray, list[tuple[str, int, int]], list[Reloc]]] = {}
    for i, f in enumerate(functions):
        section = f.section or (ENTRY_SECTION if i == 0 and not explicit_entry else ".text")
        code, relocs = assemble(f.code) if isinstance(f.code, str) else (f.code, list(f.relocs))
        buf, funcs, rl = out.setdefault(section, (bytearray(), [], []))
        base = len(buf)
        buf += code
        funcs.append((f.name, base, len(code)))
        rl.extend(Reloc(r.offset + base, r.type, r.symbol) for r in relocs)
    ordered = sorted(out.items(), key=lambda kv: kv[0] != ENTRY_SECTION)
    return {name: (bytes(buf), funcs, rl) for name, (buf, funcs, rl) in ordered}


def patch_ehdr(data: bytes, **fields: int) -> bytes:
    """Return ``data`` with ELF header fields (``e_shnum=...``) replaced."""
    values = dict(zip(_EHDR_FIELDS, _EHDR.unpack_from(data, 16)))
    values.update(fields)
    out = bytearray(data)
    out[16:64] = _EHDR.pack(*(values[k] for k in _EHDR_FIELDS))
    return bytes(out)


def patch_shdr(data: bytes, index_or_name: int | str, **fields: int) -> bytes:
    """Return ``data`` with fields of one section header (by index or name) replaced."""
    ehdr = dict(zip(_EHDR_FIELDS, _EHDR.unpack_from(data, 16)))
    index = index_or_name if isinstance(index_or_name, int) else _find_section(data, ehdr, index_or_name)
    at = ehdr["e_shoff"] + index * 64
    values = dict(zip(_SHDR_FIELDS, _SHDR.unpack_from(data, at)))
    values.update(fields)
    out = bytearray(data)
    out[at:at + 64] = _SHDR.pack(*(values[k] for k in _SHDR_FIELDS))
    return bytes(out)


def _find_section(data: bytes, ehdr: dict[str, int], name: str) -> int:
    shoff, shnum = ehdr["e_shoff"], ehdr["e_shnum"]
    strtab = dict(zip(_SHDR_FIELDS, _SHDR.unpack_from(data, shoff + ehdr["e_shstrndx"] * 64)))
    for i in range(shnum):
        sh_name = _SHDR.unpack_from(data, shoff + i * 64)[0]
        start = strtab["sh_offset"] + sh_name
        if data[start:data.index(b"\0", start)].decode() == name:
            return i
    raise AsmError(f"no section {name!r}")
