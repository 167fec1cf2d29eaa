"""Clang-built objects through the loader: real programs load (cross-checked with pyelftools), and the
load-time adversarial programs of vm.md §9.1 (items 5, 10, 11, 13) are refused with code, function and pc."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from elftools.elf.elffile import ELFFile

from wakeful.errors import InvalidObject
from wakeful.vm import elf as elfmod
from wakeful.vm import loader

Compile = Callable[..., bytes]
pytestmark = pytest.mark.integration

DECLS = """
extern long sf_log_raw(const char *p, unsigned long n);
extern long sf_now_mono_ms(void);
extern long sf_sleep_ms(long ms);
extern void *memcpy(void *d, const void *s, unsigned long n);
#define MAIN __attribute__((section("spinfoam.main"))) long main(void)
#define NOINLINE __attribute__((noinline))
"""

PROGRAMS = {
    "globals_and_strings": DECLS + r"""
static const char *names[] = {"alpha", "beta", "gamma"};
int counter;
long table[4] = {1, 2, 3, 4};
NOINLINE static long walk(long x) { return names[x & 1][0] + counter; }
NOINLINE long visit(long x) {
    char buf[64];
    for (int i = 0; i < 64; i++) buf[i] = x + i;
    sf_log_raw(buf, 64);
    return walk(x);
}
MAIN { counter++; sf_log_raw("hi", 2); return visit(table[counter & 3]); }
""",
    "loops_atomics_alu32": DECLS + r"""
unsigned long hits;
struct pair { int a; int b; };
static const struct pair pairs[4] = {{1, 2}, {3, 4}, {5, 6}, {7, 8}};
MAIN {
    unsigned int acc = 0;
    for (int i = 0; i < 100; i++) {
        acc = acc * 31u + (unsigned int)pairs[i & 3].a;
        __sync_fetch_and_add(&hits, 1);
        if ((acc & 7) == 3) sf_sleep_ms(0);
    }
    long s = (signed char)acc;
    return s / 3 + (long)(acc % 7u) + __sync_val_compare_and_swap(&hits, 100, 5);
}
""",
    "switch_without_jump_tables": DECLS + r"""
