"""build.md §7, issue 18: every dialect violation that reaches clang or the verifier gets its one-line `wakeful:`
rule first; clang advice that contradicts the dialect is gone; notes inside the SDK header quote the header's own
line; misspelled SDK names are suggested from the header's names. Real clang from the ziglang wheel."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from build_support import build, make_builder, require_available

from wakeful.build.driver import Builder, sdk_headers

pytestmark = pytest.mark.integration

H = "#include <wakeful.h>\n"


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builder]:
    with make_builder(tmp_path_factory.mktemp("diaghints"), cache=False) as b:
        require_available(b)
        yield b


def first_line(builder: Builder, source: str, failure: str) -> tuple[str, str]:
    result = build(builder, source)
    assert result.failure == failure, result.error
    error = result.error or ""
    return error.split("\n", 1)[0], error


def sdk_line(needle: str) -> tuple[str, int, str]:
    """(header, 1-based line, text) of the one SDK line containing ``needle``, wherever the header keeps it."""
    hits = [(name, number, text) for name, data in sdk_headers().items()
            for number, text in enumerate(data.decode().split("\n"), 1) if needle in text]
    assert len(hits) == 1, hits
    return hits[0]


def test_diag_hint_missing_sf_main_says_what_to_write(builder: Builder) -> None:
    first, error = first_line(builder, H + "sf_i64 main(void) { return 0; }\n", "verifier")
    assert first.startswith("wakeful: there is no entry point") and "SF_MAIN sf_i64 main(void)" in first
    assert "main.c: error: ELF_ENTRY: need exactly one non-empty code section named spinfoam.main" in error
    first, _ = first_line(builder, H + "SF_MAIN sf_i64 main(void) { return 0; }\nSF_MAIN sf_i64 b(void) { return 1; }\n",
                          "verifier")
    assert first == "wakeful: only one function may be marked SF_MAIN; make the others plain static functions"


def test_diag_hint_stack_has_no_contradicting_clang_advice(builder: Builder) -> None:
    src = H + ("SF_MAIN sf_i64 main(void) { volatile char buf[5000]; "
               "for (int i = 0; i < 5000; i++) buf[i] = (char)i; return buf[4999]; }\n")
    result = build(builder, src)
    assert result.failure == "compiler_error", result.error
    error = result.error or ""
    assert error.startswith("wakeful: a function may use about 4,000 bytes of locals"), error
    for text in (error, result.diagnostics):
        assert "per-cpu array map" not in text and "bpf-stack-size" not in text and "\n\n" not in text, text
    assert "main.c:2:1: error: Looks like the BPF stack limit is exceeded.\n    2 | SF_MAIN sf_i64 main(void) {" in error


def test_diag_hint_misspelled_sdk_name_is_suggested_from_the_header(builder: Builder) -> None:
    src = H + "SF_MAIN sf_i64 main(void) {\n  sf_json_drop(0);\n  return 0;\n}\n"
    first, error = first_line(builder, src, "compiler_error")
    assert first == "wakeful: sf_json_drop is not an SDK name; did you mean sf_json_dump? (names from wakeful.h)"
    assert "there is no C library" not in error  # the name is the SDK's, misspelled: not a libc hint


def test_diag_hint_note_inside_the_header_quotes_the_header_line(builder: Builder) -> None:
    """clang labels the header's snippet with the caller's line number; the note must show the header's line."""
    src = H + "\n" * 8 + "SF_MAIN sf_i64 main(void) {\n  sf_json_drop(0);\n  return 0;\n}\n"
    result = build(builder, src)
    error = result.error or ""
    header, number, text = sdk_line("sf_json_dump(")
    column = text.index("sf_json_dump") + 1
    assert f"<sdk>/{header}:{number}:{column}: note: 'sf_json_dump' declared here\n" \
           f"{number:>5} | {text}\n      | {' ' * (column - 1)}^\n" in error, error
    assert "main.c:11:3: error: call to undeclared function 'sf_json_drop'" in error
    assert "   11 |   sf_json_drop(0);\n" in error and error.count("   11 | ") == 1, error


