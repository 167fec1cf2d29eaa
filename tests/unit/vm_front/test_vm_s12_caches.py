"""S12 (vm.md §9): the load caches never hand one ELF another ELF's code, data, symbols or relocations.

Every cache key (verification cache §1.1, the loader's data twins, the shape key memo of vm/program.py)
covers every byte parsing, linking and verification read, and sections whose file spans overlap are
refused. Issue 14 reproductions 2 (one tenant's code under another's Loop) and 3 (``UnicodeDecodeError``
from a strtab laid over rodata) run on the real path: ``wakeful.vm.load`` with the process-wide caches and
the real 1,024-entry LRU evicted by 1,024 other programs. The property test loads random sequences of
related ELFs with warm caches and compares each with what a fresh process would run.
"""

from __future__ import annotations

import contextlib
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wakeful.errors import InvalidObject
from wakeful.vm import Program, asm, clear_caches, load, loader
from wakeful.vm.elf import SHT_NOBITS, ElfObject, parse
from wakeful.vm.shapes import shape_key

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vm_exec"))

from vmexec_kit import run  # noqa: E402

FILLERS = iter(range(1 << 40))  # every eviction uses programs never loaded before


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    _forget()
    yield
    _forget()


def _forget() -> None:
    clear_caches()
    loader.CACHE.clear()
    loader.TWINS.clear()


def _evict(count: int | None = None) -> None:
    """Push every entry out of the process-wide verification cache by loading other programs."""
    for _ in range(loader.CACHE.capacity if count is None else count):
        load(asm.elf([asm.Func("main", f"r0 = {next(FILLERS)}\nexit")]))


def _section(data: bytes, name: str) -> tuple[int, int]:
    sec = next(s for s in parse(data).sections if s.name == name)
    return sec.offset, sec.size


def _r0(data: bytes) -> int | None:
    return run(load(data)).r0


def _refused(data: bytes) -> str:
    with pytest.raises(InvalidObject) as info:
        load(data)
    return info.value.rule


# ---------------------------------------------------------------- issue 14, reproduction 2


def _tenants() -> tuple[bytes, bytes, bytes]:
    """(victim, hostile twin, attacker): the hostile twin is the victim with .rodata moved onto its code
    (same code key: offsets are not part of it); the attacker changes the code bytes of that span."""
    victim = asm.elf([asm.Func("main", "r0 = 1\nexit")], rodata=bytes(range(16)))
    code_at, code_size = _section(victim, asm.ENTRY_SECTION)
    assert code_size == 16
    twin = asm.patch_shdr(victim, ".rodata", sh_offset=code_at)
    attack = asm.assemble("r0 = 666\nexit")[0]
    return victim, twin, twin[:code_at] + attack + twin[code_at + 16:]


def test_reproduction_2_a_victim_runs_its_own_code_after_an_attacker_poisons_its_key() -> None:
    victim, twin, attacker = _tenants()
    for upload in (twin, None, attacker):  # the attacker's uploads (either may be refused) and an eviction
        if upload is None:
            _evict()  # the real 1,024-entry LRU, filled by 1,024 other programs
            continue
        with contextlib.suppress(InvalidObject):
            run(load(upload))
    assert _r0(victim) == 1


def test_a_section_laid_over_code_is_refused() -> None:
    _victim, twin, attacker = _tenants()
    assert _refused(twin) == "ELF_SECTION"
    assert _refused(attacker) == "ELF_SECTION"


# ---------------------------------------------------------------- issue 14, reproduction 3 (S8)


def _strtab_over_rodata() -> tuple[bytes, bytes]:
    base = asm.elf([asm.Func("main", "r0 = 1\nexit")], rodata=b"\0main\0")
    at, size = _section(base, ".strtab")
    assert base[at:at + size] == b"\0main\0"
    twin = asm.patch_shdr(base, ".rodata", sh_offset=at)
    return twin, twin[:at + 1] + b"\xff" + twin[at + 2:]  # 'main' is no longer UTF-8


def test_reproduction_3_new_strtab_bytes_under_a_twin_give_invalid_object() -> None:
    twin, bad = _strtab_over_rodata()
    with contextlib.suppress(InvalidObject):
        load(twin)
    _evict()
    with pytest.raises(InvalidObject):
        load(bad)
    with pytest.raises(InvalidObject):
        loader.prepare(bad, cache=loader.VerifyCache())  # a cold verification cache: linking runs


# ---------------------------------------------------------------- overlapping spans (S12)


@pytest.fixture(scope="module")
def clang_elf(compile_c: Any) -> bytes:
    elf: bytes = compile_c(r"""
static const char names[][8] = {"alpha", "beta", "gamma"};
long counter; long table[4] = {1, 2, 3, 4}; static char scratch[64];
__attribute__((noinline)) static long walk(long x) { scratch[x & 63] = x; return names[x % 3][1] + counter; }
__attribute__((section("spinfoam.main"))) long main(void) { counter++; return walk(table[counter & 3]); }
""", extra_flags=("-g",))
    return elf


