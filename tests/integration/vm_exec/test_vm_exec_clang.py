"""Clang-built programs run in both engines and agree (vm.md §9.2 "clang-built programs"), including
kernels like the five guest-CPU kernels of benchmarks.md §1.5, whose exact instruction counts come from
the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "vm_exec"))

from vmexec_kit import run  # noqa: E402

from wakeful.vm import load  # noqa: E402

pytestmark = pytest.mark.integration

KERNELS = {
    "fnv": r'''
static unsigned char buf[4096];
volatile sf_u64 iters = ITERS;
SF_MAIN sf_i64 main(void) {
    for (int i = 0; i < 4096; i++) buf[i] = (unsigned char)(i * 7);
    sf_u64 h = 0;
    for (sf_u64 k = 0; k < iters; k++) {
        sf_u64 x = 1469598103934665603ULL;
        for (int i = 0; i < 4096; i++) { x ^= buf[i]; x *= 1099511628211ULL; }
        h += x;
    }
    return (sf_i64)h;
}''',
    "search": r'''
static unsigned char hay[4096];
static unsigned char needle[16];
volatile sf_u64 iters = ITERS;
SF_MAIN sf_i64 main(void) {
    for (int i = 0; i < 4096; i++) hay[i] = (unsigned char)(i * 13 + (i >> 5));
    for (int i = 0; i < 16; i++) needle[i] = hay[4000 + i];
    sf_i64 found = 0;
    for (sf_u64 k = 0; k < iters; k++) {
        for (int i = 0; i + 16 <= 4096; i++) {
            int j = 0;
            while (j < 16 && hay[i + j] == needle[j]) j++;
            if (j == 16) { found += i; break; }
        }
    }
    return found;
}''',
    "fill": r'''
static unsigned int buf[1024];
volatile sf_u64 iters = ITERS;
SF_MAIN sf_i64 main(void) {
    sf_u64 sum = 0;
    for (sf_u64 k = 0; k < iters; k++) {
        for (int i = 0; i < 1024; i++) buf[i] = (unsigned int)(i * 2654435761u + k);
        for (int i = 0; i < 1024; i++) sum += buf[i];
    }
    return (sf_i64)sum;
}''',
    "sort": r'''
static unsigned int a[256];
volatile sf_u64 iters = ITERS;
SF_MAIN sf_i64 main(void) {
    sf_u64 s = 0;
    for (sf_u64 k = 0; k < iters; k++) {
        unsigned int x = 12345 + (unsigned int)k;
        for (int i = 0; i < 256; i++) { x = x * 1103515245u + 12345u; a[i] = x; }
        for (int i = 1; i < 256; i++) {
            unsigned int v = a[i]; int j = i - 1;
            while (j >= 0 && a[j] > v) { a[j + 1] = a[j]; j--; }
            a[j + 1] = v;
        }
        s += a[0] + a[255];
    }
    return (sf_i64)s;
}''',
    "itoa": r'''
static char out[32];
volatile sf_u64 iters = ITERS;
SF_MAIN sf_i64 main(void) {
    sf_u64 total = 0;
    for (sf_u64 k = 0; k < iters; k++) {
        sf_u64 v = 0x9E3779B97F4A7C15ULL + k;
        for (int n = 0; n < 1000; n++) {
            int len = 0;
            sf_u64 x = v;
            do { out[len++] = (char)('0' + x % 10); x /= 10; } while (x);
            total += len + out[0];
            v = v * 6364136223846793005ULL + 1442695040888963407ULL;
        }
    }
    return (sf_i64)total;
}''',
}

PROGRAMS = {
    "signed-arithmetic": r'''
volatile sf_i64 seeds[8] = {-7, 7, -9223372036854775807LL - 1, -1, 0, 123456789, -2147483648LL, 3};
static sf_i64 out[64];
SF_MAIN sf_i64 main(void) {
    int n = 0;
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 8; j++) {
            sf_i64 a = seeds[i], b = seeds[j];
            if (b != 0 && !(a == -9223372036854775807LL - 1 && b == -1)) out[n++ % 64] ^= a / b + a % b;
            int a32 = (int)a, b32 = (int)b;
            if (b32 != 0 && !(a32 == -2147483647 - 1 && b32 == -1)) out[n++ % 64] += a32 / b32 - a32 % b32;
            out[n++ % 64] += (a >> (j * 9 % 64)) + (sf_i64)((sf_u64)a >> (i * 7 % 64)) + (a32 << (j % 32));
        }
    }
    sf_i64 h = 0;
    for (int i = 0; i < 64; i++) h = h * 31 + out[i];
    return h;
}''',
    "structs-switch-calls": r'''
struct item { unsigned char kind; short weight; int value; sf_u64 tag; };
static struct item items[32];
static struct item copy[32];
__attribute__((noinline)) static sf_i64 score(const struct item *it, int bias) {
    switch (it->kind % 6) {
    case 0: return it->value * 3 + bias;
    case 1: return -it->weight;
    case 2: return (sf_i64)(it->tag >> 7);
    case 3: return it->value ^ it->weight;
    case 4: return bias - it->value;
    default: return 17;
    }
}
__attribute__((noinline)) static sf_i64 total(const struct item *v, int n, int bias) {
    sf_i64 t = 0;
    for (int i = 0; i < n; i++) t += score(&v[i], bias + i);
    return t;
}
SF_MAIN sf_i64 main(void) {
    for (int i = 0; i < 32; i++) {
        items[i].kind = (unsigned char)(i * 5);
        items[i].weight = (short)(i * -1000);
        items[i].value = i * 77777 - 1000000;
        items[i].tag = 0xfedcba9876543210ULL * (sf_u64)(i + 1);
    }
    __builtin_memcpy(copy, items, sizeof items);
    copy[3].kind = 1;
    return total(items, 32, 5) * 3 + total(copy, 32, -2) + (sf_i64)sf_now_mono_ms();
}''',
    "atomics-and-globals": r'''
static sf_u64 counter;
static unsigned int small;
static const char text[] = "wakeful guest text";
SF_MAIN sf_i64 main(void) {
    sf_u64 old = 0;
    for (int i = 0; i < 50; i++) {
        old += __sync_fetch_and_add(&counter, (sf_u64)i);
        __sync_fetch_and_or(&small, 1u << (i % 32));
        __sync_fetch_and_xor(&counter, 0x55);
        sf_u64 expect = counter;
        __sync_val_compare_and_swap(&counter, expect, expect + 3);
    }
    int h = 0;
    for (unsigned i = 0; i < sizeof text; i++) h = h * 33 + text[i];
    return (sf_i64)(old + counter + small + (sf_u64)h);
}''',
}


def source(body: str) -> str:
    return "#include <wakeful.h>\n" + body


def both_engines(elf: bytes) -> tuple[Any, Any]:
    a = run(load(elf, engine="interp", slice_insns=5000))
    b = run(load(elf, engine="translate", slice_insns=5000))
    assert a.comparable() == b.comparable(), (a.r0, b.r0, a.fault, b.fault)
    assert a.fault is None and a.r0 is not None
    return a, b


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_clang_program_agrees(name: str, compile_c: Any) -> None:
    both_engines(compile_c(source(PROGRAMS[name])))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_cpu_kernel_agrees_and_counts_exactly(name: str, compile_c: Any) -> None:
    # benchmarks.md §1.5: the interpreter's retired count is exact and deterministic; kernels whose work
    # does not depend on the iteration number count linearly, count(k) = a + b·k
    counts = []
    for k in (1, 2, 3):
        a, _ = both_engines(compile_c(source(KERNELS[name].replace("ITERS", str(k)))))
        counts.append(a.retired)
    again = run(load(compile_c(source(KERNELS[name].replace("ITERS", "1"))), engine="interp"))
    assert again.retired == counts[0]
    assert counts[0] < counts[1] < counts[2]
    if name in ("fnv", "search", "fill"):
        assert counts[2] - counts[1] == counts[1] - counts[0]
