"""Every accepted-shape rule of vm.md §2 and relocation rule of §3, each with an offending object."""

from __future__ import annotations

import struct

import pytest

from wakeful.errors import InvalidObject
from wakeful.vm import asm, loader
from wakeful.vm.asm import Func, Reloc, Section, Symbol
from wakeful.vm.isa import BASE

MAIN = "r0 = 0\nexit"
PROGBITS, NOBITS, RELA, SYMTAB = 1, 8, 4, 2
A, W, X = 0x2, 0x1, 0x4


def ok(data: bytes, **options: int) -> loader.Prepared:
    return loader.prepare(data, cache=None, **options)


def refused(data: bytes, rule: str, fragment: str = "", **options: int) -> InvalidObject:
    with pytest.raises(InvalidObject) as info:
        loader.prepare(data, cache=None, **options)
    assert info.value.rule == rule, info.value.message
    assert fragment in info.value.message
    return info.value


def plain(**kw: object) -> bytes:
    return asm.elf([Func("main", MAIN)], **kw)  # type: ignore[arg-type]


def test_minimal_object_loads() -> None:
    p = ok(plain())
    assert p.report.entry == "main" and p.report.instructions == 2
    assert p.code.functions[p.code.entry].name == "main"


# -- §2 ident and header --


@pytest.mark.parametrize(("offset", "value"), [(0, 0x7E), (4, 1), (5, 2), (6, 0), (7, 3)])
def test_ident_fields(offset: int, value: int) -> None:
    data = bytearray(plain())
    data[offset] = value
    refused(bytes(data), "ELF_HEADER")


@pytest.mark.parametrize(
    "fields",
    [{"e_type": 2}, {"e_machine": 62}, {"e_version": 0}, {"e_ehsize": 52}, {"e_shentsize": 40}],
)
def test_header_fields(fields: dict[str, int]) -> None:
    refused(asm.patch_ehdr(plain(), **fields), "ELF_HEADER")


def test_header_ignores_flags_entry_and_program_headers() -> None:
    ok(asm.patch_ehdr(plain(), e_flags=7, e_entry=0x1234, e_phoff=99))


@pytest.mark.parametrize("size", [0, 10, 63])
def test_truncated_header(size: int) -> None:
    refused(plain()[:size], "ELF_HEADER")


# -- §2 section table --


@pytest.mark.parametrize(
    "fields",
    [{"e_shnum": 0}, {"e_shnum": 129}, {"e_shoff": 1 << 20}, {"e_shoff": 8}, {"e_shstrndx": 0xFFFF},
     {"e_shstrndx": 0}, {"e_shstrndx": 60}, {"e_shstrndx": 1}],
)
def test_section_table(fields: dict[str, int]) -> None:
    refused(asm.patch_ehdr(plain(), **fields), "ELF_SECTIONS")


def test_extended_numbering_in_section_zero() -> None:
    refused(asm.patch_shdr(plain(), 0, sh_size=5), "ELF_SECTIONS")


def test_section_table_truncated_by_one_byte() -> None:
    refused(plain()[:-1], "ELF_SECTIONS")


# -- §2 strings --


def test_section_name_outside_string_table() -> None:
    refused(asm.patch_shdr(plain(), "spinfoam.main", sh_name=10_000), "ELF_STRTAB")


def test_long_names() -> None:
    ok(asm.elf([Func("m" * 256, MAIN)]))
    refused(asm.elf([Func("m" * 257, MAIN)]), "ELF_STRTAB")
    refused(asm.elf([Func("main", MAIN)], extra_sections=[Section(".x" + "y" * 300, 1, 0)]), "ELF_STRTAB")


def test_string_table_without_terminator() -> None:
    import io

    from elftools.elf.elffile import ELFFile

    data = plain()
    sh = ELFFile(io.BytesIO(data)).get_section_by_name(".shstrtab")
    # shrink .shstrtab so its last name (".shstrtab" itself) loses its NUL
    refused(asm.patch_shdr(data, ".shstrtab", sh_size=sh["sh_size"] - 1), "ELF_STRTAB")


# -- §2 symbol table --


def test_no_symbol_table() -> None:
    refused(asm.patch_shdr(plain(), ".symtab", sh_type=PROGBITS), "ELF_SYMTAB", "0 symbol tables")


def test_two_symbol_tables() -> None:
    extra = Section(".symtab2", SYMTAB, 0, bytes(24), entsize=24)
    refused(plain(extra_sections=[extra]), "ELF_SYMTAB", "2 symbol tables")


