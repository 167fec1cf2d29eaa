"""Mutated clang-built ELFs (vm.md §9.1 item 24, §9.2): whatever the loader accepts runs in both engines
without any exception but a GuestFault, and programs that finish agree (S8 + S9 for the engines).

Failing inputs are saved to tests/corpus/diff/*.elf and replayed first on every run.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "vm_exec"))

from vmexec_kit import CORPUS, Env, Outcome, run  # noqa: E402

from wakeful.errors import InvalidObject  # noqa: E402
from wakeful.vm import clear_caches, load  # noqa: E402

pytestmark = pytest.mark.integration

SEED = 0x5EED_E1F
MUTATIONS = 10_000  # issue 2: at least 10,000 mutated ELFs through load(), translation and both engines
SLICE = 3000

SOURCES = [
    r'''
static unsigned char buf[256];
SF_MAIN sf_i64 main(void) {
    sf_u64 h = 1469598103934665603ULL;
    for (int i = 0; i < 256; i++) buf[i] = (unsigned char)(i * 7 + 3);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 256; i++) { h ^= buf[i]; h *= 1099511628211ULL; }
    return (sf_i64)(h >> 1);
}''',
    r'''
static int a[64];
static const char msg[] = "mutations welcome";
__attribute__((noinline)) static int mix(int x, int y) { return (x * 31) ^ (y >> 3) ^ (x / (y | 1)); }
SF_MAIN sf_i64 main(void) {
    int s = 0;
    for (int i = 0; i < 64; i++) a[i] = mix(i, 64 - i) + msg[i % 17];
    for (int i = 1; i < 64; i++) { int v = a[i], j = i - 1; while (j >= 0 && a[j] > v) { a[j + 1] = a[j]; j--; } a[j + 1] = v; }
    for (int i = 0; i < 64; i++) s = s * 3 + a[i];
    return s + (int)sf_now_mono_ms();
}''',
    r'''
struct rec { sf_u64 k; int v; short w; char c; };
static struct rec recs[16];
static struct rec out[16];
SF_MAIN sf_i64 main(void) {
    sf_u64 t = 0;
    for (int i = 0; i < 16; i++) { recs[i].k = (sf_u64)i * 0x9E3779B97F4A7C15ULL; recs[i].v = -i; recs[i].w = (short)(i << 9); recs[i].c = (char)i; }
    __builtin_memcpy(out, recs, sizeof recs);
    for (int i = 0; i < 16; i++) t += out[i].k % 1000 + (sf_u64)(sf_i64)out[i].v + (sf_u64)out[i].w + (sf_u64)out[i].c;
    __sync_fetch_and_add(&out[3].k, t);
    return (sf_i64)(t ^ out[3].k);
}''',
]


def code_ranges(elf: bytes) -> list[tuple[int, int]]:
    import io

    f = ELFFile(io.BytesIO(elf))
    return [(s["sh_offset"], s["sh_size"]) for s in f.iter_sections()
            if s["sh_flags"] & 0x4 and s["sh_size"]]


def mutate(rng: random.Random, elf: bytes, ranges: list[tuple[int, int]]) -> bytes:
    data = bytearray(elf)
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.85:
            off, size = rng.choice(ranges)
            pos = off + rng.randrange(size)
        else:
            pos = rng.randrange(len(data))
        data[pos] = rng.randrange(256) if rng.random() < 0.5 else data[pos] ^ (1 << rng.randrange(8))
    return bytes(data)


def bounded(program: Any) -> Outcome | None:
    """Run to exit or fault within 6 slices; None if the guest is still running (then it is stopped)."""
    try:
        return run(program, max_preempts=6, env=Env())
    except AssertionError as exc:
        if "did not finish" in str(exc):
            return None
        raise


def check(elf: bytes) -> str:
    """'refused', 'running', 'agree' — or raises on an escape or a disagreement."""
    try:
        programs = [load(elf, engine=e, slice_insns=SLICE) for e in ("interp", "translate")]
    except InvalidObject:
        return "refused"
    a, b = bounded(programs[0]), bounded(programs[1])
    if a is None or b is None:
        return "running"
    assert a.comparable() == b.comparable(), (a.r0, b.r0, a.fault, b.fault)
    return "agree"


@pytest.mark.timeout(600)
def test_mutated_elfs_never_escape_and_agree(compile_c: Any) -> None:
    for saved in sorted(CORPUS.glob("*.elf")):
        check(saved.read_bytes())
    seeds = [compile_c("#include <wakeful.h>\n" + src) for src in SOURCES]
    for seed in seeds:
        assert check(seed) == "agree"
    rng = random.Random(SEED)
    tally = {"refused": 0, "running": 0, "agree": 0}
    for n in range(MUTATIONS):
        seed = seeds[n % len(seeds)]
        blob = mutate(rng, seed, code_ranges(seed))
        try:
            tally[check(blob)] += 1
        except BaseException:
            (CORPUS / f"mutated-{SEED:x}-{n}.elf").write_bytes(blob)
            raise
        if n % 500 == 499:
            clear_caches()  # keep the program and shape caches from growing with refused-free junk
    assert tally["agree"] > MUTATIONS // 10 and tally["refused"] > MUTATIONS // 10, tally
