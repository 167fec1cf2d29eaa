"""build.md §7: crash reports removed, paths rewritten, addresses folded, duplicates collapsed, 16 KiB cut."""

from __future__ import annotations

from wakeful.build import diagnostics as d

STAGING = "/data/build/tmp/s42-abcd"


def test_diag_crash_report_removed() -> None:
    text = "main.c:1:1: error: boom\nPLEASE submit a bug report to https://x and include the crash\nStack dump:\n0. x\n"
    assert d.clean(text, STAGING) == "main.c:1:1: error: boom\n"
    assert d.clean("a\nStack dump:\n #0 0x00007f12345678 in f\n", STAGING) == "a\n"


def test_diag_paths_rewritten() -> None:
    text = (f"{STAGING}/src/main.c:3:1: error: x\nsrc/nested/a.h:1:2: note: y\nsdk/wakeful.h:9:1: note: z\n"
            "/etc/passwd:1:1: error: w\nIn file included from src/main.c:1:\n"
            "/root/.pyenv/lib/python3.11/site-packages/ziglang/zig: error: clang failed\n")
    assert d.clean(text, STAGING) == (
        "main.c:3:1: error: x\nnested/a.h:1:2: note: y\n<sdk>/wakeful.h:9:1: note: z\n<host>/passwd:1:1: error: w\n"
        "In file included from main.c:1:\n<host>/zig: error: clang failed\n"
    )


def test_diag_hex_folded_only_from_six_digits() -> None:
    assert d.clean("at 0x7f00deadbeef and 0x12345 and 0xabcdef\n", "") == "at 0x… and 0x12345 and 0x…\n"


def test_diag_duplicates_collapsed_consecutive_or_not() -> None:
    msg = "main.c:2:5: error: Looks like the BPF stack limit is exceeded.\n"
    text = msg + "    2 | x\n      | ^\n" + msg + "\n" + "main.c:3:1: error: other\n" + msg
    out = d.clean(text, "")
    assert out.count("stack limit") == 1 and out.startswith(msg + "    2 | x\n")
    assert "main.c:3:1: error: other" in out


def test_diag_cut_at_line_boundary() -> None:
    text = "".join(f"line {i:05d} " + "x" * 40 + "\n" for i in range(1000))
    cut, truncated = d.cut(text)
    assert truncated and len(cut.encode()) <= 16_384 and cut.endswith("\n") and text.startswith(cut)
    assert d.cut("short\n") == ("short\n", False)


def test_diag_explanations_once_each_at_most_eight() -> None:
    text = ("error: A call to built-in function '__fixdfdi' is not supported.\n" * 3
            + "error: Looks like the BPF stack limit is exceeded\n"
            + "error: variadic functions are not supported\n"
            + "error: call to undeclared function 'printf'\n"
            + "fatal error: 'stdio.h' file not found\n"
            + "RECURSION: main -> f -> main\nCALL_DEPTH: too deep\nUNKNOWN_HELPER: sf_x\ncallx\n"
            + "inline assembly ('asm') is not allowed\ncompiled object exceeds 64 KiB (70000 bytes)\n")
    lines = d.explanations(text)
    assert len(lines) == 8 and len(set(lines)) == 8
    assert lines[0] == "wakeful: floating point is not available; use integers, e.g. fixed point in thousandths"
    assert all(line.startswith("wakeful: ") for line in lines)


def test_diag_error_text_fits_with_explanations() -> None:
    text = "main.c:1:1: error: call to undeclared function 'f'\n" * 1000
    error, truncated = d.with_explanations(text, names=frozenset({"sf_log"}))
    assert truncated and len(error.encode()) <= 16_384
    assert error.startswith("wakeful: f is not declared: define or declare it above its first use (there is no C "
                            "library; the SDK is wakeful.h)\nmain.c:1:1: error: call to undeclared function 'f'\n")


def test_diag_repeated_block_collapsed() -> None:
    """clang's backend prints a whole block of errors twice (float calls, then the stack limit)."""
    block = (
        "main.c:3:5: error: A call to built-in function '__muldf3' is not supported.\n"
        "main.c:4:1: error: Looks like the BPF stack limit is exceeded.\n"
    )
    text = block + block + "2 errors generated.\n"
    out = d.clean(text, "")
    assert out.count("__muldf3") == 1 and out.count("stack limit") == 1
    assert out.endswith("2 errors generated.\n")


# build.md §4.3/§7 (audit item 10): the compile step quotes out/main.i; the agent's own line is shown instead
ORIGINALS = {"main.c": "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { int y = 3; return nope + y; } // c\n"
                       "\tint  a;   /* c */ int x = BAD(2);\nint ok = nope2;\n",
             "<sdk>/wakeful.h": "// sdk\n"}
EXPANDED = '__attribute__((section("spinfoam.main"), used)) sf_i64 main(void) { int y = 3; return nope + y; }'