def test_symbol_entry_size() -> None:
    refused(asm.patch_shdr(plain(), ".symtab", sh_entsize=16), "ELF_SYMTAB")


def test_symbol_table_link() -> None:
    refused(asm.patch_shdr(plain(), ".symtab", sh_link=1), "ELF_SYMTAB")


def test_too_many_symbols() -> None:
    syms = [Symbol(f"s{i}", section=".data", size=1, type=1) for i in range(4096)]
    data = asm.elf([Func("main", MAIN)], data=b"x", extra_symbols=syms)
    refused(data, "ELF_SYMTAB", "4096", max_elf_bytes=1 << 20)


def test_symbol_outside_its_section() -> None:
    refused(plain(data=b"12345678", extra_symbols=[Symbol("g", 4, 8, 1, 1, ".data")]), "ELF_SYMTAB", "outside")


def test_symbol_section_index_invalid() -> None:
    refused(plain(extra_symbols=[Symbol("g", 0, 0, 1, 1, 77)]), "ELF_SYMTAB")


def test_common_symbol_refused() -> None:
    refused(plain(extra_symbols=[Symbol("g", 4, 4, 1, 1, 0xFFF2)]), "RELOC_SYMBOL", "common")


def test_extended_symbol_section_index() -> None:
    refused(plain(extra_symbols=[Symbol("g", 0, 0, 1, 1, 0xFFFF)]), "ELF_SECTIONS")


def test_misaligned_function_symbol() -> None:
    refused(plain(extra_symbols=[Symbol("odd", 4, 0, 2, 1, "spinfoam.main")]), "ELF_SYMTAB")


# -- §2 code sections --


def test_code_section_not_progbits() -> None:
    refused(plain(extra_sections=[Section(".text", NOBITS, A | X, size=8)]), "ELF_SECTION")


def test_code_section_size_not_multiple_of_8() -> None:
    refused(plain(extra_sections=[Section(".text", PROGBITS, A | X, b"\x95" + bytes(11))]), "ELF_SECTION")


def test_executable_and_writable() -> None:
    refused(asm.patch_shdr(plain(), "spinfoam.main", sh_flags=A | X | W), "ELF_SECTION", "executable and writable")


def test_empty_code_sections_are_ignored() -> None:
    p = ok(plain(extra_sections=[Section(".text", PROGBITS, A | X, b"")]))
    assert ".text" in p.report.ignored_sections


def test_code_section_limit() -> None:
    funcs = [Func("main", MAIN)] + [Func(f"f{i}", MAIN, section=f".text.{i}") for i in range(63)]
    ok(asm.elf(funcs))
    funcs.append(Func("f63", MAIN, section=".text.63"))
    refused(asm.elf(funcs), "ELF_SECTION", "64")


# -- §2 data sections --


def test_rodata_data_bss_kinds() -> None:
    extra = [Section(".rodata.str1.1", PROGBITS, A | 0x30, b"hi\0", 1),
             Section(".data.x", PROGBITS, A | W, b"\1\2", 2),
             Section(".bss.y", NOBITS, A | W, size=3, align=1)]
    p = ok(plain(rodata=b"r" * 5, data=b"d" * 8, bss=16, extra_sections=extra))
    assert p.report.image == {"rodata_bytes": 8, "data_bytes": 10, "bss_bytes": 19}


def test_nobits_without_write_refused() -> None:
    refused(plain(extra_sections=[Section(".bss.ro", NOBITS, A, size=8)]), "ELF_SECTION")


def test_other_allocated_types_refused() -> None:
    refused(plain(extra_sections=[Section(".init_array", 14, A | W, bytes(8))]), "ELF_SECTION")


def test_data_section_limit() -> None:
    secs = [Section(f".rodata.{i}", PROGBITS, A, b"x", 1) for i in range(64)]
    ok(plain(extra_sections=secs))
    refused(plain(extra_sections=[*secs, Section(".rodata.64", PROGBITS, A, b"x", 1)]), "ELF_IMAGE", "64")


@pytest.mark.parametrize("align", [3, 8192])
def test_bad_alignment(align: int) -> None:
    refused(plain(extra_sections=[Section(".data.a", PROGBITS, A | W, b"x", align)]), "ELF_IMAGE")


def test_alignment_4096_is_honoured() -> None:
    p = ok(plain(rodata=b"r", extra_sections=[Section(".data.page", PROGBITS, A | W, b"x", 4096)]))
    assert p.layout.rodata_bytes == 4096  # R rounds up to the largest writable alignment
    assert p.layout.image[4096:4097] == b"x"


