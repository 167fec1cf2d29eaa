"""wakeful.h: every ABI-1 helper declared with its exact arity (sdk.md §9), and what clang makes of it.

Compiles real programs with the build flags of build.md §2.1 and inspects the objects with pyelftools.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from wakeful import sdk
from wakeful.vm.guest import HELPER_ARITY

INCLUDE = Path(__file__).resolve().parents[3] / "src" / "wakeful" / "sdk" / "include"
R_BPF_64_32 = 10
Compile = Callable[..., bytes]

# one call of every helper (sdk.md §9); memmove is an extension, so this includes wakeful.h
EVERY_HELPER = r"""
#include <wakeful.h>
static char buf[64];
static sf_i64 out;
SF_MAIN sf_i64 main(void) {
    sf_i64 acc = 0;
    acc += sf_sleep_ms(1) + sf_yield() + (sf_i64)sf_now_mono_ms() + (sf_i64)sf_now_unix_ms();
    sf_handle c = sf_config();
    acc += sf_event_next(0);
    acc += sf_host_call_raw("cap", 3, c, 100) + sf_log_raw("hi", 2);
    sf_handle p = sf_json_parse("{}", 2);
    acc += sf_json_get_raw(p, "k", 1) + sf_json_at(p, 0) + sf_json_kind(p) + sf_json_i64(p, &out);
    acc += sf_json_bool(p) + sf_json_read_string(p, buf, sizeof buf);
    acc += sf_json_string_equals_raw(p, "k", 1, "v", 1);
    acc += sf_json_object() + sf_json_array() + sf_json_null() + sf_json_string_raw("s", 1);
    acc += sf_json_number(5) + sf_json_boolean(1) + sf_json_set_raw(p, "k", 1, c);
    acc += sf_json_push(p, c) + sf_json_dump(p);
    sf_handle b = sf_bytes(buf, 4);
    acc += sf_bytes_len(b) + sf_bytes_read(b, 0, buf, 8);
    memcpy(buf, buf + 16, 8);
    memset(buf, 1, 8);
    memmove(buf + 1, buf, 8);
    acc += memcmp(buf, buf + 8, 8);
    acc += sf_drop(c);
    return acc;
}
"""


def _relocations(elf: bytes) -> list[tuple[str, int, str]]:
    """(section patched, relocation type, symbol name) for every relocation."""
    f = ELFFile(io.BytesIO(elf))
    found = []
    for sec in f.iter_sections():
        if isinstance(sec, RelocationSection):
            target = f.get_section(sec["sh_info"]).name
            symtab = f.get_section(sec["sh_link"])
            for rel in sec.iter_relocations():
                sym = symtab.get_symbol(rel["r_info_sym"])
                found.append((target, rel["r_info_type"], sym.name))
    return found


def _header_declarations(text: str) -> dict[str, int]:
    decls: dict[str, int] = {}
    for m in re.finditer(r"^extern [^;(]*?\b(\w+)\(([^)]*)\);", text, re.M | re.S):
        params = m.group(2).strip()
        decls[m.group(1)] = 0 if params == "void" else params.count(",") + 1
    return decls


def test_header_declares_exactly_the_helper_table() -> None:
    # sdk.md §9.8: the names and arities the VM binds
    assert _header_declarations(sdk.header_text()) == HELPER_ARITY


def test_spinfoam_header_declares_only_the_spinfoam_api() -> None:
    # issue 21: spinfoam.h is spinfoam's ABI 1 without wakeful's extensions (memmove, wf_*, WAKEFUL_SDK_*)
    text = sdk.spinfoam_header_text()
    assert _header_declarations(text) == {k: v for k, v in HELPER_ARITY.items() if k != "memmove"}
    code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    assert not re.search(r"\b(wf_\w+|WF_OK|WAKEFUL_\w+|memmove)\b", code)
    assert "#ifndef SPINFOAM_H" in code and "#include" not in code


SPINFOAM_OWN_NAMES = r"""
#include "spinfoam.h"
/* names wakeful.h declares as extensions; spinfoam programs may define them themselves */
void *memmove(void *dest, const void *source, unsigned long n) {
    char *d = dest;
    const char *s = source;
    if (d < s)
        for (unsigned long i = 0; i < n; i++) d[i] = s[i];
    else
        for (unsigned long i = n; i > 0; i--) d[i - 1] = s[i - 1];
    return dest;
}
static int wf_str_eq(const char *a, const char *b) { return a[0] == b[0]; }
static sf_i64 wf_json_get_i64(sf_i64 x) { return x + 1; }
#define WF_OK 3
static char buf[8] = "abcdefg";
SF_MAIN sf_i64 main(void) {
    memmove(buf + 1, buf, 4);
    return wf_str_eq(buf, "a") + wf_json_get_i64(WF_OK);
}
"""


def test_programs_defining_extension_names_compile_against_spinfoam_h(compile_c: Compile) -> None:
    # issue 21 item 2: on main spinfoam.h pulled in wakeful.h ("static declaration follows non-static")
    assert compile_c(SPINFOAM_OWN_NAMES)[:4] == b"\x7fELF"


def test_self_contained_wakeful_header_compiles_alone(compile_c: Compile, tmp_path: Path) -> None:
    # the printed wakeful.h (spinfoam.h inlined) is the only header a reader needs
    (tmp_path / "wakeful.h").write_text(sdk.header_text())
    src = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { char b[4]; memmove(b, b + 1, 2); return wf_str_eq(b, b); }\n"
    elf = compile_c(src, extra_flags=("-I", str(tmp_path)))
    assert "#include" not in re.sub(r"/\*.*?\*/", "", sdk.header_text(), flags=re.S)
    assert elf[:4] == b"\x7fELF"


def test_header_has_no_data_definitions() -> None:
    # sdk.md §1: declarations and static inline wrappers only
    text = sdk.header_text()
    assert not re.search(r"^\s*static\s+(?!inline)", text, re.M)
    assert "#ifndef WAKEFUL_H" in text and "#define WAKEFUL_H" in text


def test_every_helper_is_a_named_call_relocation(compile_c: Compile) -> None:
    # sdk.md §12: each call is a BPF call with an R_BPF_64_32 relocation against the helper's name
    relocs = _relocations(compile_c(EVERY_HELPER))
    called = {name for sec, kind, name in relocs if kind == R_BPF_64_32 and sec == "spinfoam.main"}
    assert called == set(HELPER_ARITY)


def test_helpers_are_undefined_symbols(compile_c: Compile) -> None:
    f = ELFFile(io.BytesIO(compile_c(EVERY_HELPER)))
    syms = {s.name: s for s in f.get_section_by_name(".symtab").iter_symbols()}
    for name in HELPER_ARITY:
        assert syms[name]["st_shndx"] == "SHN_UNDEF", name


def test_sf_main_lands_in_spinfoam_main(compile_c: Compile) -> None:
    # sdk.md §2, §7
    f = ELFFile(io.BytesIO(compile_c(EVERY_HELPER)))
    main = next(s for s in f.get_section_by_name(".symtab").iter_symbols() if s.name == "main")
    assert f.get_section(main["st_shndx"]).name == "spinfoam.main"
    assert main["st_info"]["type"] == "STT_FUNC"


def test_wrappers_are_inlined_not_symbols(compile_c: Compile) -> None:
    # sdk.md §10-11: wrappers compile to raw helper calls and leave no symbol behind
    src = r"""
    #include <wakeful.h>
    static char buf[32];
    SF_MAIN sf_i64 main(void) {
        sf_handle c = sf_config();
        sf_i64 n = 0;
        sf_log("x");
        sf_host_call("agent.notify", c, 10000);
        sf_json_set(c, "k", sf_json_string("v"));
        n += sf_json_string_equals(c, "k", "v") + wf_json_get_i64(c, "n", &n);
        n += wf_json_get_bool(c, "b") + wf_json_get_str(c, "s", buf, sizeof buf);
        n += (sf_i64)wf_u64_to_dec(42, buf, sizeof buf) + (sf_i64)wf_i64_to_dec(-42, buf, sizeof buf);
        n += wf_str_eq(buf, "-42") + WF_OK(n);
        sf_drop(sf_json_get(c, "k"));
        return n;
    }
    """
    elf = compile_c(src)
    f = ELFFile(io.BytesIO(elf))
    names = {s.name for s in f.get_section_by_name(".symtab").iter_symbols()}
    for wrapper in ("sf_strlen", "sf_log", "sf_host_call", "sf_json_get", "sf_json_set", "wf_str_eq"):
        assert wrapper not in names
    called = {n for _, kind, n in _relocations(elf) if kind == R_BPF_64_32}
    assert called <= set(HELPER_ARITY)
    assert {"sf_log_raw", "sf_host_call_raw", "sf_json_get_raw", "sf_json_i64", "sf_drop"} <= called


@pytest.mark.parametrize("helper", ["memcpy", "memset", "memcmp", "memmove"])
def test_memory_helpers_stay_calls(compile_c: Compile, helper: str) -> None:
    # build.md §2.1 (-fno-builtin): small constant sizes are not expanded inline
    call = {
        "memcpy": "memcpy(a, b, 8)",
        "memset": "memset(a, 0, 8)",
        "memcmp": "r = memcmp(a, b, 8)",
        "memmove": "memmove(a, b, 8)",
    }[helper]
    src = f"""
    #include <wakeful.h>
    static char a[16], b[16];
    SF_MAIN sf_i64 main(void) {{ int r = 0; {call}; return r + a[0]; }}
    """
    assert ("spinfoam.main", R_BPF_64_32, helper) in _relocations(compile_c(src))


def test_spinfoam_program_compiles_unchanged(compile_c: Compile) -> None:
    # sdk.md intro: a spinfoam.h program (ABI 1 names only) compiles unchanged
    src = r"""
    #include "spinfoam.h"
    SF_INLINE sf_i64 check(sf_handle ev) {
        return sf_json_string_equals(ev, "topic", "tick") == 1 ? 1 : 0;
    }
    SF_MAIN sf_i64 main(void) {
        sf_i64 seen = 0;
        for (;;) {
            sf_handle ev = sf_event_next(60000);
            if (ev == SF_TIMEOUT) continue;
            if (ev == SF_CLOSED) return 0;
            if (ev < 0) return ev;
            seen += check(ev);
            sf_drop(ev);
            if (seen > 3) {
                sf_handle p = sf_json_object();
                sf_json_set(p, "text", sf_json_string("many ticks"));
                sf_handle r = sf_host_call("agent.notify", p, 10000);
                if (r > 0) sf_drop(r);
                sf_drop(p);
                seen = 0;
            }
        }
    }
    """
    assert compile_c(src, name="loop.c")[:4] == b"\x7fELF"


def test_headers_are_idempotent_and_coexist(compile_c: Compile) -> None:
    src = r"""
    #include <wakeful.h>
    #include <spinfoam.h>
    #include <wakeful.h>
    #include <stdint.h>
    #include <stddef.h>
    #include <stdbool.h>
    #include <stdint.h>
    _Static_assert(WAKEFUL_SDK_ABI == 1, "abi");
    _Static_assert(WAKEFUL_SDK_EXT >= 1, "ext");
    _Static_assert(sizeof(sf_u64) == 8 && sizeof(sf_i64) == 8 && sizeof(sf_handle) == 8, "sf");
    _Static_assert(sizeof(int8_t) == 1 && sizeof(int16_t) == 2 && sizeof(int32_t) == 4, "i");
    _Static_assert(sizeof(int64_t) == 8 && sizeof(uint64_t) == 8 && sizeof(uintptr_t) == 8, "i64");
    _Static_assert(sizeof(size_t) == 8 && sizeof(ptrdiff_t) == 8, "size");
    _Static_assert(UINT64_MAX == 18446744073709551615UL && INT64_MIN < 0 && INT32_MAX == 2147483647, "lim");
    _Static_assert(SIZE_MAX == UINT64_MAX && UINT32_C(1) == 1u && INT64_C(-1) == -1, "c");
    _Static_assert(SF_INVALID == -1 && SF_LIMIT == -2 && SF_TIMEOUT == -3, "status");
    _Static_assert(SF_DENIED == -4 && SF_HOST_ERROR == -5 && SF_CLOSED == -6, "status2");
    _Static_assert(SF_NULL == 0 && SF_BOOL == 1 && SF_NUMBER == 2, "kind");
    _Static_assert(SF_STRING == 3 && SF_ARRAY == 4 && SF_OBJECT == 5, "kind2");
    struct pair { int32_t a; int64_t b; };
    _Static_assert(offsetof(struct pair, b) == 8, "offsetof");
    SF_MAIN sf_i64 main(void) { bool ok = true; void *p = NULL; return ok && p == NULL ? 0 : 1; }
    """
    assert compile_c(src)[:4] == b"\x7fELF"


def test_statuses_are_signed_64_bit(compile_c: Compile) -> None:
    # a status compared with an sf_handle must survive as a negative 64-bit value
    src = r"""
    #include <wakeful.h>
    _Static_assert(SF_CLOSED < 0 && sizeof(SF_CLOSED) == 8, "signed 64");
    _Static_assert((sf_handle)SF_LIMIT == -2LL, "cast");
    SF_MAIN sf_i64 main(void) { return SF_CLOSED; }
    """
    assert compile_c(src)[:4] == b"\x7fELF"
