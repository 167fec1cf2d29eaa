"""The load pipeline steps 1-6 of vm.md §1: parse, code key, link, verify, layout; the verification cache.

``prepare()`` turns ELF bytes into linked, verified code plus its memory layout, or raises ``InvalidObject``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypedDict, TypeVar, Unpack

from wakeful.errors import InvalidParams
from wakeful.vm import elf as elfmod
from wakeful.vm.codekey import code_key
from wakeful.vm.link import finish, link
from wakeful.vm.linked import Layout, LinkedCode, VerifyReport
from wakeful.vm.memory import DataReloc, Placement, build_image, make_layout, place
from wakeful.vm.verify import Verdict, verify

__all__ = ["CACHE", "Prepared", "VerifyCache", "prepare", "verify_elf"]

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Prepared:
    """A loaded object before translation: linked code, memory layout, report, ELF digest."""

    code: LinkedCode
    layout: Layout
    report: VerifyReport
    sha256: str


@dataclass(frozen=True, slots=True)
class _Verified:
    """What a verification-cache hit reuses (vm.md §1.1); the report's digest and size are per ELF."""

    code: LinkedCode
    placement: Placement
    data_relocs: tuple[DataReloc, ...]
    stack_bytes: int
    report: VerifyReport


_K = TypeVar("_K")
_V = TypeVar("_V")


class _Lru(Generic[_K, _V]):
    """At most ``capacity`` entries: ``put`` makes its entry the most recent and evicts the least recent."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[_K, _V] = OrderedDict()

    def put(self, key: _K, value: _V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class VerifyCache(_Lru[str, _Verified]):
    """vm.md §1.1: at most ``capacity`` code keys, least recently used evicted first (a hit counts as a use)."""

    def __init__(self, capacity: int = 1024) -> None:
        super().__init__(capacity)

    def get(self, key: str) -> _Verified | None:
        hit = self._entries.get(key)
        if hit is not None:
            self._entries.move_to_end(key)
        return hit


CACHE = VerifyCache()


# ---------------------------------------------------------------------- data twins (vm.md §10 load path)

_SHOFF_SHNUM = struct.Struct("<Q16xH")  # e_shoff at 40, e_shnum at 60 (ELF64 header)


class _Twin:
    """The last parsed object of one size, and the file spans only its data/rodata contents occupy.

    vm.md §10: data-only variants (benchmarks.md §1.2) must skip what they can. A new ELF equal to the twin
    outside those spans parses to the same sections, symbols and relocations and has the same code key
    (vm.md §1.1 never covers data bytes), so only its bytes are swapped in.

    vm.md §9 S12: that holds because every byte parsing, linking and verification read lies outside the
    spans: the parser refuses sections whose file spans overlap each other, the ELF header or the section
    table (vm/elf.py), and ``_spans_are_private`` checks it again by section number here, so a twin hit
    compares every byte the twin's parse, code key and verification depend on.
    """

    __slots__ = ("data", "key", "obj", "outside")

    def __init__(self, obj: elfmod.ElfObject, key: str, outside: tuple[tuple[int, int], ...]) -> None:
        self.obj, self.key, self.data, self.outside = obj, key, obj.data, outside

    @classmethod
    def of(cls, obj: elfmod.ElfObject, key: str) -> _Twin | None:
        mutable = [s for s in obj.of_kind(elfmod.RODATA, elfmod.DATA) if s.size]
        if not mutable or not _spans_are_private(obj, mutable):
            return None
        outside, at = [], 0
        for start, end in sorted((s.offset, s.offset + s.size) for s in mutable):
            outside.append((at, start))
            at = end
        outside.append((at, len(obj.data)))
        return cls(obj, key, tuple(outside))

    def matches(self, data: bytes) -> bool:
        """Equal to the twin everywhere but inside its data/rodata contents."""
        mine = self.data
        return all(data[a:b] == mine[a:b] for a, b in self.outside)

    def with_data(self, data: bytes) -> elfmod.ElfObject:
        o = self.obj
        return elfmod.ElfObject(data, o.sections, o.symbols, o.symtab, o.strtab, o.rels, o.rel_sections, o.ignored)


def _spans_are_private(obj: elfmod.ElfObject, mutable: list[elfmod.Sec]) -> bool:
    """No data/rodata span overlaps the header, the section table, another section's file bytes -- whatever
    its offset and size, identical spans included -- or another data span."""
    shoff, shnum = _SHOFF_SHNUM.unpack_from(obj.data, 40)
    spans = [(0, 64, -1), (shoff, shoff + shnum * 64, -2)] + [
        (s.offset, s.offset + s.size, s.num) for s in obj.sections if s.type != elfmod.SHT_NOBITS and s.size
    ]
    for sec in mutable:
        start, end = sec.offset, sec.offset + sec.size
        if any(start < b and a < end for a, b, num in spans if num != sec.num):
            return False
    return True


class _TwinCache(_Lru[tuple[int, ...], _Twin]):
    """One twin per (ELF size, options); at most ``capacity`` sizes, least recently stored evicted."""

    def __init__(self, capacity: int = 64) -> None:
        super().__init__(capacity)

    def get(self, key: tuple[int, ...]) -> _Twin | None:
        return self._entries.get(key)

    def put(self, key: tuple[int, ...], value: _Twin | None) -> None:
        """``None`` (an ELF without a usable twin) forgets the size's twin."""
        if value is None:
            self._entries.pop(key, None)
        else:
            super().put(key, value)