def test_image_limit() -> None:
    ok(plain(bss=65536))
    refused(plain(rodata=b"r", bss=65536), "ELF_IMAGE")
    ok(plain(rodata=b"r", bss=65536), max_image_bytes=1 << 20)
    refused(plain(bss=1 << 62), "ELF_IMAGE")


# -- §2 jump tables, ignored and refused sections --


def test_jumptables_section() -> None:
    e = refused(plain(extra_sections=[Section(".jumptables", PROGBITS, 0, bytes(16))]), "JUMP_TABLE")
    assert "rebuild with -fno-jump-tables" in e.message


def test_ignored_sections_are_listed() -> None:
    extra = [Section(".BTF", PROGBITS, 0, b"\xff" * 9, 1), Section(".debug_info", PROGBITS, 0, b"z", 1),
             Section(".eh_frame", PROGBITS, A, b"e" * 8), Section("license", PROGBITS, 0, b"GPL\0", 1)]
    b = asm.builder([Func("main", MAIN)], extra_sections=extra)
    b.add_reloc(".debug_info", Reloc(0, 4, "main"))  # NODYLD32 in an ignored section
    b.add_reloc(".BTF", Reloc(3, 99, 500))  # nonsense in an ignored section is never read
    p = ok(b.build())
    assert set(p.report.ignored_sections) >= {".BTF", ".debug_info", ".eh_frame", "license", ".rel.debug_info", ".rel.BTF"}


def test_rela_refused() -> None:
    b = asm.builder([Func("main", "r1 = rodata ll\nexit")], rodata=b"x")
    b.rel_type = RELA
    refused(b.build(), "ELF_SECTION", "RELA")


# -- §2 entry and size --


def test_no_entry_section() -> None:
    refused(asm.elf([Func("main", MAIN, section=".text")]), "ELF_ENTRY")


def test_two_entry_sections() -> None:
    refused(plain(extra_sections=[Section("spinfoam.main", PROGBITS, A | X, bytes(8))]), "ELF_ENTRY")


def test_entry_with_two_functions() -> None:
    entry = "spinfoam.main"
    refused(asm.elf([Func("main", MAIN, section=entry), Func("other", MAIN, section=entry)]), "ELF_ENTRY")


def test_entry_symbol_not_at_offset_0() -> None:
    b = asm.builder([Func("main", "r0 = 0\nexit\nexit")])
    b.symbols[0].value, b.symbols[0].size = 8, 8
    refused(b.build(), "ELF_ENTRY")


def test_empty_entry_section() -> None:
    b = asm.builder([Func("main", MAIN)])
    b.sections[0].data, b.symbols[0].size = b"", 0
    refused(b.build(), "ELF_ENTRY")


def test_size_limit() -> None:
    data = plain()
    refused(data, "ELF_SIZE", max_elf_bytes=len(data) - 1)
    ok(data, max_elf_bytes=len(data))
    refused(data + bytes(65536), "ELF_SIZE")


def test_options_are_range_checked() -> None:
    from wakeful.errors import InvalidParams

    with pytest.raises(InvalidParams):
        loader.prepare(plain(), max_instructions=65537)
    with pytest.raises(InvalidParams):
        loader.prepare("not bytes")  # type: ignore[arg-type]


# -- §3 relocations --


def _reloc(text: str, relocs: list[Reloc], **kw: object) -> bytes:
    code, own = asm.assemble(text)
    return asm.elf([Func("main", code, relocs=[*own, *relocs])], **kw)  # type: ignore[arg-type]


def test_ldimm64_data_address_and_addend() -> None:
    p = ok(asm.elf([Func("main", "r1 = rodata + 3 ll\nr2 = data + 8 ll\nr3 = bss + 0 ll\nexit")],
                   rodata=b"abcdefgh", data=b"12345678", bss=8))
    consts = [i.imm for i in p.code.insns if i.op == 0x18]
    assert consts == [BASE + 3, BASE + 8 + 8, BASE + 16]


def test_ldimm64_against_object_symbol() -> None:
    sym = Symbol("table", 4, 4, 1, 1, ".data")
    p = ok(asm.elf([Func("main", "r1 = table + 2 ll\nexit")], rodata=b"r" * 8, data=b"d" * 8, extra_symbols=[sym]))
    assert p.code.insns[0].imm == BASE + 8 + 4 + 2


