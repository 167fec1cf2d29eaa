"""clang -O2 -mcpu=v4 objects through the oracle (its own ELF reader, linker and layout) and both engines
(issue 14): signed/unsigned division and modulo in 32 and 64 bits, shifts, byte swaps, sign extension,
atomics, register-indexed stack arrays filled back to front, calls passing stack pointers, struct copies
(memcpy/memset helpers), string literals in .rodata.str1.1, pointer arrays with R_BPF_64_ABS64 and
sections aligned beyond 8."""

from __future__ import annotations

from collections.abc import Callable

import oracle_ebpf as oracle
import oracle_glue as glue
import pytest

ARITH = r"""
#include <wakeful.h>

typedef unsigned long long u64;
typedef long long s64;
typedef unsigned int u32;
typedef int s32;

static volatile u64 in[] = {0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff,
                            0x7fffffff, 0x80000000, 0xffffffff, 0x100000000, 0x7fffffffffffffffull,
                            0x8000000000000000ull, 0xffffffffffffffffull, 0xfffffffffffffff9ull,
                            0x123456789abcdef0ull, 0xffffffff80000000ull};
#define N (sizeof in / sizeof in[0])
u64 out[N * N * 2];
u64 at;

static void put(u64 v) { out[at++ % (sizeof out / sizeof out[0])] = v; }

SF_MAIN s64 main(void) {
    u64 sum = 0;
    for (unsigned i = 0; i < N; i++) {
        u64 a = in[i];
        put(__builtin_bswap16((unsigned short)a));
        put(__builtin_bswap32((u32)a));
        put(__builtin_bswap64(a));
        put((u64)(s64)(signed char)a);
        put((u64)(s64)(short)a);
        put((u64)(s64)(s32)a);
        put((u32)(s32)(signed char)a);
        for (unsigned j = 0; j < N; j++) {
            u64 b = in[j];
            u64 r = a + b * 3 - (a ^ b);
            r ^= a << (b & 63);
            r += a >> (b & 63);
            r += (u64)((s64)a >> (b & 63));
            r ^= (u32)a << (b & 31);
            r += (u32)((s32)a >> (b & 31));
            if (b) {
                r += a / b + a % b;
                r ^= (u32)a / (u32)b + (u32)a % (u32)b;
            }
            if (b && !((s64)a == (s64)0x8000000000000000ull && (s64)b == -1)) {
                r += (u64)((s64)a / (s64)b);
                r ^= (u64)((s64)a % (s64)b);
            }
            if ((u32)b && !((s32)a == (s32)0x80000000 && (s32)b == -1)) {
                r += (u32)((s32)a / (s32)b);
                r ^= (u32)((s32)a % (s32)b);
            }
            r += (s64)a < (s64)b ? 1 : 0;
            r += (s32)a < (s32)b ? 2 : 0;
            r += a < b ? 4 : 0;
            r += (u32)a <= (u32)b ? 8 : 0;
            put(r);
            sum += r;
        }
    }
    return (s64)sum;
}
"""