def _file_spans(data: bytes) -> list[tuple[int, int, int]]:
    return [(s.num, s.offset, s.size) for s in parse(data).sections if s.size and s.type != SHT_NOBITS]


def test_clang_output_has_no_overlaps_and_loads(clang_elf: bytes) -> None:
    assert len(_file_spans(clang_elf)) >= 8  # code, rodata, data, BTF, debug info, tables
    assert _r0(clang_elf) is not None


def test_every_overlap_of_two_clang_sections_is_refused(clang_elf: bytes) -> None:
    spans = _file_spans(clang_elf)
    shoff = struct.unpack_from("<Q", clang_elf, 40)[0]
    for num, _, size in spans:
        others = [(o, s) for n, o, s in spans if n != num] + [(0, 64), (shoff, 64)]
        for at, other_size in others:
            for offset in {at, at + other_size - 1, max(at - size + 1, 0)}:
                moved = asm.patch_shdr(clang_elf, num, sh_offset=offset)
                with pytest.raises(InvalidObject):  # ELF_SECTION, or an earlier rule the move broke
                    loader.prepare(moved, cache=None)


def _verified(data: bytes) -> tuple[Any, ...] | None:
    try:
        got = loader.prepare(data, cache=None)
    except InvalidObject:
        return None
    return got.report.code_key, got.code, got.layout.rodata_bytes, got.layout.data_bytes, got.layout.stack_bytes


def test_an_equal_code_key_means_equal_verified_code(clang_elf: bytes) -> None:
    """Every single-byte change of a clang object either is refused, changes the code key, or leaves the
    linked code and layout as they were (it changed data, or a byte nothing reads): the key covers every
    byte linking and verification read (vm.md §1.1, S12)."""
    key, *verified = _verified(clang_elf) or ()
    kept = 0
    for at in range(len(clang_elf)):
        got = _verified(clang_elf[:at] + bytes([clang_elf[at] ^ 0x21]) + clang_elf[at + 1:])
        if got is not None and got[0] == key:
            assert list(got[1:]) == verified, at
            kept += 1
    assert kept > 64  # data bytes and ignored sections (.BTF, .debug_*) keep the key


def test_zero_size_and_nobits_sections_may_sit_anywhere() -> None:
    base = asm.elf([asm.Func("main", "r0 = 3\nexit")], rodata=bytes(8), bss=16,
                   extra_sections=[asm.Section(".rodata.empty", data=b"")])
    code_at, _ = _section(base, asm.ENTRY_SECTION)
    for name in (".bss", ".rodata.empty"):
        moved = asm.patch_shdr(base, name, sh_offset=code_at)
        assert _r0(moved) == 3


def test_a_section_outside_the_file_is_refused() -> None:
    base = asm.elf([asm.Func("main", "r0 = 3\nexit")],
                   extra_sections=[asm.Section(".comment", flags=0, data=b"clang\0")])
    moved = asm.patch_shdr(base, ".comment", sh_offset=len(base) - 2)
    assert _refused(moved) == "ELF_SECTION"


def test_the_twin_check_alone_refuses_a_span_equal_to_another_sections() -> None:
    """Defence in depth: even an object the parser let through with rodata exactly over the code (built
    here by hand) never becomes a twin, whose shortcut would skip the code bytes."""
    victim, _twin, _attacker = _tenants()
    obj = parse(victim)
    code = next(s for s in obj.sections if s.name == asm.ENTRY_SECTION)
    sections = [s._replace(offset=code.offset) if s.name == ".rodata" else s for s in obj.sections]
    forged = ElfObject(obj.data, sections, obj.symbols, obj.symtab, obj.strtab, obj.rels, obj.rel_sections)
    assert loader._Twin.of(forged, "key") is None
    assert loader._Twin.of(obj, "key") is not None


# ---------------------------------------------------------------- data variants still hit the caches


def test_data_variants_still_share_the_verified_code() -> None:
    elfs = [asm.elf([asm.Func("main", "r1 = rodata ll\nr0 = *(u64 *)(r1 + 0)\nexit")],
                    rodata=struct.pack("<Q", n)) for n in (5, 6, 7)]
    first = load(elfs[0])
    twin = loader.TWINS.get((len(elfs[0]), 65536, 8192, 65536))
    assert twin is not None and twin.matches(elfs[1])
    for n, data in zip((5, 6, 7), elfs):
        program = load(data)
        assert program.code is first.code and run(program).r0 == n


def test_the_shape_key_memo_never_lends_another_programs_shape() -> None:
    one = load(asm.elf([asm.Func("main", "r0 = 1\nexit")]))
    other = loader.prepare(asm.elf([asm.Func("main", "r0 = 1\nr0 <<= 3\nexit")]), cache=None)
    forged = Program(other.code, other.layout, report=one.report)  # a report naming another code key
    assert forged.shape_key == shape_key(other.code)[0]
    assert run(forged).r0 == 8


# ---------------------------------------------------------------- property: warm caches == a fresh process

