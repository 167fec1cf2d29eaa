"""Line tables for faults (issue 18): the bundle line behind each instruction of a built ELF.

The build compiles ``out/main.i`` a second time with ``-g -gdwarf-4`` (``out/lines.o``, never returned); the ELF
it returns is the plain one, so its SHA-256 never changes. The debug object's code sections and code relocations
must equal the returned ELF's, else no table is kept. Its DWARF 4 ``.debug_line`` gives the innermost file:line
of each instruction and ``.debug_info`` the inlined SDK wrappers with their call sites, so an instruction inside
``wf_json_get_str`` is shown at the bundle line that called it: ``main.c:42`` ``(in wf_json_get_str)``.

Anything unexpected in the debug object means "no table" (``None``), never an error: the build stands.
"""

from __future__ import annotations

import bisect
import posixpath
import struct
from dataclasses import dataclass
from typing import Any

from wakeful.errors import InvalidObject, WakefulError
from wakeful.vm import elf

TABLE_FORMAT = 1
MAX_DEBUG_OBJECT_BYTES = 4 << 20
SHT_REL = 9
STT_FUNC = 2
R_BPF_64_ABS64 = 2
MAX_NAME = 200
# DWARF 4 tags, attributes and forms used here
TAG_INLINED, TAG_SUBPROGRAM = 0x1D, 0x2E
AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES = 0x03, 0x11, 0x12, 0x55
AT_ORIGIN, AT_SPEC, AT_CALL_FILE, AT_CALL_LINE = 0x31, 0x47, 0x58, 0x59
FIXED_FORMS = {0x01: 8, 0x05: 2, 0x06: 4, 0x07: 8, 0x0B: 1, 0x0C: 1, 0x0E: 4, 0x10: 4, 0x11: 1, 0x12: 2,
               0x13: 4, 0x14: 8, 0x17: 4, 0x19: 0, 0x20: 8}
REF_FORMS = {0x11, 0x12, 0x13, 0x14, 0x15}


