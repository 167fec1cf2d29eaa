"""S11 (vm.md §9, decisions-vm-front.md): the loader accepts only plain section and symbol names.

Section names and symbol names use ``[A-Za-z0-9_.$-]``; a source-file symbol (STT_FILE) may hold any
printable text. Everything else is ``ELF_STRTAB``, and the message never echoes the name's bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from wakeful.errors import InvalidObject
from wakeful.vm import asm, isa, load

HOSTILE = ["main\n            __import__('os').system('id')", "a b", "a'b", 'a"b', "a(b)", "a\\b", "a#b", "a;b",
           "caf\u00e9", "a\tb", "a\u2028b", "a\x7fb", "a/b", "a+b", "a:b"]
CLANG_NAMES = ["_start", "$dollar", "helper_fn.counter", "main.calls", "x-y", "A9_.$-z"]
SECTION_NAMES = [".text", ".text.hot", "xdp", "prog-v2", "tc.ingress"]
DATA_SECTIONS = [".rodata", ".rodata.str1.1", ".rodata.cst16", ".data", ".data.rel.ro", ".bss.counters"]


def rule_of(data: bytes) -> str | None:
    try:
        load(data)
    except InvalidObject as exc:
        assert "\n" not in str(exc) and "__import__" not in str(exc)
        return exc.rule
    return None


def call_into(section: str) -> bytes:
    return asm.elf([asm.Func("main", "call g\nexit"), asm.Func("g", "r0 = 5\nexit", section=section)])


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_symbol_names_are_refused(name: str) -> None:
    assert rule_of(asm.elf([asm.Func(name, "r0 = 7\nexit")])) == "ELF_STRTAB"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_section_names_are_refused(name: str) -> None:
    assert rule_of(call_into(name)) == "ELF_STRTAB"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_of_ignored_sections_and_undefined_symbols_are_refused(name: str) -> None:
    ignored = asm.Section(name, flags=0, data=b"x")
    assert rule_of(asm.elf([asm.Func("main", "r0 = 7\nexit")], extra_sections=[ignored])) == "ELF_STRTAB"
    helper = asm.Symbol(name)  # an undefined symbol nobody uses
    assert rule_of(asm.elf([asm.Func("main", "r0 = 7\nexit")], extra_symbols=[helper])) == "ELF_STRTAB"


@pytest.mark.parametrize("name", CLANG_NAMES)
def test_names_clang_emits_are_accepted(name: str) -> None:
    call = isa.encode(isa.OP_CALL, src=isa.PSEUDO_CALL, imm=-1) + isa.encode(isa.OP_EXIT)
    main = asm.Func("main", call, relocs=[asm.Reloc(0, asm.R_BPF_64_32, name)])
    program = load(asm.elf([main, asm.Func(name, "r0 = 5\nexit")]))
    assert [f.name for f in program.code.functions] == ["main", name]


@pytest.mark.parametrize("section", SECTION_NAMES)
def test_code_section_names_are_accepted(section: str) -> None:
    assert rule_of(call_into(section)) is None


@pytest.mark.parametrize("section", DATA_SECTIONS)
def test_data_section_names_are_accepted(section: str) -> None:
    flags = asm.SHF_ALLOC | (asm.SHF_WRITE if section.startswith((".data", ".bss")) else 0)
    extra = asm.Section(section, flags=flags, data=b"abcdefgh")
    assert rule_of(asm.elf([asm.Func("main", "r0 = 7\nexit")], extra_sections=[extra])) is None


@pytest.mark.parametrize(("name", "rule"), [("my prog-v2.c", None), ("caf\u00e9 (copy).c", None),
                                            ("guest.c\n__import__('os')", "ELF_STRTAB"),
                                            ("a\u2028b.c", "ELF_STRTAB"), ("a\x1bb.c", "ELF_STRTAB")])
def test_file_symbols_hold_printable_text(name: str, rule: str | None) -> None:
    file_sym = asm.Symbol(name, type=4, bind=asm.STB_LOCAL, section=0xFFF1)  # STT_FILE, SHN_ABS
    assert rule_of(asm.elf([asm.Func("main", "r0 = 7\nexit")], extra_symbols=[file_sym])) == rule


def test_clang_debug_output_with_a_spaced_file_name_loads(compile_c: Callable[..., bytes]) -> None:
    """-g adds .BTF, .BTF.ext, .debug_* and their .rel sections; static locals are main.calls."""
    source = ("#include <wakeful.h>\n__attribute__((noinline)) static int $add(int x) { static int n; n += x; return n; }\n"
              "SF_MAIN sf_i64 main(void) { static int calls; calls++; return $add(calls) + 1; }\n")
    data = compile_c(source, extra_flags=("-g",), name="my prog-v2.c")
    program = load(data)
    assert {f.name for f in program.code.functions} >= {"main", "$add"}