TARGETS = (asm.ENTRY_SECTION, ".text", ".strtab", ".symtab", ".shstrtab", ".rel" + asm.ENTRY_SECTION)
MOVABLE = (".rodata", ".data")


def _program(imm: int, imm2: int, extra: bool, rodata: bytes, data: bytes) -> bytes:
    main = f"""
        r1 = rodata ll
        r2 = *(u64 *)(r1 + 0)
        r3 = data ll
        r4 = *(u64 *)(r3 + 0)
        r0 = r2
        r0 ^= r4
        r0 += {imm}
        {"r0 *= 3" if extra else "r0 -= 5"}
        r1 = r0
        call f
        *(u64 *)(r3 + 8) = r0
        exit
    """
    f = f"r0 = r1\nr0 += {imm2}\nexit"
    return asm.elf([asm.Func("main", main), asm.Func("f", f)], rodata=rodata, data=data, bss=8)


class Family:
    """Related ELFs around one legitimate program: its data variants, code variants of the same size,
    hostile twins with a data section laid over another span, and attackers that change that span."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
        self.imm, self.imm2 = draw(st.integers(-8, 8)), draw(st.integers(-8, 8))
        self.extra = draw(st.booleans())
        self.movable = draw(st.sampled_from(MOVABLE))
        self.target = draw(st.sampled_from((*TARGETS, "header", "section table")))
        self.shift = draw(st.sampled_from((0, 0, 0, 8)))  # mostly an exact twin of the other span
        probe = _program(self.imm, self.imm2, self.extra, bytes(16), bytes(16))
        self.size = max(16, self._target(probe)[1])  # the program reads 8 and writes 16 bytes of it
        self.base = self.legit()
        self.at = self._target(self.base)[0] + self.shift

    def _target(self, data: bytes) -> tuple[int, int]:
        if self.target == "header":
            return 0, 64
        if self.target == "section table":
            return struct.unpack_from("<Q", data, 40)[0], 64 * struct.unpack_from("<H", data, 60)[0]
        return _section(data, self.target)

    def legit(self, *, imm: int | None = None, extra: bool | None = None) -> bytes:
        sizes = {m: self.size if m == self.movable else 16 for m in MOVABLE}
        rodata, data = (self.draw(st.binary(min_size=sizes[m], max_size=sizes[m])) for m in MOVABLE)
        return _program(self.imm if imm is None else imm, self.imm2, self.extra if extra is None else extra,
                        rodata, data)

    def hostile(self) -> bytes:
        return asm.patch_shdr(self.base, self.movable, sh_offset=self.at)

    def attacker(self, hostile: bytes) -> bytes:
        out = bytearray(hostile)
        hi = min(self.at + self.size, len(out))
        for _ in range(self.draw(st.integers(1, 4))):
            out[self.draw(st.integers(self.at, hi - 1))] = self.draw(st.integers(0, 255))
        return bytes(out)


@st.composite
def scenarios(draw: Any) -> list[bytes | None]:
    """A sequence of uploads ending with the legitimate program; ``None`` evicts the (shrunk) verification
    cache."""
    fam = Family(draw)
    hostile = fam.hostile()
    pool = {
        "legit": lambda: fam.base,
        "data variant": fam.legit,
        "code variant": lambda: fam.legit(imm=fam.imm + draw(st.integers(1, 5))),
        "shape variant": lambda: fam.legit(extra=not fam.extra),
        "hostile": lambda: hostile,
        "attacker": lambda: fam.attacker(hostile),
        "evict": lambda: None,
    }
    steps = draw(st.lists(st.sampled_from(sorted(pool)), min_size=2, max_size=7))
    return [pool[step]() for step in steps] + [fam.base]


def _warm(data: bytes) -> tuple[Any, ...]:
    try:
        program = load(data)
        ran = run(program).comparable()
    except InvalidObject as exc:
        return ("refused", exc.rule, exc.message)
    except Exception as exc:  # an S8 violation is a difference too
        return ("crashed", type(exc).__name__, str(exc))
    return ("ran", program.code, program.layout, program.report, ran)


def _fresh(data: bytes) -> tuple[Any, ...]:
    """What a fresh process runs: no verification cache, no twin, no shape (the reference interpreter)."""
    try:
        prepared = loader.prepare(data, cache=None)
        ran = run(Program(prepared.code, prepared.layout, engine="interp")).comparable()
    except InvalidObject as exc:
        return ("refused", exc.rule, exc.message)
    except Exception as exc:
        return ("crashed", type(exc).__name__, str(exc))
    return ("ran", prepared.code, prepared.layout, prepared.report, ran)


@settings(max_examples=400, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_warm_caches_run_what_a_fresh_process_runs(uploads: list[bytes | None]) -> None:
    _forget()
    capacity = loader.CACHE.capacity
    loader.CACHE.capacity = 2  # test-only: a small LRU so evictions happen within a few loads
    try:
        for data in uploads:
            if data is None:
                _evict(2)
                continue
            want = _fresh(data)
            assert want[0] != "crashed", want
            assert _warm(data) == want
    finally:
        loader.CACHE.capacity = capacity