def test_ldimm64_one_past_section_end_is_allowed_beyond_is_not() -> None:
    ok(asm.elf([Func("main", "r1 = rodata + 8 ll\nexit")], rodata=b"r" * 8))
    refused(asm.elf([Func("main", "r1 = rodata + 9 ll\nexit")], rodata=b"r" * 8), "RELOC_SYMBOL", "outside")
    refused(asm.elf([Func("main", "r1 = rodata - 1 ll\nexit")], rodata=b"r" * 8), "RELOC_SYMBOL")


def test_function_pointer_refused() -> None:
    refused(asm.elf([Func("main", "r1 = main ll\nexit")]), "RELOC_SYMBOL", "function pointers")


def test_undefined_data_symbol() -> None:
    refused(asm.elf([Func("main", "r1 = missing ll\nexit")]), "RELOC_SYMBOL", "undefined data symbol missing")


def test_data_symbol_in_ignored_section() -> None:
    e = refused(asm.elf([Func("main", "r1 = .BTF ll\nexit")], extra_sections=[Section(".BTF", 1, 0, bytes(8))]),
                "RELOC_SYMBOL")
    assert e.reason.startswith("main+0 'r1 = 0x0 ll': symbol .BTF is in section 2 (.BTF), which is not loaded")


def test_misaligned_relocation_offset() -> None:
    refused(_reloc("r0 = 0\nexit", [Reloc(4, 1, ".rodata")], rodata=b"x"), "RELOC_TARGET")


def test_relocation_outside_section() -> None:
    refused(_reloc("r0 = 0\nexit", [Reloc(16, 1, ".rodata")], rodata=b"x"), "RELOC_TARGET")


def test_two_relocations_on_one_slot() -> None:
    refused(_reloc("r1 = 0 ll\nexit", [Reloc(0, 1, ".rodata"), Reloc(0, 1, ".rodata")], rodata=b"x"),
            "RELOC_TARGET", "two relocations")


def test_relocation_on_second_ldimm64_slot() -> None:
    refused(_reloc("r1 = 0 ll\nexit", [Reloc(8, 1, ".rodata")], rodata=b"x"), "RELOC_TARGET")


def test_relocation_on_wrong_instruction() -> None:
    refused(_reloc("r0 = 0\nexit", [Reloc(0, 1, ".rodata")], rodata=b"x"), "RELOC_TARGET")
    refused(_reloc("r1 = 0 ll\nexit", [Reloc(0, 10, "main")]), "RELOC_TARGET")
    refused(_reloc("call pc+0\nexit\nexit", [Reloc(0, 1, ".rodata")], rodata=b"x"), "RELOC_TARGET")


def test_invalid_symbol_index() -> None:
    refused(_reloc("r1 = 0 ll\nexit", [Reloc(0, 1, 999)]), "RELOC_SYMBOL", "999")


def test_unknown_relocation_type() -> None:
    refused(_reloc("r1 = 0 ll\nexit", [Reloc(0, 7, "main")]), "RELOC_TYPE",
            "unsupported relocation type 7 at spinfoam.main+0")


def test_nodyld32_outside_ignored_sections() -> None:
    refused(_reloc("r1 = 0 ll\nexit", [Reloc(0, 4, "main")]), "RELOC_TARGET")


def test_helper_by_name_and_unknown_helper() -> None:
    p = ok(asm.elf([Func("main", "call sf_now_mono_ms\ncall sf_yield\nexit")]))
    assert p.code.helpers == ("sf_now_mono_ms", "sf_yield")
    assert [(i.src, i.imm) for i in p.code.insns[:2]] == [(0, 0), (0, 1)]
    e = refused(asm.elf([Func("main", "r0 = 0\ncall bpf_map_lookup_elem\nexit")]), "UNKNOWN_HELPER")
    assert e.reason.startswith("main+1 'call bpf_map_lookup_elem': unknown helper")


def test_helper_call_with_src_0_relocation() -> None:
    code = bytes.fromhex("8500000000000000") + bytes.fromhex("9500000000000000")
    p = ok(asm.elf([Func("main", code, relocs=[Reloc(0, 10, "sf_yield")])]))
    assert p.code.helpers == ("sf_yield",)