MAIN {
    long x = sf_now_mono_ms();
    switch (x & 15) {
    case 0: x += 1; break; case 1: x *= 3; break; case 2: x -= 7; break; case 3: x <<= 2; break;
    case 4: x >>= 1; break; case 5: x ^= 5; break; case 6: x |= 9; break; case 7: x &= 6; break;
    case 8: x *= x; break; case 9: x += 100; break; case 10: x *= 11; break; case 11: x -= 300; break;
    default: x = 0;
    }
    char tmp[24];
    memcpy(tmp, "0123456789abcdefghijklm", 24);
    return x + tmp[x & 7];
}
""",
}


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def program(request: pytest.FixtureRequest, compile_c: Compile) -> bytes:
    return compile_c(PROGRAMS[request.param])


def test_clang_objects_load(program: bytes) -> None:
    p = loader.prepare(program, cache=None)
    assert p.report.entry == "main"
    assert p.report.instructions == len(p.code.insns) > 5
    assert ".llvm_addrsig" in p.report.ignored_sections
    assert set(p.code.helpers) <= {"sf_log_raw", "sf_now_mono_ms", "sf_sleep_ms", "memcpy"}
    assert len(p.layout.image) == p.layout.rodata_bytes + p.layout.data_bytes


def test_parser_agrees_with_pyelftools(program: bytes) -> None:
    ours = elfmod.parse(program)
    ref = ELFFile(io.BytesIO(program))
    theirs = [(s.name, s["sh_type"], s["sh_flags"], s["sh_offset"], s["sh_size"]) for s in ref.iter_sections()]
    mine = [(s.name, s.type, s.flags, s.offset, s.size) for s in ours.sections]
    assert [m[0] for m in mine] == [t[0] for t in theirs]
    assert [m[2:] for m in mine] == [t[2:] for t in theirs]
    symtab = ref.get_section_by_name(".symtab")
    ref_syms = [(s.name, s["st_value"], s["st_size"]) for s in symtab.iter_symbols()]
    assert [(ours.sym_name(s.num), s.value, s.size) for s in ours.symbols] == ref_syms
    for sec in ref.iter_sections():
        if sec["sh_type"] == "SHT_REL":
            target = sec["sh_info"]
            ref_rels = [(r["r_offset"], r["r_info_sym"], r["r_info_type"]) for r in sec.iter_relocations()]
            assert [tuple(r) for r in ours.rels.get(target, [])] == ref_rels


def test_functions_match_function_symbols(program: bytes) -> None:
    p = loader.prepare(program, cache=None)
    ref = ELFFile(io.BytesIO(program))
    funcs = {s.name for s in ref.get_section_by_name(".symtab").iter_symbols() if s["st_info"]["type"] == "STT_FUNC"}
    assert funcs <= {f.name for f in p.code.functions}


def test_stack_buffer_sets_the_frame(compile_c: Compile) -> None:
    p = loader.prepare(compile_c(PROGRAMS["globals_and_strings"]), cache=None)
    frames = {f["name"]: f["stack_frame_bytes"] for f in p.report.functions}
    # vm.md §5.1: visit indexes buf with a register (r3 = r10 - 64; r3 += r1), so its frame is the full 4,096
    assert frames["visit"] == 4096 and frames["walk"] == 0 and frames["main"] == 0
    assert p.report.call_chain == ("main", "visit", "walk")
    assert p.report.stack_bytes == 4096


def test_stack_buffer_passed_to_a_helper_sets_the_frame(compile_c: Compile) -> None:
    # a helper touches only [ptr, ptr + len) (docs/decisions-vm-frames.md): &buf[0] needs 64 bytes, not 4,096
    src = DECLS + "MAIN { char buf[64]; __builtin_memset(buf, 7, 64); sf_log_raw(buf, 64); return buf[3]; }"
    p = loader.prepare(compile_c(src), cache=None)
    assert p.report.functions[0]["stack_frame_bytes"] == 64


def refused(data: bytes, rule: str) -> str:
    with pytest.raises(InvalidObject) as info:
        loader.prepare(data, cache=None)
    assert info.value.rule == rule, info.value.message
    return info.value.reason


# -- vm.md §9.1 item 5: static r10 access at +8 and at -4,104 --


@pytest.mark.parametrize("offset", ["+ 8", "- 4104"])
def test_static_r10_outside_frame(compile_c: Compile, offset: str) -> None:
    src = DECLS + f'MAIN {{ long v; asm volatile("%0 = *(u64 *)(r10 {offset})" : "=r"(v)); return v; }}'
    reason = refused(compile_c(src), "STACK")
    assert reason.startswith(f"main+0 'r0 = *(u64 *)(r10 {offset})'")


# -- item 10: recursion (self, mutual, through a global function via R_BPF_64_32) --


def test_self_recursion(compile_c: Compile) -> None:
    src = DECLS + "NOINLINE long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\nMAIN { return fib(5); }"
    reason = refused(compile_c(src), "RECURSION")
    assert reason.startswith("fib+") and reason.endswith("recursion: main → fib → fib")


@pytest.mark.parametrize("storage", ["", "static "])
def test_mutual_recursion(compile_c: Compile, storage: str) -> None:
    src = DECLS + (
        f"{storage}long odd(long);\n"
        f"{storage}NOINLINE long even(long n) {{ return n == 0 ? 1 : odd(n - 1); }}\n"
        f"{storage}NOINLINE long odd(long n) {{ return n == 0 ? 0 : even(n - 1); }}\n"
        "MAIN { return even(sf_now_mono_ms()); }"
    )
    data = compile_c(src)
    if not storage:  # global functions are called through R_BPF_64_32 relocations
        ref = ELFFile(io.BytesIO(data))
        types = [r["r_info_type"] for r in ref.get_section_by_name(".rel.text").iter_relocations()]
        assert 10 in types
    reason = refused(data, "RECURSION")
    assert reason.startswith("odd+") and reason.endswith("recursion: main → even → odd → even")


# -- item 11: call chain of depth 8 loads, 9 is refused --


def _chain_source(depth: int) -> str:
    funcs = [f"NOINLINE long f{depth - 1}(long x) {{ return sf_now_mono_ms() + x; }}"]
    for i in range(depth - 2, 0, -1):
        funcs.append(f"NOINLINE long f{i}(long x) {{ return f{i + 1}(x * 3) + {i}; }}")
    return DECLS + "\n".join(funcs) + "\nMAIN { return f1(sf_now_mono_ms()) + 1; }"


def test_call_depth(compile_c: Compile) -> None:
    p = loader.prepare(compile_c(_chain_source(8)), cache=None)
    assert p.report.call_chain == ("main", "f1", "f2", "f3", "f4", "f5", "f6", "f7")
    reason = refused(compile_c(_chain_source(9)), "CALL_DEPTH")
    assert reason.startswith("f7+") and "'call f8'" in reason
    assert reason.endswith("main → f1 → f2 → f3 → f4 → f5 → f6 → f7 → f8")


# -- item 13: r10 writes, callx, LD ABS, numeric helper ids, jump tables --


def test_write_to_r10(compile_c: Compile) -> None:
    reason = refused(compile_c(DECLS + 'MAIN { asm volatile("r10 = 0"); return 0; }'), "REGISTER")
    assert reason.startswith("main+0 'r10 = 0'")


def test_callx(compile_c: Compile) -> None:
    src = DECLS + 'MAIN { long f = sf_now_mono_ms(); asm volatile("callx %0" :: "r"(f)); return 0; }'
    reason = refused(compile_c(src), "CALL_TARGET")
    assert "'callx r" in reason and reason.startswith("main+")


def test_ld_abs(compile_c: Compile) -> None:
    reason = refused(compile_c(DECLS + 'MAIN { asm volatile("r0 = *(u8 *)skb[0]" ::: "r0"); return 0; }'), "OPCODE")
    assert reason.startswith("main+0 ")


def test_numeric_helper_id(compile_c: Compile) -> None:
    reason = refused(compile_c(DECLS + "MAIN { return ((long (*)(long))7)(1); }"), "CALL_TARGET")
    assert "'call 7'" in reason and "link helpers by name" in reason


def test_dense_switch_with_jump_tables(compile_c: Compile) -> None:
    ops = ["+ 1", "* 3", "- 7", "<< 2", ">> 1", "^ 5", "| 9", "& 6", "* x", "+ 100", "* 11", "- 300", "<< 5",
           "^ 77", "/ 3", "% 7"]
    cases = "".join(f"case {i}: x = x {op}; break; " for i, op in enumerate(ops))
    src = DECLS + f"MAIN {{ long x = sf_now_mono_ms(); switch (x & 15) {{ {cases}}} return x; }}"
    reason = refused(compile_c(src, extra_flags=("-fjump-tables",)), "JUMP_TABLE")
    assert "rebuild with -fno-jump-tables" in reason
    loader.prepare(compile_c(src), cache=None)  # the default flags build it without tables


def test_gotox(compile_c: Compile) -> None:
    src = DECLS + 'MAIN { long x = sf_now_mono_ms(); asm volatile("gotox %0" :: "r"(x)); return x; }'
    reason = refused(compile_c(src), "JUMP_TABLE")
    assert "'gotox r" in reason and "rebuild with -fno-jump-tables" in reason
