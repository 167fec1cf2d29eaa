"""Verifier rules of vm.md §4 (every code, with function, pc and instruction in the message) and §5.1 frames."""

from __future__ import annotations

import pytest

from wakeful.errors import InvalidObject
from wakeful.vm import asm, loader
from wakeful.vm.asm import Func


def load(*funcs: Func, **options: int) -> loader.Prepared:
    return loader.prepare(asm.elf(funcs), cache=None, **options)


def refused(rule: str, *funcs: Func, **options: int) -> str:
    with pytest.raises(InvalidObject) as info:
        load(*funcs, **options)
    assert info.value.rule == rule, info.value.message
    return info.value.reason


def main(text: str) -> Func:
    return Func("main", text)


# -- message shape (vm.md §4) --


def test_message_names_function_pc_instruction_and_reason() -> None:
    body = "\n".join(["r1 = 0"] * 14) + "\nif r1 > 0x40 goto +40\n" + "\n".join(["r0 = 0"] * 15) + "\nexit"
    reason = refused("JUMP", main(body))
    assert reason == "main+14 'if r1 > 0x40 goto +40': target outside function main [0, 31)"


# -- INSN_COUNT --


def test_instruction_count_limit() -> None:
    body = "r0 = 0\n" * 8191 + "exit"
    assert load(main(body), max_elf_bytes=1 << 20).report.instructions == 8192
    with pytest.raises(InvalidObject) as info:
        load(main("r0 = 0\n" + body), max_elf_bytes=1 << 20)
    assert info.value.rule == "INSN_COUNT"
    assert load(main("r0 = 0\n" + body), max_elf_bytes=1 << 20, max_instructions=8193)
    assert load(main("r0 = 0\n" * 20 + "exit"), max_instructions=21).report.instructions == 21
    refused("INSN_COUNT", main("r0 = 0\n" * 21 + "exit"), max_instructions=21)


# -- OPCODE --


@pytest.mark.parametrize(
    "raw",
    [
        ".raw 0x07 1 2 0 8",  # ALU64 K with src set
        ".raw 0x0f 1 2 0 8",  # ALU64 X with imm set
        ".raw 0x0f 1 2 1 0",  # add with a non-zero offset
        ".raw 0x87 1 0 0 5",  # neg with imm
        ".raw 0x8f 1 2 0 0",  # neg X
        ".raw 0xe7 1 0 0 0",  # ALU op 0xe0 does not exist
        ".raw 0xd4 1 0 0 24",  # END width 24
        ".raw 0xdf 1 0 0 16",  # ALU64 END X (refused)
        ".raw 0xbc 1 2 32 0",  # 32-bit movsx from 32 bits
        ".raw 0xbf 1 2 7 0",  # movsx width 7
        ".raw 0x20 0 0 0 4",  # LD ABS
        ".raw 0x40 0 1 0 4",  # LD IND
        ".raw 0x79 0 1 0 5",  # LDX with imm
        ".raw 0x99 0 1 0 0",  # LDX MEMSX DW
        ".raw 0x62 1 1 0 5",  # ST with src set
        ".raw 0x7b 1 2 0 3",  # STX with imm set
        ".raw 0xdb 1 2 0 0x10",  # atomic selector 0x10
        ".raw 0xd3 1 2 0 0",  # atomic add on a byte
        ".raw 0xdb 1 2 0 0xe0",  # xchg without FETCH
        ".raw 0x05 1 0 0 0",  # ja with dst
        ".raw 0x06 0 0 3 0",  # gotol with off
        ".raw 0x15 1 2 0 0",  # jeq K with src
        ".raw 0x1d 1 2 0 7",  # jeq X with imm
        ".raw 0xe5 1 0 0 0",  # may_goto / JCOND
        ".raw 0x95 0 0 0 1",  # exit with imm
        ".raw 0x96 0 0 0 0",  # JMP32 exit
        ".raw 0x86 0 0 0 0",  # JMP32 call
        ".raw 0x18 1 0 1 0\n.raw 0 0 0 0 0",  # LD_IMM64 with off
    ],
)
def test_opcode_and_unused_fields(raw: str) -> None:
    reason = refused("OPCODE", main(f"r0 = 0\n{raw}\nexit"))
    assert reason.startswith("main+1 ")


def test_every_accepted_form_loads() -> None:
    from test_vm_front_asm import EVERY_FORM

    refused_lines = ("callx", "gotox", "call ", ".raw", "goto", "if ", "exit")
    body = [line for line in EVERY_FORM.splitlines() if not line.startswith(refused_lines)]
    body = [line.replace("r10", "r9") if "= *(" not in line and "r10 -" not in line else line for line in body]
    text = "\n".join(body) + "\nif r1 > 0x40 goto +1\nif w1 s< w2 goto +0\ngoto +0\ngotol +0\nexit"
    assert load(main(text)).report.instructions > 80