@dataclass(frozen=True)
class Row:
    """Instructions ``[start, end)`` (byte offsets) of code section ``section`` come from ``file:line``;
    ``function`` is the SDK function they sit inside, called from that line ("" when none)."""

    section: str
    start: int
    end: int
    file: str
    line: int
    function: str = ""

    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class LineTable:
    """Rows sorted by (section, start), bound to the ELF they describe by its SHA-256; ``functions`` places each
    function symbol (name, section, byte offset) so a fault's (function, pc) can be looked up."""

    elf_sha256: str
    rows: tuple[Row, ...]
    functions: tuple[tuple[str, str, int], ...] = ()

    def at_fault(self, function: str | None, pc: int | None) -> Row | None:
        """The row of instruction ``pc`` (vm.md §8: the slot index within ``function``)."""
        for name, section, start in self.functions:
            if name == function and pc is not None and pc >= 0:
                return self.lookup(section, start + pc * 8)
        return None

    def lookup(self, section: str, offset: int) -> Row | None:
        keys = [(row.section, row.start) for row in self.rows]
        at = bisect.bisect_right(keys, (section, offset)) - 1
        if at >= 0 and self.rows[at].section == section and self.rows[at].start <= offset < self.rows[at].end:
            return self.rows[at]
        return None

    def fault_text(self, message: str, function: str | None, pc: int | None) -> str:
        """``main.c:42: <message> (in wf_json_get_str)``, or the message unchanged when no row covers it."""
        row = self.at_fault(function, pc)
        if row is None:
            return message
        return f"{row.where()}: {message}" + (f" (in {row.function})" if row.function else "")

    def to_json(self) -> dict[str, Any]:
        return {"format": TABLE_FORMAT, "elf_sha256": self.elf_sha256,
                "rows": [[r.section, r.start, r.end, r.file, r.line, r.function] for r in self.rows],
                "functions": [list(f) for f in self.functions]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> LineTable | None:
        if data.get("format") != TABLE_FORMAT:
            return None
        rows = tuple(Row(str(s), int(a), int(b), str(f), int(n), str(fn)) for s, a, b, f, n, fn in data["rows"])
        functions = tuple((str(n), str(s), int(o)) for n, s, o in data.get("functions", []))
        return LineTable(str(data["elf_sha256"]), rows, functions)


class _Bad(WakefulError):
    """The debug object is not what this reader understands."""


def build_line_table(debug_object: bytes, plain: bytes, elf_sha256: str) -> LineTable | None:
    """The table for ``plain`` from its ``-g`` twin, or ``None`` when the twin's code differs or cannot be read."""
    try:
        dbg = elf.parse(debug_object, max_elf_bytes=MAX_DEBUG_OBJECT_BYTES)
        ref = elf.parse(plain, max_elf_bytes=MAX_DEBUG_OBJECT_BYTES)
        if _code(dbg) != _code(ref):
            return None
        return LineTable(elf_sha256, tuple(_rows(_Dwarf(dbg))), _functions(ref))
    except (_Bad, InvalidObject, IndexError, KeyError, ValueError, struct.error, UnicodeDecodeError):
        return None


def _code(obj: elf.ElfObject) -> dict[str, tuple[bytes, list[tuple[int, str, int]]]]:
    """Code section name → (bytes, relocations as (offset, symbol or section name, type))."""
    out = {}
    for sec in obj.of_kind("code"):
        rels = [(r.offset, obj.sym_name(r.sym) or obj.sections[obj.symbols[r.sym].shndx].name, r.type)
                for r in obj.rels.get(sec.num, [])]
        out[sec.name] = (obj.content(sec), sorted(rels))
    return out


def _functions(obj: elf.ElfObject) -> tuple[tuple[str, str, int], ...]:
    code = {sec.num: sec.name for sec in obj.of_kind("code")}
    return tuple(sorted((obj.sym_name(sym.num), code[sym.shndx], sym.value) for sym in obj.symbols
                        if sym.type == STT_FUNC and sym.shndx in code))


class _Reader:
    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data, self.pos, self.end = data, pos, len(data) if end is None else min(end, len(data))

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise _Bad("read past the end")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def uleb(self) -> int:
        value, _, _ = self._leb()
        return value

    def sleb(self) -> int:
        value, shift, last = self._leb()
        return value - (1 << shift) if last & 0x40 else value

    def _leb(self) -> tuple[int, int, int]:
        """(value, bits read, last byte) of one LEB128 number of at most 64 bits."""
        value = shift = 0
        while True:
            byte = self.uint(1)
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, shift, byte
            if shift > 63:
                raise _Bad("LEB128 too long")

    def cstring(self) -> str:
        stop = self.data.find(b"\0", self.pos, self.end)
        if stop < 0:
            raise _Bad("unterminated string")
        out = self.data[self.pos:stop].decode("utf-8", "replace")
        self.pos = stop + 1
        return out


class _Dwarf:
    """The DWARF 4 sections of the debug object, with each one's relocations (offset → code section name)."""

    def __init__(self, obj: elf.ElfObject) -> None:
        self.obj = obj
        self.by_name = {sec.name: sec for sec in obj.sections}
        self.code_names = {sec.num: sec.name for sec in obj.of_kind("code")}

    def section(self, name: str) -> bytes:
        sec = self.by_name.get(name)
        return self.obj.content(sec) if sec is not None and sec.type != 8 else b""

    def relocations(self, name: str) -> dict[int, str]:
        """In a REL object an address field holds the offset; its relocation names the code section."""
        target = self.by_name.get(name)
        out: dict[int, str] = {}
        for sec in self.obj.sections:
            if target is None or sec.type != SHT_REL or sec.info != target.num or sec.entsize != 16:
                continue
            for at in range(0, sec.size - sec.size % 16, 16):
                offset, info = struct.unpack_from("<QQ", self.obj.data, sec.offset + at)
                sym = self.obj.symbols[info >> 32]
                if info & 0xFFFFFFFF == R_BPF_64_ABS64 and sym.shndx in self.code_names:
                    out[offset] = self.code_names[sym.shndx]
                    if sym.value:
                        raise _Bad("relocation against a symbol inside a section")
        return out


# issue 18: each instruction → the bundle line behind it (outermost bundle call site of inlined SDK code)
def _rows(dw: _Dwarf) -> list[Row]:
    lines, files = _line_program(dw)
    inlines = _inlines(dw, files)
    out: list[Row] = []
    for (section, start, end), (file, line) in sorted(lines.items()):
        for offset in range(start - start % 8, end, 8):
            shown, number, function = _resolve(file, line, inlines.get(section, []), offset)
            last = out[-1] if out else None
            if last and (last.section, last.end, last.file, last.line, last.function) == (
                    section, offset, shown, number, function):
                out[-1] = Row(section, last.start, offset + 8, shown, number, function)
            elif not last or last.section != section or last.end <= offset:
                out.append(Row(section, offset, offset + 8, shown, number, function))
    return out


def _resolve(file: str, line: int, inlines: list[tuple[int, int, int, str, str, int]],
             offset: int) -> tuple[str, int, str]:
    if not _is_sdk(file):
        return file, line, ""
    chain = sorted((inl for inl in inlines if inl[1] <= offset < inl[2]), key=lambda inl: -inl[0])
    for _, _, _, callee, call_file, call_line in chain:  # innermost first
        if not _is_sdk(call_file):
            return call_file, call_line, callee
    return file, line, ""


def _is_sdk(file: str) -> bool:
    return file.startswith("<sdk>/")


def shown_name(directory: str, name: str) -> str:
    """A debug-info path as diagnostics show it: bundle-relative, ``<sdk>/x.h`` or ``<host>/basename``."""
    path = name if name.startswith("/") or not directory else posixpath.join(directory, name)
    path = posixpath.normpath(path)[:MAX_NAME]
    if path.startswith("src/"):
        return path[4:]
    if path.startswith("sdk/") and "/" not in path[4:]:
        return "<sdk>/" + path[4:]
    return "<host>/" + posixpath.basename(path)


def _line_program(dw: _Dwarf) -> tuple[dict[tuple[str, int, int], tuple[str, int]], list[str]]:
    """DWARF 4 §6.2 for the one unit clang writes: (section, start, end) → (file, line), and the file names."""
    data = dw.section(".debug_line")
    relocs = dw.relocations(".debug_line")
    r = _Reader(data)
    length = r.uint(4)
    end = r.pos + length
    if length >= 0xFFFFFFF0 or r.uint(2) not in (2, 3, 4):
        raise _Bad("line table version")
    header_end = r.uint(4) + r.pos
    min_inst, _, _, line_base, line_range, opcode_base = struct.unpack("<BBBbBB", r.take(6))
    lengths = list(r.take(opcode_base - 1))
    dirs = [""]
    while (d := r.cstring()) != "":
        dirs.append(d)
    files = [""]
    while (f := r.cstring()) != "":
        directory = r.uleb()
        r.uleb(), r.uleb()
        files.append(shown_name(dirs[directory] if directory < len(dirs) else "", f))
    r.pos = header_end
    rows: dict[tuple[str, int, int], tuple[str, int]] = {}
    section, address, file, line, last = "", 0, 1, 1, None
    r.end = min(end, len(data))
    while r.pos < r.end:
        op = r.uint(1)
        emit = False
        if op >= opcode_base:
            adj = op - opcode_base
            address += (adj // line_range) * min_inst
            line += line_base + adj % line_range
            emit = True
        elif op == 0:
            size = r.uleb()
            sub_end = r.pos + size
            sub = r.uint(1)
            if sub == 1:  # end_sequence
                if last is not None:
                    _add(rows, last, address)
                section, address, file, line, last = "", 0, 1, 1, None
            elif sub == 2:  # set_address
                at = r.pos
                address = r.uint(8)
                section = relocs.get(at, "")
            r.pos = sub_end
        elif op == 1:
            emit = True
        elif op == 2:
            address += r.uleb() * min_inst
        elif op == 3:
            line += r.sleb()
        elif op == 4:
            file = r.uleb()
        elif op == 8:
            address += ((255 - opcode_base) // line_range) * min_inst
        elif op == 9:
            address += r.uint(2)
        else:
            for _ in range(lengths[op - 1]):
                r.uleb()
        if emit:
            if last is not None:
                _add(rows, last, address)
            last = (section, address, files[file] if 0 < file < len(files) else "", line)
    return rows, files


def _add(rows: dict[tuple[str, int, int], tuple[str, int]], last: tuple[str, int, str, int], end: int) -> None:
    section, start, file, line = last
    if section and end > start and file and line > 0:  # line 0: code the compiler made, no source line
        rows[(section, start, end)] = (file, line)


def _inlines(dw: _Dwarf, files: list[str]) -> dict[str, list[tuple[int, int, int, str, str, int]]]:
    """Code section → inlined calls as (depth, start, end, callee, call file, call line)."""
    info, abbrev, strings = dw.section(".debug_info"), dw.section(".debug_abbrev"), dw.section(".debug_str")
    info_relocs, range_relocs = dw.relocations(".debug_info"), dw.relocations(".debug_ranges")
    r = _Reader(info)
    length = r.uint(4)
    unit_end = r.pos + length
    if length >= 0xFFFFFFF0 or r.uint(2) not in (2, 3, 4):
        raise _Bad("debug_info version")
    table = _abbrevs(abbrev, r.uint(4))
    if r.uint(1) != 8:
        raise _Bad("address size")
    r.end = min(unit_end, len(info))
    names: dict[int, tuple[str, int]] = {}  # DIE offset → (name, origin/specification offset)
    calls: list[tuple[int, dict[int, Any]]] = []
    depth = 0
    base: tuple[str, int] = ("", 0)
    while r.pos < r.end:
        here = r.pos
        code = r.uleb()
        if code == 0:
            depth -= 1
            continue
        tag, children, specs = table[code]
        attrs = {attr: _value(r, form, strings, info_relocs) for attr, form in specs}
        if depth == 0 and isinstance(attrs.get(AT_LOW_PC), tuple):
            base = attrs[AT_LOW_PC]
        if tag in (TAG_SUBPROGRAM, TAG_INLINED):
            origin = attrs.get(AT_ORIGIN, attrs.get(AT_SPEC, -1))
            names[here] = (str(attrs.get(AT_NAME, "")), origin if isinstance(origin, int) else -1)
        if tag == TAG_INLINED:
            calls.append((depth, attrs))
        depth += 1 if children else 0
    out: dict[str, list[tuple[int, int, int, str, str, int]]] = {}
    for depth, attrs in calls:
        callee = _name(names, attrs.get(AT_ORIGIN, -1))
        index = attrs.get(AT_CALL_FILE, 0)
        call_file = files[index] if isinstance(index, int) and 0 < index < len(files) else ""
        for section, start, end in _ranges(attrs, base, dw.section(".debug_ranges"), range_relocs):
            out.setdefault(section, []).append((depth, start, end, callee, call_file, int(attrs.get(AT_CALL_LINE, 0))))
    return out


def _name(names: dict[int, tuple[str, int]], offset: Any) -> str:
    for _ in range(8):  # origin → specification chains are short
        if not isinstance(offset, int) or offset not in names:
            return ""
        name, offset = names[offset]
        if name:
            return name[:MAX_NAME]
    return ""


def _ranges(attrs: dict[int, Any], base: tuple[str, int], data: bytes,
            relocs: dict[int, str]) -> list[tuple[str, int, int]]:
    low, high = attrs.get(AT_LOW_PC), attrs.get(AT_HIGH_PC)
    if isinstance(low, tuple) and low[0]:
        end = high[1] if isinstance(high, tuple) else low[1] + int(high or 0)
        return [(low[0], low[1], end)]
    if not isinstance(attrs.get(AT_RANGES), int):
        return []
    r, section, start_base = _Reader(data, attrs[AT_RANGES]), base[0], base[1]
    out: list[tuple[str, int, int]] = []
    for _ in range(4096):
        at = r.pos
        start, end = r.uint(8), r.uint(8)
        if start == 0 and end == 0 and at not in relocs:
            return out
        if start == (1 << 64) - 1:
            section, start_base = relocs.get(at + 8, ""), end
            continue
        where = relocs.get(at, section)
        offset = 0 if at in relocs else start_base
        if where:
            out.append((where, start + offset, end + offset))
    return out


def _abbrevs(data: bytes, offset: int) -> dict[int, tuple[int, bool, list[tuple[int, int]]]]:
    r = _Reader(data, offset)
    table: dict[int, tuple[int, bool, list[tuple[int, int]]]] = {}
    while (code := r.uleb()) != 0:
        tag, children = r.uleb(), r.uint(1) == 1
        specs: list[tuple[int, int]] = []
        while True:
            attr, form = r.uleb(), r.uleb()
            if attr == 0 and form == 0:
                break
            specs.append((attr, form))
        table[code] = (tag, children, specs)
    return table


def _value(r: _Reader, form: int, strings: bytes, relocs: dict[int, str]) -> Any:
    if form == 0x16:  # indirect
        form = r.uleb()
    if form == 0x01:  # addr: (code section from its relocation, offset)
        at = r.pos
        return (relocs.get(at, ""), r.uint(8))
    if form == 0x0E:  # strp
        return _Reader(strings, r.uint(4)).cstring()
    if form == 0x08:
        return r.cstring()
    if form in REF_FORMS:
        return r.uleb() if form == 0x15 else r.uint(FIXED_FORMS[form])  # one unit, at offset 0
    if form in FIXED_FORMS:
        return r.uint(FIXED_FORMS[form]) if FIXED_FORMS[form] else True
    if form == 0x0F:
        return r.uleb()
    if form == 0x0D:
        return r.sleb()
    sizes = {0x0A: 1, 0x03: 2, 0x04: 4}
    if form in sizes:
        return r.take(r.uint(sizes[form]))
    if form in (0x09, 0x18):  # block, exprloc
        return r.take(r.uleb())
    raise _Bad(f"form {form:#x}")
