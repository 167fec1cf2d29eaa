"""The assembler parses exactly the disassembler's grammar (vm.md §4.2) and writes valid ELF objects."""

from __future__ import annotations

import io

import pytest
from elftools.elf.elffile import ELFFile

from wakeful.vm import asm, isa
from wakeful.vm.disasm import disasm_bytes, disasm_insn

# one line of every instruction form (vm.md §4.1 accepted table, plus refused-but-printable forms)
EVERY_FORM = """\
r1 += 8
r1 -= -3
r1 *= r2
r1 /= 7
r0 s/= r1
r0 s%= 5
r1 |= r2
r1 &= 255
r1 <<= 70
r1 >>= r3
r1 %= r2
r1 ^= -1
r1 s>>= 3
r2 = r3
r2 = -100
w1 += 8
w1 -= w2
w1 *= 3
w1 /= w2
w1 s/= -1
w1 s%= w3
w1 |= 1
w1 &= w2
w1 <<= 31
w1 >>= 1
w1 %= 0
w1 ^= w4
w1 s>>= w2
w1 = w2
w1 = 2147483647
r1 = (s8)r2
r1 = (s16)r2
r1 = (s32)r2
w1 = (s8)w2
w1 = (s16)w2
r1 = -r1
w3 = -w3
r1 = le16 r1
r1 = le32 r1
r1 = le64 r1
r1 = be16 r1
r1 = be32 r1
r1 = be64 r1
r1 = bswap16 r1
r1 = bswap32 r1
r1 = bswap64 r1
r1 = 0x10000 ll
r9 = 0xffffffffffffffff ll
r0 = *(u8 *)(r1 + 0)
r0 = *(u16 *)(r1 - 2)
r0 = *(u32 *)(r1 + 4)
r0 = *(u64 *)(r10 - 8)
r0 = *(s8 *)(r1 + 3)
r0 = *(s16 *)(r1 + 2)
r0 = *(s32 *)(r1 + 0)
*(u8 *)(r10 - 1) = -1
*(u16 *)(r10 - 2) = 2
*(u32 *)(r10 - 4) = 7
*(u64 *)(r10 - 16) = 100
*(u8 *)(r1 + 0) = r2
*(u16 *)(r1 + 2) = r2
*(u32 *)(r1 + 4) = r2
*(u64 *)(r1 + 0) = r2
lock *(u64 *)(r1 + 0) += r2
lock *(u64 *)(r1 + 8) |= r2
lock *(u64 *)(r1 + 0) &= r2
lock *(u64 *)(r1 + 0) ^= r2
lock *(u32 *)(r1 + 0) += w2
lock *(u32 *)(r1 + 4) |= w2
lock *(u32 *)(r1 + 0) &= w2
lock *(u32 *)(r1 + 0) ^= w2
r2 = atomic_fetch_add((u64 *)(r1 + 0), r2)
r2 = atomic_fetch_or((u64 *)(r1 + 0), r2)
r2 = atomic_fetch_and((u64 *)(r1 + 0), r2)
r2 = atomic_fetch_xor((u64 *)(r1 - 8), r2)
w2 = atomic_fetch_add((u32 *)(r1 + 0), w2)
w2 = atomic_fetch_xor((u32 *)(r1 + 0), w2)
r2 = xchg_64(r1 + 0, r2)
w2 = xchg32_32(r1 + 4, w2)
r0 = cmpxchg_64(r1 + 0, r0, r2)
w0 = cmpxchg32_32(r1 + 0, w0, w2)
w0 = load_acquire((u8 *)(r1 + 0))
w0 = load_acquire((u16 *)(r1 + 0))
w0 = load_acquire((u32 *)(r1 + 0))
r0 = load_acquire((u64 *)(r1 + 0))
store_release((u8 *)(r1 + 0), w2)
store_release((u64 *)(r1 + 8), r2)
goto +5
goto -1
gotol +70000
if r1 == 0x0 goto +1
if r1 > 0x40 goto +40
if r1 >= r2 goto +1
if r1 & 0x8 goto +1
if r1 != r2 goto +1
if r1 s> 0xffffffff goto +1
if r1 s>= r2 goto +1
if r1 < 0x1 goto +1
if r1 <= r2 goto +1
if r1 s< 0x7 goto +1
if r1 s<= r2 goto +1
if w1 == w2 goto +1
if w1 > 0x10 goto +1
if w1 s< w2 goto -3
if w1 & 0x1 goto +1
call sf_json_parse
call walk
call pc+3
call 7
callx r2
gotox r3
.raw 0x20 0 0 0 4
.raw 0x85 0 2 0 7
.raw 0x18 1 1 0 5
exit"""