# -- REGISTER --


@pytest.mark.parametrize(
    ("text", "pc"),
    [
        ("r10 = 0", 1), ("r10 += 8", 1), ("w10 = w1", 1), ("r10 = 0x5 ll", 1), ("r10 = *(u64 *)(r1 + 0)", 1),
        ("r10 = atomic_fetch_add((u64 *)(r1 + 0), r10)", 1), ("r10 = xchg_64(r1 + 0, r10)", 1),
        ("r10 = load_acquire((u64 *)(r1 + 0))", 1), ("r10 = -r10", 1), ("r10 = be16 r10", 1),
        (".raw 0x07 11 0 0 1", 1), (".raw 0xbf 1 15 0 0", 1), (".raw 0x79 12 1 0 0", 1),
    ],
)
def test_register_rules(text: str, pc: int) -> None:
    reason = refused("REGISTER", main(f"r1 = 0\n{text}\nexit"))
    assert reason.startswith(f"main+{pc} ")


def test_reading_r10_and_cmpxchg_with_r10_source_are_fine() -> None:
    load(main("r1 = r10\nr1 += -8\nr0 = cmpxchg_64(r1 + 0, r0, r10)\nexit"))


# -- LDIMM64 --


def test_ldimm64_rules() -> None:
    reason = refused("LDIMM64", main("r0 = 0\n.raw 0x18 1 1 0 5\n.raw 0 0 0 0 0\nexit"))  # map-fd pseudo source
    assert reason == "main+1 '.raw 0x18 1 1 0 5': LD_IMM64 pseudo source 1 (maps, BTF) is not supported"
    reason = refused("LDIMM64", main(".raw 0x18 1 0 0 5\n.raw 0 1 0 0 0\nexit"))
    assert reason.startswith("main+0 ") and "second slot" in reason
    assert refused("LDIMM64", main(".raw 0x18 1 0 0 5\n.raw 0x07 0 0 0 0\nexit")).startswith("main+0 ")
    assert refused("LDIMM64", main("exit\n.raw 0x18 1 0 0 5")).startswith("main+1 ")


def test_ldimm64_split_across_functions() -> None:
    code, _ = asm.assemble("r1 = 0 ll\nexit")
    refused("LDIMM64", Func("main", "exit"), Func("f", code[:8], section=".text"), Func("g", code[8:] + code[16:], section=".text"))


# -- JUMP / FALLTHROUGH --


def test_jump_into_another_function() -> None:
    reason = refused("JUMP", main("call f\ngoto +1\nexit"), Func("f", "r0 = 1\nexit"))
    assert reason.startswith("main+1 'goto +1': target outside function main [0, 3)")


def test_jump_into_ldimm64_second_slot() -> None:
    reason = refused("JUMP", main("goto +1\nr1 = 0x1 ll\nexit"))
    assert reason == "main+0 'goto +1': target is the second slot of an LD_IMM64"


def test_jump_beyond_section_and_backwards_before_start() -> None:
    reason = refused("JUMP", main("r1 = 0\nif r1 == 0x0 goto +100\nexit"))
    assert reason == "main+1 'if r1 == 0x0 goto +100': target outside function main [0, 3)"
    assert refused("JUMP", main("goto -2\nexit")) == "main+0 'goto -2': target outside function main [0, 2)"
    assert refused("JUMP", main("gotol +5\nexit")).startswith("main+0 'gotol +5': target outside")
    load(main("gotol +0\nexit"))


def test_fallthrough_off_the_end() -> None:
    reason = refused("FALLTHROUGH", main("r0 = 0"))
    assert reason.startswith("main+0 'r0 = 0': execution can run past the end of main")
    refused("FALLTHROUGH", main("exit"), Func("f", "r0 = 0\nif r0 == 0x0 goto -2"))
    refused("FALLTHROUGH", main("exit\nr0 = 0x1 ll"))
    load(main("r0 = 0\ngoto -2"))


# -- CALL_TARGET and UNKNOWN_HELPER --


def test_numeric_helper_kfunc_and_callx() -> None:
    reason = refused("CALL_TARGET", main("r1 = 1\ncall 5\nexit"))
    assert reason.startswith("main+1 'call 5': numeric helper id 5") and "link helpers by name" in reason
    assert refused("CALL_TARGET", main(".raw 0x85 0 2 0 7\nexit")).startswith("main+0 '.raw 0x85 0 2 0 7': kfunc")
    assert refused("CALL_TARGET", main("callx r2\nexit")).startswith("main+0 'callx r2': indirect calls")


