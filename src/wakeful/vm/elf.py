"""Own ``struct`` parser for eBPF ET_REL objects: the accepted ELF shape of vm.md §2 (pipeline steps 1-2).

Reads straight from the bytes and never raises anything but ``InvalidObject``, whatever the input.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from wakeful.errors import InvalidObject

__all__ = ["ElfObject", "MissingEntry", "Rel", "Sec", "Sym", "parse"]

ENTRY_SECTION = "spinfoam.main"
JUMP_TABLE_HINT = "jump tables (.jumptables/gotox) are not supported; rebuild with -fno-jump-tables"

SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 0, 1, 2, 3, 4, 8, 9
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE = 1, 2, 3, 4
SHN_UNDEF, SHN_LORESERVE, SHN_ABS, SHN_COMMON, SHN_XINDEX = 0, 0xFF00, 0xFFF1, 0xFFF2, 0xFFFF

MAX_SECTIONS = 128
MAX_SYMBOLS = 4096
MAX_NAME = 256
MAX_CODE_SECTIONS = 64
MAX_DATA_SECTIONS = 64
MAX_ALIGN = 4096

# section kinds
CODE, RODATA, DATA, BSS, IGNORED, REL, SYMTAB, STRTAB = "code", "rodata", "data", "bss", "ignored", "rel", "symtab", "strtab"

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_REL = struct.Struct("<QQ")
_IDENT = b"\x7fELF\x02\x01\x01"


class Sec(NamedTuple):
    """One section header (``kind`` is the §2 classification)."""

    num: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int
    kind: str


class Sym(NamedTuple):
    """One symbol table entry; ``name`` is decoded lazily via ``ElfObject.sym_name``."""

    num: int
    name_off: int
    type: int
    bind: int
    shndx: int
    value: int
    size: int


class Rel(NamedTuple):
    """One REL entry of an accepted relocation section."""

    offset: int
    sym: int
    type: int


@dataclass(eq=False)
class ElfObject:
    """A parsed object: every section, the symbol table, and relocations by target section index."""

    data: bytes
    sections: list[Sec]
    symbols: list[Sym] = field(default_factory=list)
    symtab: Sec | None = None
    strtab: Sec | None = None
    rels: dict[int, list[Rel]] = field(default_factory=dict)
    rel_sections: list[Sec] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def content(self, sec: Sec) -> bytes:
        """The bytes of a PROGBITS-like section (bounds checked at parse time)."""
        return self.data[sec.offset:sec.offset + sec.size]

    def sym_name(self, index: int) -> str:
        """Name of symbol ``index`` (validated at parse time)."""
        name_off = self.symbols[index].name_off
        if not name_off or self.strtab is None:
            return ""
        start = self.strtab.offset + name_off
        return self.data[start:self.data.index(b"\0", start)].decode()

    def of_kind(self, *kinds: str) -> list[Sec]:
        return [s for s in self.sections if s.kind in kinds]


def parse(data: bytes, *, max_elf_bytes: int = 65536) -> ElfObject:
    """vm.md §2: check the size, then the header, section table, symbols and relocation sections."""
    # §2 size: reject above max_elf_bytes before parsing
    if len(data) > max_elf_bytes:
        raise InvalidObject("ELF_SIZE", f"object is {len(data)} bytes, more than the limit of {max_elf_bytes}")
    shoff, shnum, shstrndx = _header(data)
    headers = _section_headers(data, shoff, shnum, shstrndx)
    names = _section_names(data, headers, shstrndx)
    obj = ElfObject(data, _classify(data, headers, names))
    _check_counts(obj)
    _symbols(obj)
    _relocation_sections(obj)
    _entry(obj)
    _check_spans(obj, shoff, shnum)
    return obj


# §2 ident + header
def _header(data: bytes) -> tuple[int, int, int]:
    if len(data) < 64:
        raise InvalidObject("ELF_HEADER", f"object is {len(data)} bytes, shorter than an ELF header")
    ident, e_type, machine, version, _entry, _phoff, shoff, _flags, ehsize, _phes, _phnum, shentsize, \
        shnum, shstrndx = _EHDR.unpack_from(data)
    if ident[:7] != _IDENT or ident[7] != 0:
        raise InvalidObject("ELF_HEADER", "not a 64-bit little-endian ELF (magic, class, data, version, OSABI 0)")
    if (e_type, machine, version, ehsize, shentsize) != (1, 247, 1, 64, 64):
        raise InvalidObject(
            "ELF_HEADER",
            f"need ET_REL EM_BPF version 1 with 64-byte headers (e_type={e_type} e_machine={machine} "
            f"e_version={version} e_ehsize={ehsize} e_shentsize={shentsize})",
        )
    return shoff, shnum, shstrndx


# §2 section table: inside the file, 1..128 entries, no extended numbering, valid e_shstrndx
def _section_headers(data: bytes, shoff: int, shnum: int, shstrndx: int) -> list[tuple[int, ...]]:
    if not 1 <= shnum <= MAX_SECTIONS:
        raise InvalidObject("ELF_SECTIONS", f"{shnum} section headers; 1..{MAX_SECTIONS} allowed")
    if shoff + shnum * 64 > len(data) or shoff < 64:
        raise InvalidObject("ELF_SECTIONS", f"section table at {shoff} ({shnum} entries) outside the file")
    if shstrndx == SHN_XINDEX or not 0 < shstrndx < shnum:
        raise InvalidObject("ELF_SECTIONS", f"e_shstrndx {shstrndx} is not a section")
    headers = list(_SHDR.iter_unpack(data[shoff:shoff + shnum * 64]))
    if any(headers[0]):
        raise InvalidObject("ELF_SECTIONS", "section 0 is not null (extended numbering is not supported)")
    if headers[shstrndx][1] != SHT_STRTAB:
        raise InvalidObject("ELF_SECTIONS", f"e_shstrndx {shstrndx} is not a string table")
    return headers


def _section_names(data: bytes, headers: list[tuple[int, ...]], shstrndx: int) -> list[str]:
    table = _string_table(data, headers[shstrndx], "section name table")
    return [""] + [_name(data, table, h[0], "section") for h in headers[1:]]


def _string_table(data: bytes, header: tuple[int, ...], what: str) -> tuple[int, int]:
    offset, size = header[4], header[5]
    if offset + size > len(data):
        raise InvalidObject("ELF_STRTAB", f"{what} at {offset} (+{size}) outside the file")
    return offset, size


# vm.md §9 S11 (decisions-vm-front.md): section and symbol names are plain ASCII names; a source-file
# symbol (STT_FILE, a file's base name) may hold any printable text
PLAIN_NAME = re.compile(rb"[A-Za-z0-9_.$-]*")
PLAIN_NAME_CHARS = "ASCII letters, digits and _ . $ -"


# §2 strings: NUL-terminated inside their string table, <= 256 bytes
def _name(data: bytes, table: tuple[int, int], off: int, what: str, *, file: bool = False) -> str:
    start, size = table
    if off >= size:
        raise InvalidObject("ELF_STRTAB", f"{what} name offset {off} outside its string table")
    end = data.find(b"\0", start + off, start + size)
    if end < 0 or end - start - off > MAX_NAME:
        raise InvalidObject("ELF_STRTAB", f"{what} name at {off} is not NUL-terminated within {MAX_NAME} bytes")
    if not file and PLAIN_NAME.fullmatch(data, start + off, end) is None:
        raise InvalidObject("ELF_STRTAB", f"{what} name at {off} has characters other than {PLAIN_NAME_CHARS}")
    try:
        name = data[start + off:end].decode()
    except UnicodeDecodeError:
        raise InvalidObject("ELF_STRTAB", f"{what} name at {off} is not UTF-8") from None
    if file and not name.isprintable():
        raise InvalidObject("ELF_STRTAB", f"{what} name at {off} has control or format characters")
    return name


def _classify(data: bytes, headers: list[tuple[int, ...]], names: list[str]) -> list[Sec]:
    out = [Sec(0, "", 0, 0, 0, 0, 0, 0, 1, 0, IGNORED)]
    for i in range(1, len(headers)):
        sh_name, typ, flags, _addr, offset, size, link, info, align, entsize = headers[i]
        kind = _kind(names[i], typ, flags, size)
        sec = Sec(i, names[i], typ, flags, offset, size, link, info, max(align, 1), entsize, kind)
        if kind in (CODE, RODATA, DATA) and offset + size > len(data):
            raise InvalidObject("ELF_SECTION", f"section {sec.name} at {offset} (+{size}) outside the file")
        out.append(sec)
    return out


# §2 section table rows: code, rodata, data, bss, jump tables, ignored, refused
def _kind(name: str, typ: int, flags: int, size: int) -> str:
    if name == ".jumptables":
        raise InvalidObject("JUMP_TABLE", f"section {name}: {JUMP_TABLE_HINT}")
    if typ == SHT_RELA:
        raise InvalidObject("ELF_SECTION", f"section {name}: RELA relocations are not supported (REL only)")
    if typ in (SHT_SYMTAB, SHT_STRTAB, SHT_REL):
        return {SHT_SYMTAB: SYMTAB, SHT_STRTAB: STRTAB, SHT_REL: REL}[typ]
    if not flags & SHF_ALLOC or name == ".eh_frame":
        return IGNORED
    if flags & SHF_EXECINSTR:
        return _code_kind(name, typ, flags, size)
    if typ == SHT_PROGBITS:
        return DATA if flags & SHF_WRITE else RODATA
    if typ == SHT_NOBITS and flags & SHF_WRITE:
        return BSS
    raise InvalidObject("ELF_SECTION", f"section {name}: unsupported allocated section (type {typ}, flags {flags:#x})")


def _code_kind(name: str, typ: int, flags: int, size: int) -> str:
    if flags & SHF_WRITE:
        raise InvalidObject("ELF_SECTION", f"section {name} is both executable and writable")
    if typ != SHT_PROGBITS:
        raise InvalidObject("ELF_SECTION", f"code section {name} is not PROGBITS (type {typ})")
    if size % 8:
        raise InvalidObject("ELF_SECTION", f"code section {name} size {size} is not a multiple of 8")
    return CODE if size else IGNORED


# §2 code section count and data limits (count, alignment)
def _check_counts(obj: ElfObject) -> None:
    if len(obj.of_kind(CODE)) > MAX_CODE_SECTIONS:
        raise InvalidObject("ELF_SECTION", f"more than {MAX_CODE_SECTIONS} code sections")
    data = obj.of_kind(RODATA, DATA, BSS)
    if len(data) > MAX_DATA_SECTIONS:
        raise InvalidObject("ELF_IMAGE", f"more than {MAX_DATA_SECTIONS} data sections")
    for sec in data:
        if sec.align > MAX_ALIGN or sec.align & (sec.align - 1):
            raise InvalidObject("ELF_IMAGE", f"section {sec.name} alignment {sec.align} (power of two <= {MAX_ALIGN})")


# §2 symbol table: exactly one SYMTAB, entsize 24, linked to a STRTAB, <= 4096 symbols, inside sections
def _symbols(obj: ElfObject) -> None:
    tables = obj.of_kind(SYMTAB)
    if len(tables) != 1:
        raise InvalidObject("ELF_SYMTAB", f"{len(tables)} symbol tables; exactly one is required")
    symtab = tables[0]
    if symtab.entsize != 24 or symtab.size % 24 or symtab.offset + symtab.size > len(obj.data):
        raise InvalidObject("ELF_SYMTAB", f"symbol table {symtab.name}: bad entry size or bounds")
    if symtab.size // 24 > MAX_SYMBOLS:
        raise InvalidObject("ELF_SYMTAB", f"{symtab.size // 24} symbols; at most {MAX_SYMBOLS}")
    if not 0 < symtab.link < len(obj.sections) or obj.sections[symtab.link].type != SHT_STRTAB:
        raise InvalidObject("ELF_SYMTAB", "symbol table is not linked to a string table")
    strtab = obj.sections[symtab.link]
    table = _string_table(obj.data, (0, 0, 0, 0, strtab.offset, strtab.size), "symbol name table")
    obj.symtab, obj.strtab = symtab, strtab
    raw = obj.data[symtab.offset:symtab.offset + symtab.size]
    for i, (name_off, info, _other, shndx, value, size) in enumerate(_SYM.iter_unpack(raw)):
        sym = Sym(i, name_off, info & 0xF, info >> 4, shndx, value, size)
        if name_off:
            _name(obj.data, table, name_off, "symbol", file=sym.type == STT_FILE)
        _check_symbol(obj, sym)
        obj.symbols.append(sym)


def _check_symbol(obj: ElfObject, sym: Sym) -> None:
    shndx = sym.shndx
    if shndx == SHN_XINDEX:
        raise InvalidObject("ELF_SECTIONS", f"symbol {sym.num} uses extended section numbering")
    if shndx == SHN_COMMON:
        raise InvalidObject("RELOC_SYMBOL", f"symbol {sym.num} is a common symbol (build with -fno-common)")
    if shndx in (SHN_UNDEF, SHN_ABS):
        return
    if shndx >= len(obj.sections):
        raise InvalidObject("ELF_SYMTAB", f"symbol {sym.num} refers to section {shndx}, which does not exist")
    sec = obj.sections[shndx]
    if sym.value + sym.size > sec.size:
        raise InvalidObject("ELF_SYMTAB", f"symbol {sym.num} [{sym.value}, +{sym.size}) lies outside {sec.name}")
    if sym.type == STT_FUNC and sec.kind == CODE and (sym.value % 8 or sym.value >= sec.size):
        raise InvalidObject("ELF_SYMTAB", f"function symbol {sym.num} at {sec.name}+{sym.value} is not an instruction")


# §9 S12: every section with file bytes lies inside the file, and no two such spans overlap each other, the
# ELF header or the section table -- so each byte has one meaning and the caches' keys (vm/codekey.py, the
# loader's data twins) cover each byte exactly once. NOBITS and zero-size sections have no span.
def _check_spans(obj: ElfObject, shoff: int, shnum: int) -> None:
    spans = [(0, 64, "the ELF header"), (shoff, shoff + shnum * 64, "the section table")]
    for sec in obj.sections:
        if sec.type == SHT_NOBITS or not sec.size:
            continue
        if sec.offset + sec.size > len(obj.data):
            raise InvalidObject("ELF_SECTION", f"section {sec.name} at {sec.offset} (+{sec.size}) outside the file")
        spans.append((sec.offset, sec.offset + sec.size, f"section {sec.name}"))
    spans.sort()
    for (a, b, first), (c, d, second) in zip(spans, spans[1:]):
        if c < b:  # sorted by start: any overlap shows between neighbours
            raise InvalidObject("ELF_SECTION", f"{first} [{a}, {b}) and {second} [{c}, {d}) overlap in the file")


# §3 REL sections: entry size 16, linked to the symbol table; those of ignored sections are ignored
def _relocation_sections(obj: ElfObject) -> None:
    assert obj.symtab is not None
    for sec in obj.of_kind(REL):
        if not 0 < sec.info < len(obj.sections):
            raise InvalidObject("ELF_SECTION", f"relocation section {sec.name} targets section {sec.info}")
        target = obj.sections[sec.info]
        if target.kind not in (CODE, RODATA, DATA, BSS):
            obj.ignored.append(sec.name)
            continue
        if sec.entsize != 16 or sec.size % 16 or sec.offset + sec.size > len(obj.data):
            raise InvalidObject("ELF_SECTION", f"relocation section {sec.name}: bad entry size or bounds")
        if sec.link != obj.symtab.num:
            raise InvalidObject("ELF_SECTION", f"relocation section {sec.name} is not linked to the symbol table")
        raw = obj.data[sec.offset:sec.offset + sec.size]
        entries = [Rel(off, info >> 32, info & 0xFFFFFFFF) for off, info in _REL.iter_unpack(raw)]
        obj.rels.setdefault(target.num, []).extend(entries)
        obj.rel_sections.append(sec)
    obj.ignored[:0] = [s.name for s in obj.sections[1:] if s.kind == IGNORED]


# §2 entry: exactly one non-empty code section spinfoam.main with exactly one STT_FUNC, at offset 0
class MissingEntry(InvalidObject):
    """``ELF_ENTRY`` because no section is named exactly ``spinfoam.main`` (runtime-protocol.md §6.3 maps
    this case, and only this one, to ``-32602``)."""


def _entry(obj: ElfObject) -> None:
    entries = [s for s in obj.sections if s.name == ENTRY_SECTION]
    if not entries:
        raise MissingEntry("ELF_ENTRY", f"need exactly one non-empty code section named {ENTRY_SECTION}")
    if len(entries) != 1 or entries[0].kind != CODE:
        raise InvalidObject("ELF_ENTRY", f"need exactly one non-empty code section named {ENTRY_SECTION}")
    index = entries[0].num
    funcs = [s for s in obj.symbols if s.shndx == index and s.type == STT_FUNC]
    if len(funcs) != 1 or funcs[0].value != 0:
        raise InvalidObject(
            "ELF_ENTRY", f"{ENTRY_SECTION} must hold exactly one function symbol, at offset 0 (found {len(funcs)})"
        )
