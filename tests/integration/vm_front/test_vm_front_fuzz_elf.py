"""S8 (vm.md §9, §9.2): any byte string given as an ELF yields a program or ``InvalidObject``, never another
exception. 10,000+ seeded mutations of clang-built objects per run; failures are saved to a replayed corpus."""

from __future__ import annotations

import hashlib
import os
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.elf_fuzz import INTERESTING

from wakeful.errors import GuestFault, InvalidObject
from wakeful.vm import asm, clear_caches, isa, load, loader
from wakeful.vm import elf as elfmod

Compile = Callable[..., bytes]
pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "elf"
SEED = int(os.environ.get("WAKEFUL_FUZZ_ELF_SEED", "0x5EEDE1F"), 0)  # fixed; override to explore
MUTATIONS = int(os.environ.get("WAKEFUL_FUZZ_ELF_COUNT", "10240"))  # >= 10,000 per CI run, more on demand

SOURCES = [
    r"""
extern long sf_log_raw(const char *p, unsigned long n);
static const char *names[] = {"alpha", "beta", "gamma"};
int counter; long table[4] = {1, 2, 3, 4};
__attribute__((noinline)) static long walk(long x) { return names[x & 1][0] + counter; }
__attribute__((noinline)) long visit(long x) { char b[32]; for (int i = 0; i < 32; i++) b[i] = x + i;
    sf_log_raw(b, 32); return walk(x); }
__attribute__((section("spinfoam.main"))) long main(void) { counter++; sf_log_raw("hi", 2);
    return visit(table[counter & 3]); }
""",
    r"""
extern long sf_now_mono_ms(void); extern long sf_sleep_ms(long);
unsigned long hits;
__attribute__((section("spinfoam.main"))) long main(void) {
    unsigned int acc = 0;
    for (int i = 0; i < 50; i++) { acc = acc * 31u + i; __sync_fetch_and_add(&hits, 1);
        if ((acc & 7) == 3) sf_sleep_ms(sf_now_mono_ms() & 3); }
    return (signed char)acc / 3 + __sync_val_compare_and_swap(&hits, 50, 5); }
""",
]


def _asm_seed() -> bytes:
    return asm.elf(
        [asm.Func("main", "r1 = rodata + 2 ll\nr2 = data ll\ncall sf_log_raw\ncall f\nexit"),
         asm.Func("f", "r1 = r10\nr1 += -16\n*(u64 *)(r1 + 0) = 1\nr0 = 0\nexit")],
        rodata=b"hello\0world\0", data=bytes(16), bss=8,
        extra_relocs=[(".data", asm.Reloc(0, 2, ".rodata")), (".data", asm.Reloc(8, 3, ".rodata"))],
    )


# ---------------------------------------------------------------- mutators


def _sections(data: bytes) -> tuple[int, int]:
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shnum = struct.unpack_from("<H", data, 0x3C)[0]
    return shoff, shnum


def _entries(data: bytes, sh_type: int, entsize: int) -> list[int]:
    """File offsets of every entry of every section of ``sh_type``."""
    shoff, shnum = _sections(data)
    out = []
    for i in range(shnum):
        _n, typ, _f, _a, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * 64)
        if typ == sh_type and off + size <= len(data):
            out.extend(range(off, off + size - entsize + 1, entsize))
    return out


def _value(rng: random.Random, old: int, bits: int) -> int:
    choice = rng.random()
    if choice < 0.5:
        v = rng.choice(INTERESTING)
    elif choice < 0.8:
        v = old + rng.choice([-16, -8, -1, 1, 8, 16, 4096])
    else:
        v = rng.getrandbits(bits)
    return v % (1 << bits)


