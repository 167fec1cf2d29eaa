"""The oracle's own ELF front end (issue 14): ET_REL EM_BPF bytes to linked code and guest memory,
written from the System V gABI and vm.md §2 (sections), §3 (relocations) and §5 (memory map).

Independent of ``vm/elf.py``, ``vm/link.py`` and ``vm/memory.py``: it trusts its input (the loader has
already accepted it) and checks only what it needs to compute. Standard library only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from oracle_ebpf import BASE, U32, U64, Code, OracleError, Slot, fields, variant_of

SHT_PROGBITS, SHT_SYMTAB, SHT_NOBITS, SHT_REL = 1, 2, 8, 9
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
STT_FUNC = 2
R_BPF_64_64, R_BPF_64_ABS64, R_BPF_64_ABS32, R_BPF_64_32 = 1, 2, 3, 10
ENTRY = "spinfoam.main"


@dataclass
class _Sec:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    align: int
    link: int
    info: int

    @property
    def kind(self) -> str | None:
        """vm.md §2: code, rodata, data, bss, or None (ignored)."""
        if not self.flags & SHF_ALLOC or self.name == ".eh_frame" or self.type not in (SHT_PROGBITS, SHT_NOBITS):
            return None
        if self.type == SHT_NOBITS:
            return "bss"
        if self.flags & SHF_EXECINSTR:
            return "code" if self.size else None
        return "data" if self.flags & SHF_WRITE else "rodata"


@dataclass
class _Sym:
    name: str
    value: int
    type: int
    shndx: int


@dataclass
class Loaded:
    code: Code
    mem: bytearray
    writable: int  # guest address of the first writable byte


def _cstr(blob: bytes, at: int) -> str:
    return blob[at:blob.index(b"\0", at)].decode()


def _sections(blob: bytes) -> list[_Sec]:
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", blob, 0x3C)
    raw = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + 64 * i) for i in range(shnum)]
    names_at = raw[shstrndx][4]
    return [_Sec(i, _cstr(blob, names_at + r[0]), r[1], r[2], r[4], r[5], max(1, r[8]), r[6], r[7])
            for i, r in enumerate(raw)]


def _symbols(blob: bytes, secs: list[_Sec]) -> list[_Sym]:
    tab = next(s for s in secs if s.type == SHT_SYMTAB)
    strings = secs[tab.link].offset
    out = []
    for at in range(tab.offset, tab.offset + tab.size, 24):
        name, info, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", blob, at)
        out.append(_Sym(_cstr(blob, strings + name), value, info & 0xF, shndx))
    return out


def _rels(blob: bytes, secs: list[_Sec]) -> dict[int, dict[int, tuple[int, int]]]:
    """target section -> byte offset -> (type, symbol index)."""
    out: dict[int, dict[int, tuple[int, int]]] = {}
    for s in secs:
        if s.type == SHT_REL:
            table = out.setdefault(s.info, {})
            for at in range(s.offset, s.offset + s.size, 16):
                offset, info = struct.unpack_from("<QQ", blob, at)
                table[offset] = (info & U32, info >> 32)
    return out


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def place(secs: list[_Sec]) -> tuple[dict[int, int], int, int]:
    """vm.md §5: rodata packed in section order, each aligned; R rounded up to the largest writable
    alignment (at least 8); then data sections, then bss sections; D rounded up to 8.
    Returns (section index -> image index, R, D)."""
    at: dict[int, int] = {}
    end = 0
    for s in secs:
        if s.kind == "rodata":
            end = _align(end, s.align)
            at[s.index] = end
            end += s.size
    writable = [s for s in secs if s.kind == "data"] + [s for s in secs if s.kind == "bss"]
    r = _align(end, max([8, *(s.align for s in writable)]))
    end = r
    for s in writable:
        end = _align(end, s.align)
        at[s.index] = end
        end += s.size
    return at, r, _align(end - r, 8)


def load(blob: bytes, frames: dict[str, int], stack: int) -> Loaded:
    """Link ``blob`` (vm.md §3) and build its memory; ``frames`` by function name and ``stack`` are the
    verifier's figures (vm.md §5.1)."""
    secs = _sections(blob)
    syms = _symbols(blob, secs)
    rels = _rels(blob, secs)
    at, r, d = place(secs)
    mem = bytearray(r + d + stack)
    for s in secs:
        if s.kind in ("rodata", "data"):
            mem[at[s.index]:at[s.index] + s.size] = blob[s.offset:s.offset + s.size]

    def address(sym: int, addend: int) -> int:
        s = syms[sym]
        if s.shndx not in at:
            raise OracleError(f"symbol {s.name!r} is not data")
        return BASE + at[s.shndx] + s.value + addend

    _data_relocs(secs, rels, mem, at, address)
    starts = _function_starts(blob, secs, syms, rels)
    return Loaded(_link_code(blob, secs, syms, rels, starts, frames, address), mem, BASE + r)