def test_unknown_helper() -> None:
    assert refused("UNKNOWN_HELPER", main("call printk\nexit")).startswith("main+0 'call printk'")


# -- RECURSION / CALL_DEPTH --


def test_self_recursion() -> None:
    reason = refused("RECURSION", main("call main\nexit"))
    assert reason == "main+0 'call main': recursion: main → main"


def test_mutual_recursion_lists_the_cycle() -> None:
    reason = refused("RECURSION", main("call walk\nexit"), Func("walk", "r0 = 0\ncall visit\nexit"),
                     Func("visit", "call walk\nexit"))
    assert reason == "visit+0 'call walk': recursion: main → walk → visit → walk"


def test_recursion_in_unreachable_functions_is_refused() -> None:
    refused("RECURSION", main("exit"), Func("a", "call b\nexit"), Func("b", "call a\nexit"))


def _chain(n: int) -> list[Func]:
    funcs = [Func("main", "call f1\nexit" if n > 1 else "exit")]
    for i in range(1, n):
        funcs.append(Func(f"f{i}", f"call f{i + 1}\nexit" if i + 1 < n else "r0 = 0\nexit"))
    return funcs


def test_call_depth_8_loads_and_9_is_refused() -> None:
    p = load(*_chain(8))
    assert p.report.call_chain == ("main", "f1", "f2", "f3", "f4", "f5", "f6", "f7")
    reason = refused("CALL_DEPTH", *_chain(9))
    assert reason == ("f7+0 'call f8': call chain of 9 functions exceeds 8: "
                      "main → f1 → f2 → f3 → f4 → f5 → f6 → f7 → f8")


def test_depth_counts_only_chains_from_the_entry() -> None:
    funcs = _chain(8)
    # unreachable from the entry: u0 -> u1 -> f1..f7 is 9 functions, one over the limit; a verifier that
    # counted every chain (not only those from the entry) would refuse this program
    funcs += [Func("u0", "call u1\nexit"), Func("u1", "call f1\nexit")]
    p = load(*funcs)
    assert p.report.call_chain == ("main", "f1", "f2", "f3", "f4", "f5", "f6", "f7")
    # the same 9-function chain reached from the entry is refused
    reachable = [Func("main", "call u0\nexit"), *funcs[1:]]
    reason = refused("CALL_DEPTH", *reachable)
    assert reason.startswith("f5+0 'call f6': call chain of 10 functions exceeds 8: main → u0 → u1 → f1")


# -- STACK --


@pytest.mark.parametrize(
    "access",
    ["r0 = *(u64 *)(r10 + 8)", "r0 = *(u64 *)(r10 - 4104)", "*(u64 *)(r10 - 4) = 1", "*(u8 *)(r10 + 0) = r1",
     "r0 = *(u32 *)(r10 - 4097)", "lock *(u64 *)(r10 + 0) += r1", "r0 = load_acquire((u64 *)(r10 + 0))"],
)
def test_static_r10_access_outside_frame(access: str) -> None:
    assert refused("STACK", main(f"r1 = 0\n{access}\nexit")).startswith("main+1 ")


def test_frame_edges_are_accepted() -> None:
    p = load(main("r0 = *(u64 *)(r10 - 4096)\n*(u8 *)(r10 - 1) = 1\nexit"))
    assert p.code.functions[0].frame_bytes == 4096


def test_computed_frame_over_4096() -> None:
    reason = refused("STACK", main("r1 = r10\nr1 += -5000\nr2 = *(u8 *)(r1 + 0)\nexit"))
    assert reason.startswith("main+2 ") and "5000" in reason


# -- JUMP_TABLE --


def test_gotox_is_a_jump_table() -> None:
    reason = refused("JUMP_TABLE", main("r1 = 0\ngotox r1\nexit"))
    assert reason == ("main+1 'gotox r1': jump tables (.jumptables/gotox) are not supported; "
                      "rebuild with -fno-jump-tables")


# -- §5.1 frame sizes --