def test_diag_restore_moves_the_caret_to_the_unique_token() -> None:
    at = EXPANDED.index("nope")
    text = (f"main.c:2:{at + 1}: error: use of undeclared identifier 'nope'\n    2 | {EXPANDED}\n"
            f"      | {' ' * at}^~~~\n1 error generated.\n")
    assert d.restore_source(text, ORIGINALS) == (
        "main.c:2:47: error: use of undeclared identifier 'nope'\n"
        "    2 | SF_MAIN sf_i64 main(void) { int y = 3; return nope + y; } // c\n"
        f"      | {' ' * 46}^~~~\n1 error generated.\n")


def test_diag_restore_falls_back_to_first_non_blank_column_without_caret() -> None:
    text = ("main.c:3:30: error: use of undeclared identifier 'undefined_thing'\n"
            "    3 |  int a; int x = ((2) + undefined_thing);\n"
            "      |                              ^~~~~~~~~~~~~~~\n"
            "main.c:3:30: error: use of undeclared identifier 'undefined_thing'\n")
    assert d.restore_source(text, ORIGINALS) == (
        "main.c:3:2: error: use of undeclared identifier 'undefined_thing'\n"
        "    3 |         int  a;   /* c */ int x = BAD(2);\n"
        "main.c:3:2: error: use of undeclared identifier 'undefined_thing'\n")  # every copy of the header


def test_diag_restore_leaves_identical_lines_and_unknown_files_alone() -> None:
    same = "main.c:4:10: error: use of undeclared identifier 'nope2'\n    4 | int ok = nope2;\n      |          ^~~~~\n"
    assert d.restore_source(same, ORIGINALS) == same
    host = "<host>/passwd:4:1: error: x\n    4 | int q = expanded;\n      | ^\n"
    assert d.restore_source(host, ORIGINALS) == host  # no bundle/SDK text under that name: nothing is looked up
    beyond = "main.c:99:1: error: x\n   99 | int q = expanded;\n      | ^\n"
    assert d.restore_source(beyond, ORIGINALS) == beyond
    nested = "nested/../main.c:4:1: error: x\n    4 | int   ok=nope2;\n      | ^\n"
    assert "    4 | int ok = nope2;" in d.restore_source(nested, ORIGINALS)


def test_diag_restore_escapes_control_characters() -> None:
    text = "e.c:1:1: error: x\n    1 | int a;\n      | ^\n"
    assert d.restore_source(text, {"e.c": "int \x1b[31ma;\x7f"}) == (
        "e.c:1:1: error: x\n    1 | int <U+001B>[31ma;<U+007F>\n      | ^\n")


def test_diag_restore_relabels_a_header_note_with_the_callers_line_number() -> None:
    """clang 22 labels a note's snippet inside an included header with the including file's line (issue 18)."""
    header = "// one\n// two\nextern long sf_json_dump(long value);\n"
    text = ("main.c:2:3: note: did you mean 'sf_json_dump'?\n"
            "<sdk>/wakeful.h:3:13: note: 'sf_json_dump' declared here\n"
            "    2 | extern long sf_json_dump(long value);\n      |             ^\n")
    out = d.restore_source(text, {"main.c": "x\ny\n", "<sdk>/wakeful.h": header})
    assert out == ("main.c:2:3: note: did you mean 'sf_json_dump'?\n"
                   "<sdk>/wakeful.h:3:13: note: 'sf_json_dump' declared here\n"
                   "    3 | extern long sf_json_dump(long value);\n      |             ^\n")


def test_diag_clang_advice_that_contradicts_the_dialect_is_dropped() -> None:
    text = ("main.c:2:1: error: Looks like the BPF stack limit is exceeded. Please move large on stack variables "
            "into BPF per-cpu array map. For non-kernel uses, the stack can be increased using -mllvm "
            "-bpf-stack-size.\n\n    2 | int x;\n")
    assert d.clean(text, "") == "main.c:2:1: error: Looks like the BPF stack limit is exceeded.\n    2 | int x;\n"
    jump = "main.c: error: JUMP_TABLE: section .jumptables: jump tables (.jumptables/gotox) are not supported; " \
           "rebuild with -fno-jump-tables\n"
    assert "rebuild" not in d.clean(jump, "")


def test_diag_explanations_come_first_in_text_order() -> None:
    text = ("main.c:3:1: error: thread-local storage is not supported for the current target\n"
            "main.c: error: RECURSION: main → f → main\n")
    error, _ = d.with_explanations(text)
    assert error.split("\n")[:2] == [
        "wakeful: there is no thread-local storage (_Thread_local, __thread); a Loop is one thread, use a static "
        "global", "wakeful: recursion is not allowed; use a loop with an explicit stack array"]
    assert error.endswith(text)