def test_diag_hint_misspelled_macro_and_type_names(builder: Builder) -> None:
    first, _ = first_line(builder, H + "SF_MIAN sf_i64 main(void) { return 0; }\n", "compiler_error")
    assert first == "wakeful: SF_MIAN is not an SDK name; did you mean SF_MAIN? (names from wakeful.h)"
    first, _ = first_line(builder, H + "SF_MAIN sf_i64 main(void) { return SF_LIMT; }\n", "compiler_error")
    assert first == "wakeful: SF_LIMT is not an SDK name; did you mean SF_LIMIT? (names from wakeful.h)"
    first, _ = first_line(builder, "SF_MAIN sf_i64 main(void) { return 0; }\n", "compiler_error")
    assert first == "wakeful: SF_MAIN is declared by the SDK header: add #include <wakeful.h> at the top of the file"


def test_diag_hint_libc_names_point_only_at_helpers_that_do_the_job(builder: Builder) -> None:
    first, error = first_line(builder, H + "SF_MAIN sf_i64 main(void) {\n  const char *p = strstr(\"abc\", \"b\");\n"
                                           "  return p != 0;\n}\n", "compiler_error")
    assert first.startswith("wakeful: strstr is from the C library, which wakeful does not have"), first
    assert "wf_* helpers" not in error and "sf_strlen" not in first
    first, _ = first_line(builder, H + "SF_MAIN sf_i64 main(void) { printf(\"hi\"); return 0; }\n", "compiler_error")
    assert first == "wakeful: printf is from the C library, which wakeful does not have; use sf_log"
    first, _ = first_line(builder, H + "static sf_i64 f(sf_i64 x) { return g(x); }\n"
                                       "static sf_i64 g(sf_i64 x) { return x; }\nSF_MAIN sf_i64 main(void) { return f(1); }\n",
                          "compiler_error")
    assert first.startswith("wakeful: g is not declared: define or declare it above its first use"), first


@pytest.mark.parametrize(("source", "failure", "hint"), [
    ("__attribute__((noinline)) static sf_i64 fib(sf_i64 n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n"
     "SF_MAIN sf_i64 main(void) { volatile sf_i64 n = 5; return fib(n); }\n", "verifier",
     "wakeful: recursion is not allowed; use a loop with an explicit stack array"),
    ("_Thread_local sf_i64 t;\nSF_MAIN sf_i64 main(void) { t = 3; return t; }\n", "compiler_error",
     "wakeful: there is no thread-local storage (_Thread_local, __thread); a Loop is one thread, use a static global"),
    ("SF_MAIN sf_i64 main(void) { volatile int i = 1; void *l[] = {&&a, &&b}; goto *l[i]; a: return 1; b: return 2; }\n",
     "verifier", "wakeful: computed goto (goto *p, &&label) is not supported; use a switch"),
    ("SF_MAIN sf_i64 main(void) { volatile __int128 a = 100; volatile __int128 b = 7; return (sf_i64)(a / b); }\n",
     "compiler_error", "wakeful: no 128-bit arithmetic and no return values over 64 bits; use sf_i64/sf_u64 and "
                       "return bigger values through a pointer argument"),
    ("extern sf_i64 ext;\nSF_MAIN sf_i64 main(void) { return ext; }\n", "verifier",
     "wakeful: extern variables are not supported: define the variable in the bundle"),
    ("SF_MAIN sf_i64 main(void) { volatile double x = 1.5; x = x * 2.3; return (sf_i64)x; }\n", "compiler_error",
     "wakeful: floating point is not available; use integers, e.g. fixed point in thousandths"),
], ids=["recursion", "thread_local", "computed_goto", "int128", "extern_data", "float"])
def test_diag_hint_dialect_rule_comes_first(builder: Builder, source: str, failure: str, hint: str) -> None:
    first, error = first_line(builder, H + source, failure)
    assert first == hint, error
    assert "rebuild with -fno-jump-tables" not in error  # the build already passes it