def test_local_calls_by_relocation_across_sections() -> None:
    p = ok(asm.elf([Func("main", "call walk\ncall walk\nexit"), Func("walk", "call leaf\nexit"),
                    Func("leaf", MAIN, section=".text.leaf")]))
    names = [f.name for f in p.code.functions]
    assert names == ["main", "walk", "leaf"]
    main = p.code.functions[p.code.entry]
    assert [names[c] for c in main.calls] == ["walk"]
    assert p.code.insns[main.start].src == 1 and p.code.insns[main.start].imm == names.index("walk")


def test_relative_local_call_makes_an_unnamed_function() -> None:
    p = ok(asm.elf([Func("main", "call pc+1\nexit\nr0 = 7\nexit")]))
    assert [f.name for f in p.code.functions] == ["main", "spinfoam.main+16"]
    assert p.report.functions[1]["start"] == 2


def test_call_target_outside_section() -> None:
    refused(asm.elf([Func("main", "call pc+5\nexit")]), "CALL_TARGET", "outside")
    code, _ = asm.assemble(".raw 0x85 0 1 0 40\nexit")
    refused(asm.elf([Func("main", code, relocs=[Reloc(0, 10, "walk")]), Func("walk", MAIN)]), "CALL_TARGET")


def test_call_into_ldimm64_second_slot() -> None:
    refused(asm.elf([Func("main", "call pc+2\nexit\nr1 = 0 ll\nexit")]), "CALL_TARGET")


def test_call_to_data_symbol() -> None:
    sym = Symbol("obj", 0, 8, 1, 1, ".data")
    refused(asm.elf([Func("main", "call obj\nexit")], data=bytes(8), extra_symbols=[sym]), "RELOC_SYMBOL")


def test_abs64_and_abs32_in_data() -> None:
    data = struct.pack("<QI", 2, 5) + bytes(4)
    p = ok(plain(rodata=b"hello\0world\0", data=data,
                 extra_relocs=[(".data", Reloc(0, 2, ".rodata")), (".data", Reloc(8, 3, ".rodata"))]))
    r = p.layout.rodata_bytes
    assert struct.unpack_from("<QI", p.layout.image, r) == (BASE + 2, BASE + 5)


def test_abs64_rules() -> None:
    rel = [(".data", Reloc(4, 2, ".rodata"))]
    refused(plain(rodata=b"x", data=bytes(16), extra_relocs=rel), "RELOC_TARGET")
    refused(plain(rodata=b"x", data=bytes(8) + struct.pack("<Q", 2), extra_relocs=[(".data", Reloc(8, 2, ".rodata"))]),
            "RELOC_SYMBOL", "outside")
    refused(plain(rodata=b"x", data=bytes(8), extra_relocs=[(".data", Reloc(0, 2, "main"))]), "RELOC_SYMBOL", "function")
    refused(plain(data=bytes(8), extra_relocs=[(".data", Reloc(0, 2, "nothing"))]), "RELOC_SYMBOL", "undefined")
    refused(plain(data=bytes(8), bss=8, extra_relocs=[(".bss", Reloc(0, 2, ".data"))]), "RELOC_TARGET")
    refused(plain(data=bytes(8), extra_relocs=[(".data", Reloc(0, 1, ".data"))]), "RELOC_TARGET")
    refused(plain(data=bytes(8), extra_relocs=[(".data", Reloc(0, 2, ".data")), (".data", Reloc(4, 3, ".data"))]),
            "RELOC_TARGET", "overlapping")


def test_abs64_negative_addend_wraps_inside_section() -> None:
    data = bytes(8) + struct.pack("<q", -8)
    sym = Symbol("tail", 8, 8, 1, 1, ".data")
    p = ok(plain(data=data, extra_symbols=[sym], extra_relocs=[(".data", Reloc(8, 2, "tail"))]))
    r = p.layout.rodata_bytes
    assert struct.unpack_from("<Q", p.layout.image, r + 8)[0] == BASE + r
    refused(plain(data=data, extra_relocs=[(".data", Reloc(8, 2, ".data"))]), "RELOC_SYMBOL", "outside")


def test_call_against_the_null_symbol() -> None:
    code, _ = asm.assemble(".raw 0x85 0 1 0 -1\nexit")
    e = refused(asm.elf([Func("main", code, relocs=[Reloc(0, 10, 0)])]), "UNKNOWN_HELPER")
    assert "unknown helper ''" in e.reason


def test_nameless_function_symbol_gets_a_section_name() -> None:
    b = asm.builder([Func("main", MAIN), Func("f", "r0 = 1\nexit")])
    b.symbols[1].name = ""
    p = ok(b.build())
    assert [f.name for f in p.code.functions] == ["main", ".text+0"]