TWINS = _TwinCache()


class PrepareOptions(TypedDict, total=False):
    """The keywords of ``prepare`` and ``verify_elf``; an absent one takes its default in ``prepare``."""

    max_elf_bytes: int
    max_instructions: int
    max_image_bytes: int
    cache: VerifyCache | None


def prepare(
    data: bytes,
    *,
    max_elf_bytes: int = 65536,
    max_instructions: int = 8192,
    max_image_bytes: int = 65536,
    cache: VerifyCache | None = CACHE,
) -> Prepared:
    """vm.md §1 steps 1-6. ``cache=None`` always links and verifies (tests compare both paths)."""
    data = _as_bytes(data)
    _check_options(max_elf_bytes, max_instructions, max_image_bytes)
    twin_key = (len(data), max_elf_bytes, max_instructions, max_image_bytes)
    twin = TWINS.get(twin_key) if cache is not None else None
    if twin is not None and twin.matches(data):
        obj, key = twin.with_data(data), twin.key
    else:
        obj = elfmod.parse(data, max_elf_bytes=max_elf_bytes)
        key = code_key(obj, max_instructions=max_instructions, max_image_bytes=max_image_bytes)
        if cache is not None:
            TWINS.put(twin_key, _Twin.of(obj, key))
    verified = cache.get(key) if cache is not None else None
    if verified is None:
        verified = _link_and_verify(obj, key, max_instructions=max_instructions, max_image_bytes=max_image_bytes)
        if cache is not None:
            cache.put(key, verified)
    image = build_image(obj, verified.placement, verified.data_relocs)
    digest = hashlib.sha256(data).hexdigest()
    report = dataclasses.replace(verified.report, sha256=digest, elf_bytes=len(data))
    layout = make_layout(verified.placement, verified.stack_bytes, image)
    return Prepared(verified.code, layout, report, digest)


def verify_elf(data: bytes, **options: Unpack[PrepareOptions]) -> VerifyReport:
    """vm.md §4.3: the report of a successful load (raises ``InvalidObject`` otherwise)."""
    return prepare(data, **options).report


def _as_bytes(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise InvalidParams(f"an ELF object must be bytes, not {type(data).__name__}")


# vm.md §1 options: max_elf_bytes <= 1 MiB, max_instructions <= 65,536, max_image_bytes <= 1 MiB
def _check_options(max_elf_bytes: int, max_instructions: int, max_image_bytes: int) -> None:
    for name, value, top in (("max_elf_bytes", max_elf_bytes, MIB), ("max_instructions", max_instructions, 65536),
                             ("max_image_bytes", max_image_bytes, MIB)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
            raise InvalidParams(f"{name} must be an integer in 1..{top}, not {value!r}")


def _link_and_verify(obj: elfmod.ElfObject, key: str, *, max_instructions: int, max_image_bytes: int) -> _Verified:
    placement = place(obj, max_image_bytes=max_image_bytes)
    linked = link(obj, placement, max_instructions=max_instructions)
    verdict = verify(linked)
    code = finish(linked, list(verdict.frames))
    report = _report(obj, key, code, verdict)
    return _Verified(code, placement, tuple(linked.data_relocs), verdict.stack_bytes, report)


# vm.md §4.3 VerifyReport (sha256 and elf_bytes are filled in per ELF)
def _report(obj: elfmod.ElfObject, key: str, code: LinkedCode, verdict: Verdict) -> VerifyReport:
    names = [f.name for f in code.functions]
    bases = {f.section: f.start for f in code.functions[::-1]}
    functions = tuple(
        {
            "name": f.name,
            "section": f.section,
            "start": f.start - bases[f.section],
            "instructions": f.end - f.start,
            "stack_frame_bytes": f.frame_bytes,
            "calls": [names[c] for c in f.calls],
            "helpers": list(f.helpers),
        }
        for f in code.functions
    )
    sizes = {kind: sum(s.size for s in obj.of_kind(kind)) for kind in (elfmod.RODATA, elfmod.DATA, elfmod.BSS)}
    return VerifyReport(
        sha256="",
        elf_bytes=0,
        code_key=key,
        entry=code.functions[code.entry].name,
        instructions=len(code.insns),
        functions=functions,
        call_chain=tuple(names[i] for i in verdict.chain),
        stack_bytes=verdict.stack_bytes,
        helpers=tuple(sorted(code.helpers)),
        image={"rodata_bytes": sizes[elfmod.RODATA], "data_bytes": sizes[elfmod.DATA], "bss_bytes": sizes[elfmod.BSS]},
        ignored_sections=tuple(obj.ignored),
    )
