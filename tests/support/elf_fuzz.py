"""Structure-aware mutations of ELF objects for the VM fuzzers (vm.md §9 S8, S11, S12; §9.2).

Everything works on raw bytes (its own tiny section-table reader, independent of ``vm/elf.py``) so a mutation
can describe objects the loader must refuse. A :class:`Chooser` turns any byte string into a sequence of
decisions: atheris feeds it its coverage-guided inputs, hypothesis its generated binaries, the in-suite run a
fixed-seed random stream, so one set of mutators serves all three.

Name mutations plant :data:`MARKER` in every name they write, so an oracle can look for the name in generated
Python (S11) without confusing it with the translator's own identifiers; :func:`payload` is a Python statement
that creates :data:`SENTINEL` if it is ever executed.
"""

from __future__ import annotations

import os
import random
import struct
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import make_dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

MARKER = "Wq9zFuzzMark"  # never produced by the translator; every planted name contains it
SENTINEL = Path(tempfile.gettempdir()) / f"wakeful-fuzz-sentinel-{os.getpid()}"  # made only if planted code runs

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS, SHT_REL = 1, 2, 3, 8, 9
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4

# boundary values for header fields (shared with tests/integration/vm_front/test_vm_front_fuzz_elf.py)
INTERESTING = [0, 1, 2, 3, 7, 8, 9, 15, 16, 24, 63, 64, 127, 128, 255, 256, 4095, 4096, 0x7FFF, 0xFFFF,
               0xFFF1, 0xFFF2, 0xFF00, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]

_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
SHDR_FIELDS = ("name", "type", "flags", "addr", "offset", "size", "link", "info", "align", "entsize")