MEMORY = r"""
#include <wakeful.h>

typedef unsigned long long u64;
typedef long long s64;

struct rec { u64 a; int b; short c; signed char d; };
const char *names[] = {"alpha", "beta", "gamma-delta"};  /* .data with R_BPF_64_ABS64 */
static volatile int pick = 1;
static const u64 table[8] = {1, 1, 2, 3, 5, 8, 13, 21};
u64 counter;
unsigned int counter32;
struct rec saved[4];
u64 results[32];
static volatile int n_in = 24;
static volatile int neg_in = -3;

__attribute__((noinline)) static u64 fill(u64 *arr, int n, int step, struct rec *r, const char *s) {
    for (int i = n - 1; i >= 0; i--)  /* back to front, register-indexed */
        arr[i] = (u64)(i * step) ^ table[i & 7];
    u64 t = 0;
    for (int i = 0; i < n; i++)
        t = t * 31 + arr[i];
    while (*s)
        t = t * 7 + (unsigned char)*s++;
    r->a = t;
    r->b = -n;
    r->c = (short)(t >> 3);
    r->d = (signed char)-step;
    return t;
}

__attribute__((noinline)) static u64 leaf(u64 a, u64 b, u64 c, u64 d, u64 e) {
    return a * 1 + b * 2 + c * 3 + d * 4 + e * 5;
}

__attribute__((noinline)) static u64 middle(u64 x, int i) {
    u64 local[6];
    for (int k = 0; k < 6; k++)
        local[k] = x + (u64)k * (u64)i;
    return leaf(local[0], local[1], local[2], local[3], local[4]) + local[5];
}

SF_MAIN s64 main(void) {
    u64 arr[40];
    struct rec r, copy;
    int n = n_in;
    u64 t = 0;
    for (int i = 0; i < 3; i++) {
        t += fill(arr, n - i, i + neg_in, &r, names[(i + pick) % 3]);
        memcpy(&copy, &r, sizeof r);
        saved[i] = copy;
        results[i] = (u64)(s64)copy.d + (u64)(s64)copy.c + (u64)(s64)copy.b;
    }
    memset(&saved[3], 0xa5, sizeof saved[3]);
    for (int i = 0; i < 8; i++) {
        results[8 + i] = __sync_fetch_and_add(&counter, (u64)i * 0x100000001ull);
        results[16 + i] = __sync_fetch_and_xor(&counter32, (unsigned)(i * 0x9e3779b9u));
        __sync_fetch_and_or(&counter, 1ull << (i * 7));
        __sync_fetch_and_and(&counter32, ~(1u << i));
    }
    results[24] = __sync_val_compare_and_swap(&counter, counter, 77);
    results[25] = __sync_val_compare_and_swap(&counter, 76, 99);
    results[26] = __atomic_exchange_n(&counter32, 0xdeadbeefu, __ATOMIC_SEQ_CST);
    results[27] = __sync_val_compare_and_swap(&counter32, 0xdeadbeefu, 5u);
    results[28] = middle(t, neg_in);
    results[29] = arr[n - 1] + arr[0];
    return (s64)(t ^ results[28]);
}
"""

# sections aligned to 32/64/128 (vm.md §5: R rounded to the largest writable alignment), ABS64 pointers
ALIGN = r"""
#include <wakeful.h>
typedef unsigned long long u64;
static const char greeting[] = "hello, oracle";
static const u64 big[4] __attribute__((aligned(32))) = {1, 2, 3, 4};
u64 wide[8] __attribute__((aligned(64))) = {9, 8, 7};
static u64 zeros[16] __attribute__((aligned(128)));
unsigned char small = 3;
const u64 *ptrs[2] = {&big[1], &wide[2]};
static volatile int idx = 1;
__attribute__((noinline)) static u64 sum(const u64 *p, int n) { u64 t = 0; for (int i = 0; i < n; i++) t = t * 3 + p[i]; return t; }
SF_MAIN long long main(void) {
    zeros[idx] = (u64)&zeros[idx + 1] ^ (u64)&wide[0] ^ (u64)greeting;
    wide[idx + 3] = *ptrs[idx] + *ptrs[0] + (u64)(unsigned long)&small;
    small += greeting[idx];
    return (long long)(sum(big, 4) + sum(wide, 8) + sum(zeros, 16) + (u64)&big[0]);
}
"""


@pytest.mark.parametrize(("source", "forms"), [
    (ARITH, {"alu64.sdiv.x", "alu32.sdiv.x", "alu32.div.x", "bswap16", "bswap64", "alu64.movsx8.x", "jmp32.jslt.x"}),
    (MEMORY, {"call.local", "call.helper", "atomic.dw.cmpxchg", "atomic.w.xchg", "ldx.memsx.b", "stx.mem.h"}),
    (ALIGN, {"call.local", "ld_imm64", "ldx.mem.b"}),
], ids=["arith", "memory", "align"])
def test_clang_objects_agree_with_the_oracle(compile_c: Callable[[str], bytes], source: str, forms: set[str]) -> None:
    seen: set[str] = set()
    three = glue.run_elf(compile_c(source), coverage=seen)
    assert three.agree(), three.why()
    assert three.oracle[1] is None and three.steps > 30
    assert forms <= seen, forms - seen
    assert seen <= oracle.all_variants() | oracle.all_edge_tags()