def flip_bytes(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        data[i] = rng.getrandbits(8) if rng.random() < 0.5 else data[i] ^ (1 << rng.randrange(8))


def truncate(rng: random.Random, data: bytearray) -> None:
    del data[rng.randrange(len(data)):]


def section_field(rng: random.Random, data: bytearray) -> None:
    shoff, shnum = _sections(data)
    fields = [(0, "I"), (4, "I"), (8, "Q"), (24, "Q"), (32, "Q"), (40, "I"), (44, "I"), (48, "Q"), (56, "Q")]
    off, fmt = rng.choice(fields)
    at = shoff + rng.randrange(shnum) * 64 + off
    old = struct.unpack_from("<" + fmt, data, at)[0]
    struct.pack_into("<" + fmt, data, at, _value(rng, old, 32 if fmt == "I" else 64))


def header_field(rng: random.Random, data: bytearray) -> None:
    fields = [(0x10, "H"), (0x12, "H"), (0x14, "I"), (0x28, "Q"), (0x34, "H"), (0x3A, "H"), (0x3C, "H"), (0x3E, "H")]
    at, fmt = rng.choice(fields)
    old = struct.unpack_from("<" + fmt, data, at)[0]
    struct.pack_into("<" + fmt, data, at, _value(rng, old, {"H": 16, "I": 32, "Q": 64}[fmt]))


def relocation(rng: random.Random, data: bytearray) -> None:
    entries = _entries(data, 9, 16)
    if not entries:
        return flip_bytes(rng, data)
    at = rng.choice(entries)
    r_offset, info = struct.unpack_from("<QQ", data, at)
    part = rng.randrange(3)
    if part == 0:
        r_offset = _value(rng, r_offset, 64)
    elif part == 1:
        info = (_value(rng, info >> 32, 32) << 32) | (info & 0xFFFFFFFF)
    else:
        info = (info & ~0xFFFFFFFF) | _value(rng, info & 0xFFFFFFFF, 32)
    struct.pack_into("<QQ", data, at, r_offset, info)


def symbol(rng: random.Random, data: bytearray) -> None:
    entries = _entries(data, 2, 24)
    if not entries:
        return flip_bytes(rng, data)
    at = rng.choice(entries)
    off, fmt = rng.choice([(0, "I"), (4, "B"), (6, "H"), (8, "Q"), (16, "Q")])
    old = struct.unpack_from("<" + fmt, data, at + off)[0]
    struct.pack_into("<" + fmt, data, at + off, _value(rng, old, {"B": 8, "H": 16, "I": 32, "Q": 64}[fmt]))


def instruction(rng: random.Random, data: bytearray) -> None:
    obj = elfmod.parse(bytes(data))
    codes = obj.of_kind(elfmod.CODE)
    sec = rng.choice(codes)
    at = sec.offset + rng.randrange(sec.size // 8) * 8 + rng.choice([0, 1, 2, 4, 5, 6, 7])
    data[at] = rng.getrandbits(8)


MUTATORS = [flip_bytes, truncate, section_field, header_field, relocation, symbol, instruction, instruction]


# ---------------------------------------------------------------- the property


def _outcome(data: bytes, cache: loader.VerifyCache | None) -> str:
    """"loaded" or "refused" if the loader behaved (a result or InvalidObject), else the escape."""
    try:
        loader.prepare(data, cache=cache)
    except InvalidObject:
        return "refused"
    except Exception as exc:  # noqa: BLE001 - the property under test: nothing else may escape
        return f"{type(exc).__name__}: {exc}"
    return "loaded"


def _save(data: bytes) -> Path:
    CORPUS.mkdir(parents=True, exist_ok=True)
    path = CORPUS / f"crash-{hashlib.sha256(data).hexdigest()[:16]}.elf"
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def seeds(compile_c: Compile) -> list[bytes]:
    return [compile_c(src) for src in SOURCES] + [_asm_seed()]


def test_seeds_load(seeds: list[bytes]) -> None:
    for seed in seeds:
        loader.prepare(seed, cache=None)


def _mutations(seeds: list[bytes], seed: int, count: int) -> Iterator[bytes]:
    """``count`` seeded mutations of the seed objects (1-3 mutators each)."""
    rng = random.Random(seed)
    for _ in range(count):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            if len(data) < 64:
                break
            try:
                rng.choice(MUTATORS)(rng, data)
            except Exception:  # noqa: BLE001
                flip_bytes(rng, data)  # a mutator could not parse an already-broken object
        yield bytes(data)


def test_mutated_elfs_never_escape(seeds: list[bytes]) -> None:
    cache = loader.VerifyCache(capacity=64)
    failures: list[str] = []
    outcomes = {"loaded": 0, "refused": 0}
    for n, blob in enumerate(_mutations(seeds, SEED, MUTATIONS)):
        outcome = _outcome(blob, cache if n % 2 else None)
        if outcome in outcomes:
            outcomes[outcome] += 1
        else:
            failures.append(f"{_save(blob).name}: {outcome}")
    assert not failures, "\n".join(failures[:20])
    # the mutations must exercise both outcomes, or the fuzzer is not testing much
    assert outcomes["loaded"] > 200 and outcomes["refused"] > 2000, outcomes


def test_corpus_replays() -> None:
    files = sorted(CORPUS.glob("*.elf"))
    assert files, "the corpus holds at least the checked-in seeds"
    outcomes = {p.name: _outcome(p.read_bytes(), None) for p in files}
    problems = [f"{name}: {msg}" for name, msg in outcomes.items() if msg not in ("loaded", "refused")]
    assert not problems, "\n".join(problems)
    full = {p.name: _full_outcome(p.read_bytes()) for p in files}
    problems = [f"{name}: {msg}" for name, msg in full.items() if msg not in FULL_OUTCOMES]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the full load path (vm.load + run)

FULL_OUTCOMES = ("refused", "exited", "faulted", "running")
RUN_SLICES = 4  # suspensions answered before a still-running guest is closed
RUN_FUEL = 2000


class _AnyHelperEnv:
    """A GuestEnv whose every synchronous helper returns 0 and charges 8 (the guest only has to run)."""

    def __init__(self) -> None:
        self.debt = self.retired = self.fuel_left = 0

    def helper(self, name: str) -> Callable[..., int]:
        def call(*args: int) -> int:
            self.debt += 8
            return 0

        return call


def _full_outcome(data: bytes) -> str:
    """S8 through ``wakeful.vm.load`` (translation included), then a few slices of the instance: only
    ``InvalidObject`` at load and ``GuestFault`` at run may escape."""
    try:
        program = load(data, slice_insns=RUN_FUEL)
    except InvalidObject:
        return "refused"
    except Exception as exc:  # noqa: BLE001 - the property under test
        return f"load: {type(exc).__name__}: {exc}"
    gen = program.instantiate(_AnyHelperEnv()).gen
    try:
        gen.send(None)
        for _ in range(RUN_SLICES):
            gen.send((0, RUN_FUEL))
    except StopIteration:
        return "exited"
    except GuestFault:
        return "faulted"
    except Exception as exc:  # noqa: BLE001 - the property under test
        return f"run: {type(exc).__name__}: {exc}"
    finally:
        gen.close()
    return "running"


def test_mutated_elfs_load_translate_and_run(seeds: list[bytes]) -> None:
    """vm.md §9 S8 over the whole path: 10,000+ mutations through ``wakeful.vm.load`` (parse, link, verify,
    layout, shape, translation); those that load are instantiated and run for a few slices."""
    failures: list[str] = []
    outcomes = dict.fromkeys(FULL_OUTCOMES, 0)
    for n, blob in enumerate(_mutations(seeds, SEED + 2, MUTATIONS)):
        outcome = _full_outcome(blob)
        if outcome in outcomes:
            outcomes[outcome] += 1
        else:
            failures.append(f"{_save(blob).name}: {outcome}")
        if n % 1000 == 999:
            clear_caches()  # the program and shape caches would otherwise fill with junk
    clear_caches()
    assert not failures, "\n".join(failures[:20])
    assert sum(outcomes.values()) >= 10_000
    loaded = outcomes["exited"] + outcomes["faulted"] + outcomes["running"]
    assert loaded > 200 and outcomes["refused"] > 2000 and outcomes["exited"] > 50, outcomes


# ---------------------------------------------------------------- structure-aware objects (vm/asm.py)

_OPS = [0x07, 0x0F, 0xBF, 0xB7, 0x18, 0x79, 0x7B, 0x62, 0x85, 0x95, 0x05, 0x06, 0x15, 0x1D, 0xDB, 0xC3, 0x8D, 0x0D,
        0x87, 0xD4, 0xDC, 0xD7, 0x91, 0x00]
_SYMBOLS: list[str | int] = ["sf_yield", "f0", "f1", "f2", ".rodata", ".data", ".bss", "zz", 0, 1, 2, 3, 50]


def _random_func(rng: random.Random, i: int) -> asm.Func:
    slots = b"".join(
        isa.encode(rng.choice(_OPS), rng.randrange(16) if rng.random() < 0.1 else rng.randrange(11),
                   rng.randrange(16) if rng.random() < 0.1 else rng.randrange(11),
                   rng.choice([0, 1, -1, 2, -2, 8, -8, 3, 100, -4096]),
                   rng.choice([0, 1, -1, 8, 16, 32, 64, 0x40, 0x41, 0xE1, 0xF1, 0x100, 0x110, -8]))
        for _ in range(rng.randint(1, 8))
    )
    relocs = [asm.Reloc(rng.randrange(len(slots) + 8), rng.choice([1, 2, 3, 4, 10, 10, 1, 7]), rng.choice(_SYMBOLS))
              for _ in range(rng.choice([0, 0, 1]))]
    return asm.Func(f"f{i}", slots, section=rng.choice([None, None, ".text", ".text.1", "spinfoam.main"]), relocs=relocs)


def _random_object(rng: random.Random) -> bytes | None:
    funcs = [_random_func(rng, i) for i in range(rng.randint(1, 4))]
    extra = [asm.Section(rng.choice([".text", ".rodata.1", ".data.1", ".BTF", "x", "spinfoam.main"]),
                         rng.choice([1, 1, 8, 2, 3, 9, 14]), rng.choice([2, 3, 6, 7, 0, 0x32]),
                         bytes(rng.randrange(24)), rng.choice([0, 1, 8, 4096, 8192]), link=rng.randrange(12),
                         info=rng.randrange(12), entsize=rng.choice([0, 16, 24]))
             for _ in range(rng.choice([0, 0, 0, 1]))]
    syms = [asm.Symbol(rng.choice(["a", "f0", ""]), rng.choice([0, 4, 8, 1 << 40]), rng.choice([0, 4, 8]),
                       rng.randrange(5), rng.randrange(3), rng.choice([None, ".rodata", ".data", "spinfoam.main", 0xFFF1]))
            for _ in range(rng.choice([0, 0, 0, 1]))]
    data_relocs = [(rng.choice([".data", ".rodata", ".bss"]),
                    asm.Reloc(rng.randrange(20), rng.choice([2, 3, 1]), rng.choice([".rodata", ".data", "f0", 99])))
                   for _ in range(rng.choice([0, 0, 1]))]
    try:
        return asm.elf(funcs, rodata=bytes(rng.randrange(17)), data=bytes(rng.randrange(17)), bss=rng.randrange(9),
                       extra_sections=extra, extra_symbols=syms, extra_relocs=data_relocs)
    except Exception:  # noqa: BLE001 - the generator may describe an object the writer cannot lay out
        return None


def test_structured_random_objects_never_escape() -> None:
    rng = random.Random(SEED + 1)
    failures, rules = [], set()
    for _ in range(4000):
        blob = _random_object(rng)
        if blob is None:
            continue
        try:
            loader.prepare(blob, cache=None)
        except InvalidObject as exc:
            rules.add(exc.rule)
        except Exception as exc:  # noqa: BLE001 - the property under test: nothing else may escape
            failures.append(f"{_save(blob).name}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures[:20])
    assert len(rules) >= 12, rules  # the generator reaches deep into the verifier, not only the ELF checks