class Chooser:
    """Decisions read from a byte string; past its end every read is 0 (so any input is a valid recipe)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    @classmethod
    def seeded(cls, seed: int, size: int = 512) -> Chooser:
        return cls(random.Random(seed).randbytes(size))

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def below(self, n: int) -> int:
        """An int in ``[0, n)`` (n ≤ 2^32)."""
        value = 0
        for _ in range(1 if n <= 256 else 2 if n <= 65536 else 4):
            value = value << 8 | self.byte()
        return value % n if n > 0 else 0

    def pick(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def chance(self, percent: int) -> bool:
        return self.below(100) < percent

    def u64(self) -> int:
        return int.from_bytes(bytes(self.byte() for _ in range(8)), "little")


# ---------------------------------------------------------------- a raw view of the section table


def _in_file(h: Any) -> bool:
    return bool(h.type != SHT_NOBITS)


# One section header as stored: ``index``, ``at`` (its file offset) and the raw fields of SHDR_FIELDS.
Shdr = make_dataclass("Shdr", ["index", "at", *SHDR_FIELDS], namespace={"in_file": property(_in_file)})


def headers(data: bytes) -> list[Any]:
    """The section headers that lie inside ``data`` (an empty list for a broken header)."""
    if len(data) < 64:
        return []
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shnum = struct.unpack_from("<H", data, 0x3C)[0]
    out = []
    for i in range(shnum):
        at = shoff + i * 64
        if at + 64 > len(data):
            break
        out.append(Shdr(i, at, *_SHDR.unpack_from(data, at)))
    return out


def write_header(data: bytearray, h: Any) -> None:
    _SHDR.pack_into(data, h.at, *(getattr(h, f) for f in SHDR_FIELDS))


def span(h: Any) -> tuple[int, int]:
    return h.offset, h.offset + h.size


def inside(data: bytes, h: Any) -> bool:
    return h.in_file and h.size > 0 and h.offset + h.size <= len(data)


def shstrndx(data: bytes) -> int:
    return struct.unpack_from("<H", data, 0x3E)[0]


def symbols(data: bytes) -> tuple[Any, list[int]] | None:
    """(the symbol table's header, file offsets of its entries), or None."""
    hs = headers(data)
    for h in hs:
        if h.type == SHT_SYMTAB and h.entsize == 24 and inside(data, h):
            return h, list(range(h.offset, h.offset + h.size - 23, 24))
    return None


# ---------------------------------------------------------------- hostile names (S11)


def payload(indent: int, newline: str = "\n") -> str:
    """A statement that creates SENTINEL of the process that executes it (the path is computed when it
    runs, so parallel runs and replays elsewhere each see their own), on a fresh line indented ``indent``."""
    path = "__import__('tempfile').gettempdir(), 'wakeful-fuzz-sentinel-%d' % __import__('os').getpid()"
    return f"{newline}{' ' * indent}__import__('pathlib').Path({path}).touch()"


_PIECES: list[str | bytes] = [
    "\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\u2028", "\x85", "'", '"', '"""', "#", "\\", "\\n", " ", "\t",
    "(", ")", ":", ";", "=", "{", "}", "%s", "{0}", "é", "名", "\U0001f600", "\u200b", "def", "import", "+8",
    "yield", "return r0", "$", ".", "-", b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82",
]


def hostile_name(ch: Chooser) -> bytes:
    """A name holding MARKER and up to five hostile pieces: line breaks, quotes, non-ASCII, Python code,
    invalid UTF-8, and often a payload statement at one of the translator's indentations."""
    if ch.chance(35):  # a plain identifier: a fixed loader accepts it, and it must still stay out of source
        return f"{ch.pick(['main_', 'f', '_', 'g_'])}{MARKER}{ch.below(1000)}".encode()
    parts: list[bytes] = [MARKER.encode()] if ch.chance(50) else [b"main", MARKER.encode()]
    for _ in range(ch.below(6)):
        piece = ch.pick(_PIECES)
        parts.append(piece if isinstance(piece, bytes) else piece.encode())
    if ch.chance(60):
        newline = ch.pick(["\n", "\n", "\r", "\x0c\n", "\r\n"])
        indent = 12 if ch.chance(50) else 4 * ch.below(6) + (1 if ch.chance(5) else 0)  # 12: a function body
        parts.append(payload(indent, newline).encode())
        if ch.chance(30):
            parts.append(b"\n" + b" " * (4 * ch.below(6)) + b"#")
    return b"".join(parts)


def _rename(data: bytes, table: Any, field_at: int, name: bytes) -> bytes:
    """Point a 4-byte name offset at ``name``: a copy of the string table plus the new name is appended
    to the file and the table's header moved there (the old bytes stay, unreferenced)."""
    out = bytearray(data)
    old = data[table.offset:table.offset + table.size]
    table.offset, table.size = len(out), len(old) + len(name) + 1
    out += old + name + b"\0"
    write_header(out, table)
    struct.pack_into("<I", out, field_at, len(old))
    return bytes(out)


def rename_symbol(data: bytes, ch: Chooser, name: bytes) -> bytes:
    found = symbols(data)
    if found is None:
        return data
    symtab, entries = found
    hs = headers(data)
    if symtab.link >= len(hs) or not inside(data, hs[symtab.link]) or len(entries) < 2:
        return data
    funcs = [at for at in entries[1:] if data[at + 4] & 0xF == 2]  # STT_FUNC first: they name functions
    at = ch.pick(funcs) if funcs and ch.chance(70) else ch.pick(entries[1:])
    return _rename(data, hs[symtab.link], at, name)


def rename_section(data: bytes, ch: Chooser, name: bytes) -> bytes:
    hs = headers(data)
    idx = shstrndx(data)
    if idx >= len(hs) or not inside(data, hs[idx]) or len(hs) < 2:
        return data
    code = [h for h in hs if h.flags & SHF_EXECINSTR and h.size]
    target = ch.pick(code) if code and ch.chance(60) else ch.pick(hs[1:])
    return _rename(data, hs[idx], target.at, name)


# ---------------------------------------------------------------- section headers and spans (S8, S12)


def _alloc(hs: list[Any]) -> list[Any]:
    return [h for h in hs if h.flags & SHF_ALLOC and h.in_file and h.size]


def alias_span(data: bytes, ch: Chooser) -> bytes:
    """Lay one section over another's file bytes: equal spans (the data-twin case), a shifted overlap,
    or containment. A data section is usually the one moved, over code or a string/symbol table."""
    hs = [h for h in headers(data) if inside(data, h)]
    if len(hs) < 2:
        return data
    datas = [h for h in hs if h.flags & SHF_ALLOC and not h.flags & SHF_EXECINSTR]
    a = ch.pick(datas) if datas and ch.chance(75) else ch.pick(hs)
    b = ch.pick([h for h in hs if h is not a])
    mode = ch.below(4)
    if mode == 0:
        a.offset, a.size = b.offset, b.size
    elif mode == 1:
        a.offset = b.offset + 8 * ch.below(max(1, b.size // 8))
    elif mode == 2:
        a.offset, a.size = b.offset, min(a.size, b.size)
    else:
        b.offset, b.size = a.offset, a.size
    out = bytearray(data)
    write_header(out, a)
    write_header(out, b)
    return bytes(out)


def header_field(data: bytes, ch: Chooser) -> bytes:
    """One header field set to a boundary value, a neighbour's value, a nearby value, a random value,
    or (type/flags) another meaningful kind."""
    hs = headers(data)
    if not hs:
        return data
    h = ch.pick(hs)
    other = ch.pick(hs)
    field = ch.pick(SHDR_FIELDS)
    bits = 32 if field in ("name", "type", "link", "info") else 64
    old = getattr(h, field)
    how = ch.below(5)
    if field == "type" and how == 0:
        value = ch.pick([SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS, SHT_REL, 4, 0, 0x6FFFFFF5])
    elif field == "flags" and how == 0:
        value = ch.pick([0, 1, 2, 3, 6, 7, 0x32, 0x200])
    elif how == 1:
        value = getattr(other, field)
    elif how == 2:
        value = old + ch.pick([-16, -8, -1, 1, 8, 16, 64, 4096])
    elif how == 3:
        value = ch.u64()
    else:
        value = ch.pick(INTERESTING)
    setattr(h, field, value % (1 << bits))
    out = bytearray(data)
    write_header(out, h)
    return bytes(out)


def edit_in_span(data: bytes, ch: Chooser) -> bytes:
    """Same size, same layout: a few bytes changed inside one section's file span (code immediates and
    offsets, data bytes, string-table bytes including invalid UTF-8). The related-input step of pairs."""
    hs = [h for h in headers(data) if inside(data, h)]
    if not hs:
        return data
    alloc = _alloc(hs)
    h = ch.pick(alloc) if alloc and ch.chance(70) else ch.pick(hs)
    out = bytearray(data)
    for _ in range(1 + ch.below(4)):
        at = h.offset + ch.below(h.size)
        if h.flags & SHF_EXECINSTR and ch.chance(70):
            at = h.offset + 8 * ch.below(max(1, h.size // 8)) + ch.pick([1, 2, 4, 4, 5])
            at = min(at, h.offset + h.size - 1)
        out[at] = ch.pick([ch.byte(), 0, 0xFF, out[at] ^ 1, out[at] + 1 & 0xFF, 0x80])
    return bytes(out)


def flip(data: bytes, ch: Chooser) -> bytes:
    out = bytearray(data)
    for _ in range(1 + ch.below(4)):
        out[ch.below(len(out))] = ch.byte()
    return bytes(out)


Mutator = Callable[[bytes, Chooser], bytes]
MUTATORS: list[Mutator] = [
    lambda d, c: rename_symbol(d, c, hostile_name(c)),
    lambda d, c: rename_symbol(d, c, hostile_name(c)),
    lambda d, c: rename_section(d, c, hostile_name(c)),
    alias_span, alias_span, header_field, header_field, edit_in_span, flip,
]


def mutate(data: bytes, ch: Chooser, rounds: int) -> bytes:
    for _ in range(rounds):
        mutator = MUTATORS[ch.below(len(MUTATORS))]
        data = mutator(data, ch)
    return data