def _round_trip(text: str) -> list[str]:
    code, relocs = asm.assemble(text)
    return disasm_bytes(code, relocs={r.offset // 8: (str(r.symbol), 0) for r in relocs})


def test_round_trip_of_every_form() -> None:
    assert _round_trip(EVERY_FORM) == EVERY_FORM.splitlines()


def test_round_trip_of_symbolic_addresses() -> None:
    code, relocs = asm.assemble("r1 = rodata + 16 ll\nr2 = bss ll\nexit")
    assert [(r.offset, r.type, r.symbol) for r in relocs] == [(0, 1, ".rodata"), (16, 1, ".bss")]
    addends = {r.offset // 8: (str(r.symbol), 16 if r.offset == 0 else 0) for r in relocs}
    assert disasm_bytes(code, relocs=addends) == ["r1 = .rodata + 16 ll", "r2 = .bss + 0 ll", "exit"]


def test_labels_resolve_to_relative_offsets() -> None:
    code, _ = asm.assemble("top:\n r1 += 1 ; count\n if r1 < 10 goto top\n goto end\n r0 = 1\nend: exit")
    lines = disasm_bytes(code)
    assert lines[1] == "if r1 < 0xa goto -2"
    assert lines[2] == "goto +1"


def test_gotol_label_uses_imm() -> None:
    code, _ = asm.assemble("gotol done\nr0 = 0\ndone:\nexit")
    assert isa.decode(code, 0) == isa.Insn(isa.OP_GOTOL, 0, 0, 0, 1)


@pytest.mark.parametrize("bad", ["r1 += r2 r3", "goto nowhere", "w1 += r2", "r1 = be16 r2", "frob r1"])
def test_bad_text_is_an_asm_error(bad: str) -> None:
    with pytest.raises(asm.AsmError):
        asm.assemble(bad)


def test_disasm_insn_non_canonical_fields_print_raw() -> None:
    assert disasm_insn(isa.Insn(0x07, 1, 2, 0, 8)) == ".raw 0x07 1 2 0 8"  # K form with src set
    assert disasm_insn(isa.Insn(0x95, 0, 0, 0, 1)) == ".raw 0x95 0 0 0 1"


def test_elf_writer_output_reads_with_pyelftools() -> None:
    data = asm.elf(
        [asm.Func("main", "r1 = rodata + 4 ll\ncall sf_log_raw\ncall other\nexit"),
         asm.Func("other", "r0 = 0\nexit")],
        rodata=b"abcdefgh", data=b"12345678", bss=24,
    )
    f = ELFFile(io.BytesIO(data))
    assert f["e_type"] == "ET_REL" and f["e_machine"] == "EM_BPF"
    names = [s.name for s in f.iter_sections()]
    assert names[:6] == ["", "spinfoam.main", ".text", ".rodata", ".data", ".bss"]
    assert f.get_section_by_name(".bss")["sh_size"] == 24
    syms = {s.name: s for s in f.get_section_by_name(".symtab").iter_symbols() if s.name}
    assert syms["main"]["st_info"]["type"] == "STT_FUNC"
    assert syms["sf_log_raw"]["st_shndx"] == "SHN_UNDEF"
    rels = [(r["r_offset"], r["r_info_type"]) for r in f.get_section_by_name(".relspinfoam.main").iter_relocations()]
    assert rels == [(0, 1), (16, 10), (24, 10)]


def test_patch_helpers_edit_headers() -> None:
    data = asm.elf([asm.Func("main", "exit")])
    edited = asm.patch_shdr(asm.patch_ehdr(data, e_machine=62), "spinfoam.main", sh_flags=7)
    f = ELFFile(io.BytesIO(edited))
    assert f["e_machine"] == "EM_X86_64"
    assert f.get_section_by_name("spinfoam.main")["sh_flags"] == 7