@pytest.mark.parametrize(
    ("body", "frame"),
    [
        ("r0 = 0", 0),
        ("*(u32 *)(r10 - 4) = 0", 8),
        ("r1 = r10\nr1 += -64\ncall sf_log_raw", 64),  # a helper touches [ptr, ptr + len) only
        ("r1 = r10\nr1 += -64\ncall f", 4096),  # passed to a local function that reads it
        ("r1 = r10\nr1 += -64\ncall g", 0),  # g never reads r1
        ("r3 = r10\nr3 += -64\ncall g", 4096),  # g passes r3 on to h, which reads it
        ("call f", 4096),  # the entry's r1 is END (an r10-derived value) and f reads it
        ("r1 = r10\nr1 += -40\nr1 += r2\n*(u8 *)(r1 + 0) = 0", 4096),  # combined with a register
        ("r1 = r10\nr1 += r2", 4096),
        ("r1 = r10\nr1 &= -8", 4096),  # any other operation
        ("r1 = r10\nw1 += -8", 4096),
        ("r1 = r10\nr1 -= 24\n*(u64 *)(r2 + 0) = r1", 4096),  # stored
        ("r1 = r10\nr1 += -16\nr0 = *(u64 *)(r1 - 8)", 24),  # memory base with an offset
        ("r1 = r10\nr1 += -12\nif r1 == 0x0 goto +0", 4096),  # compared
        ("r1 = r10\nr1 += -12\nif r2 == 0x0 goto +0", 0),  # a jump that does not use it
        ("r0 = r10\nr0 += -8", 4096),  # returned
        ("r1 = r10\nr1 += -32\nr1 = 0\nr0 = *(u64 *)(r10 - 8)", 8),  # overwritten before any use
        ("r1 = r10\nr1 += -48\nr6 = r1\ncall sf_yield\nr0 = *(u64 *)(r6 + 0)", 48),
    ],
)
def test_frame_sizes(body: str, frame: int) -> None:
    p = load(main(body + "\nexit"), Func("f", "r0 = r1\nexit"), Func("g", "r1 = 5\ncall h\nexit"),
             Func("h", "r0 = *(u64 *)(r3 + 0)\nexit"))
    assert p.code.functions[0].frame_bytes == frame
    assert p.report.functions[0]["stack_frame_bytes"] == frame


def test_derived_pointers_are_tracked_across_jump_targets() -> None:
    # vm.md §5.1: the join at pc 4 is r10 + [-108, -8]
    body = "r1 = r10\nr1 += -8\nif r2 == 0x0 goto +1\nr1 += -100\nr0 = *(u8 *)(r1 + 0)\nexit"
    assert load(main(body)).code.functions[0].frame_bytes == 112
    # the old rule forgot r1 at the merge at pc 2 and gave 0
    body = "r1 = r10\nif r2 == 0x0 goto +0\nr1 += -100\nr0 = *(u8 *)(r1 + 0)\nexit"
    assert load(main(body)).code.functions[0].frame_bytes == 104


def test_stack_bytes_is_the_deepest_sum_of_frames() -> None:
    p = load(main("*(u64 *)(r10 - 16) = 0\ncall a\ncall b\nexit"),
             Func("a", "*(u64 *)(r10 - 64) = 0\nexit"),
             Func("b", "*(u64 *)(r10 - 8) = 0\ncall c\nexit"),
             Func("c", "*(u64 *)(r10 - 80) = 0\nexit"))
    assert p.report.stack_bytes == 16 + 8 + 80
    assert p.layout.stack_bytes == 104
    assert p.report.call_chain == ("main", "b", "c")


# -- LinkedCode and report shape --


def test_linked_code_follows_linked_py() -> None:
    data = asm.elf([main("r1 = rodata + 2 ll\ncall sf_log_raw\ncall f\ncall sf_log_raw\nexit"),
                    Func("f", "call sf_now_mono_ms\nexit")], rodata=b"abcd")
    code = loader.prepare(data, cache=None).code
    assert code.helpers == ("sf_log_raw", "sf_now_mono_ms")
    assert code.insns[0].imm == 0x10002 and code.insns[1] == (0, 0, 0, 0, 0)
    assert code.insns[2].src == 0 and code.insns[2].imm == 0
    assert code.insns[3].src == 1 and code.insns[3].imm == 1
    assert code.func_at == {0: 0, 6: 1}
    assert code.functions[0].calls == (1,) and code.functions[0].helpers == ("sf_log_raw",)
    assert code.function_of(7) == 1


def test_report_json_shape() -> None:
    p = load(main("call f\nexit"), Func("f", "call sf_yield\nexit"))
    j = p.report.to_json()
    assert set(j) == {"sha256", "elf_bytes", "code_key", "entry", "instructions", "functions", "call_chain",
                      "stack_bytes", "helpers", "image", "ignored_sections"}
    assert j["functions"][1] == {"name": "f", "section": ".text", "start": 0, "instructions": 2,
                                 "stack_frame_bytes": 0, "calls": [], "helpers": ["sf_yield"]}
    assert j["functions"][0]["calls"] == ["f"] and j["helpers"] == ["sf_yield"]
    assert len(j["sha256"]) == 64 and len(j["code_key"]) == 64


def test_verify_elf_returns_the_report() -> None:
    data = asm.elf([main("exit")])
    assert loader.verify_elf(data).sha256 == loader.prepare(data).sha256