def _data_relocs(secs: list[_Sec], rels: dict[int, dict[int, tuple[int, int]]], mem: bytearray,
                 at: dict[int, int], address: Callable[[int, int], int]) -> None:
    """vm.md §3 R_BPF_64_ABS64/ABS32 in data sections: symbol address + the stored addend."""
    for s in secs:
        if s.kind not in ("rodata", "data"):
            continue
        for offset, (kind, sym) in rels.get(s.index, {}).items():
            width = {R_BPF_64_ABS64: 8, R_BPF_64_ABS32: 4}.get(kind)
            if width is None:
                continue
            i = at[s.index] + offset
            value = address(sym, int.from_bytes(mem[i:i + width], "little")) & ((1 << (8 * width)) - 1)
            mem[i:i + width] = value.to_bytes(width, "little")


def _function_starts(blob: bytes, secs: list[_Sec], syms: list[_Sym],
                     rels: dict[int, dict[int, tuple[int, int]]]) -> dict[tuple[int, int], str]:
    """vm.md §2: functions start at each code section's first slot, its STT_FUNC symbols and every
    local-call target; unnamed ones are called ``SECTION+BYTEOFFSET``. Key: (section, slot)."""
    starts: dict[tuple[int, int], str] = {}
    for sym in syms:
        in_code = 0 < sym.shndx < len(secs) and secs[sym.shndx].kind == "code"
        if sym.type == STT_FUNC and sym.name and in_code:
            starts.setdefault((sym.shndx, sym.value // 8), sym.name)
    for s in secs:
        if s.kind != "code":
            continue
        starts.setdefault((s.index, 0), f"{s.name}+0")
        raw = blob[s.offset:s.offset + s.size]
        for slot in range(s.size // 8):
            target = _call_target(raw, s, slot, rels.get(s.index, {}), syms)
            if target is not None and target not in starts:
                starts[target] = f"{secs[target[0]].name}+{target[1] * 8}"
    return starts


def _call_target(raw: bytes, s: _Sec, slot: int, rels: dict[int, tuple[int, int]],
                 syms: list[_Sym]) -> tuple[int, int] | None:
    """vm.md §3: a local call's (section, slot): symbol slot + imm + 1, or pc + imm + 1 without a relocation."""
    op, _, src, _, imm = fields(raw, slot)
    if op != 0x85:
        return None
    rel = rels.get(slot * 8)
    if rel is None:
        return (s.index, slot + imm + 1) if src == 1 else None
    sym = syms[rel[1]]
    if sym.shndx == 0:
        return None  # a helper
    return (sym.shndx, sym.value // 8 + imm + 1)


def _link_code(blob: bytes, secs: list[_Sec], syms: list[_Sym], rels: dict[int, dict[int, tuple[int, int]]],
               starts: dict[tuple[int, int], str], frames: dict[str, int],
               address: Callable[[int, int], int]) -> Code:
    order = sorted(starts, key=lambda k: (secs[k[0]].name != ENTRY, k))
    index = {k: i for i, k in enumerate(order)}
    code = Code([starts[k] for k in order], [], [frames[starts[k]] for k in order])
    for sec_index, first in order:
        s = secs[sec_index]
        raw = blob[s.offset:s.offset + s.size]
        stop = min([slot for (si, slot) in order if si == sec_index and slot > first], default=s.size // 8)
        table = rels.get(sec_index, {})
        slots: list[Slot] = []
        for pc in range(first, stop):
            op, dst, src, off, imm = fields(raw, pc)
            if slots and slots[-1].op == 0x18 and slots[-1].variant == "ld_imm64":
                prev = slots[-1]
                prev.imm = (prev.imm & U32) | ((imm & U32) << 32)
                rel = table.get((pc - 1) * 8)
                if rel is not None:
                    if rel[0] != R_BPF_64_64:
                        raise OracleError(f"relocation type {rel[0]} on LD_IMM64")
                    prev.imm = address(rel[1], prev.imm) & U64
                slots.append(Slot(0, 0, 0, 0, 0, "ld_imm64.hi"))
                continue
            slot = Slot(op, dst, src, off, imm, variant_of(op, src, off, imm))
            if op == 0x85:
                target = _call_target(raw, s, pc, table, syms)
                rel = table.get(pc * 8)
                if target is not None:
                    slot.target = ("local", index[target])
                elif rel is not None:
                    slot.target = ("helper", syms[rel[1]].name)
                else:
                    raise OracleError(f"call at {s.name}+{pc * 8} is neither local nor a named helper")
                slot.variant = f"call.{slot.target[0]}"
            slots.append(slot)
        code.slots.append(slots)
    return code
