"""build.md §4.1–4.3: the source scan, include resolution and the preprocessed-text check, in process."""

from __future__ import annotations

import pytest

from wakeful.build.bundle import validate
from wakeful.build.scan import (
    check_preprocessed,
    forbidden_predefined,
    is_forbidden,
    resolve_include,
    scan_bundle,
)

SDK = ["wakeful.h", "spinfoam.h", "stdint.h"]
CANARY = "/tmp/wakeful-canary/secret"


def scan(text: str, extra: dict[str, str] | None = None, entry: str = "main.c") -> list[str]:
    files = {entry: text, **(extra or {})}
    bundle = validate({"sdk_version": 1, "entry": entry, "files": files})
    return [f.format() for f in scan_bundle(bundle, SDK)]


def one(text: str, **kw: object) -> str:
    found = scan(text, **kw)  # type: ignore[arg-type]
    assert found, "expected a scan finding"
    return found[0]


@pytest.mark.parametrize("text", ['#include "/etc/passwd"\n', f'#include <{CANARY}>\n', f'#include "{CANARY}"\n'])
def test_scan_row1_absolute_include(text: str) -> None:
    assert "absolute include path" in one(text)


@pytest.mark.parametrize("text", ['#include "../x.h"\n', "#include <../sdk/wakeful.h>\n", '#include "a/../../x.h"\n'])
def test_scan_row2_escapes(text: str) -> None:
    assert "escapes the bundle" in one(text)


@pytest.mark.parametrize(
    "text",
    ['#define P "x.h"\n#include P\n', "#define P <x.h>\n#include P\n",
     "#define STR(x) #x\n#include STR(x.h)\n", '#include L"x.h"\n', '#include "x.h" extra\n', "#include\n",
     "#include <x.h\n"],
)
def test_scan_row3_computed_include(text: str) -> None:
    assert "computed include" in one(text)


@pytest.mark.parametrize(
    "text",
    [f'#include_next "{CANARY}"\n', '#import "x.h"\n', f'#embed "{CANARY}"\n', '#embed "h.h"\n',
     '#ident "x"\n', '#sccs "x"\n', "#assert x(y)\n", "#unassert x\n", "#frobnicate\n", '#"x"\n'],
)
def test_scan_row4_directives_not_allowed(text: str) -> None:
    assert "directive not allowed" in one(text, extra={"h.h": "int h;\n"})


@pytest.mark.parametrize(
    "text",
    ['#if __has_include("/etc/passwd")\n#endif\n', "#if __has_include_next(<x.h>)\n#endif\n",
     f'#if __has_embed("{CANARY}")\n#endif\n', '#define H __has_include("x")\n', "int __pragma;\n"],
)
def test_scan_row5_forbidden_identifiers(text: str) -> None:
    assert "forbidden identifier" in one(text)


@pytest.mark.parametrize(
    "text",
    ["#define C(a,b) a##b\n#if C(__has_,include)(\"x\")\n#endif\n",
     "#define C(a,b) a##b\nC(_Pra,gma)(\"GCC dependency \\\"x\\\"\")\n",
     "#define C(a,b) a##b\n#define D(a,b) C(a,b)\nD(__h,as_include)\n",
     "#define V(...) __VA_ARGS__##gma\nV(_Pra)\n",
     "#define C(a,b) a##b\nC(_,_has_embed)\n", "#define C(a,b) a##b\nC(__,pragma)\n"],
)
def test_scan_row6_forbidden_prefixes(text: str) -> None:
    assert "forbidden identifier" in one(text)


def test_scan_forbidden_prefix_rule() -> None:
    for name in ("_", "__", "__h", "__has_", "__has_include_nex", "_Pra", "__pragm", "__has_includeX", "_Pragma2"):
        assert is_forbidden(name), name
    for name in ("__x", "_x", "__attribute__", "__has_attribute", "__builtin_memcpy", "__asm__", "x_Pragma"):
        assert not is_forbidden(name), name


def test_scan_row7_pragma_operator() -> None:
    assert "forbidden identifier '_Pragma'" in one(f'_Pragma("GCC dependency \\"{CANARY}\\"")\n')


@pytest.mark.parametrize(
    ("text", "name"),
    [(f'#pragma GCC dependency "{CANARY}"\n', "GCC dependency"), ("#pragma clang module import x\n", "clang module"),
     ('#pragma include_alias("a.h", "/etc/passwd")\n', "include_alias"), ("#pragma clang __debug crash\n", "clang __debug"),
     ("#pragma clang __debug overflow_stack\n", "clang __debug"), ('#pragma comment(lib, "x")\n', "comment"),
     ("#pragma GCC warning \"x\"\n", "GCC warning"), ("#pragma weak x\n", "weak")],
)
def test_scan_row8_pragmas_refused_by_name(text: str, name: str) -> None:
    assert f"pragma not allowed: #pragma {name}" in one(text)


def test_scan_allowed_pragmas_and_directives() -> None:
    text = (
        "#pragma once\n#pragma pack(push, 1)\n#pragma unroll\n#pragma nounroll\n#pragma clang loop unroll(enable)\n"
        "#pragma GCC unroll 4\n#pragma GCC diagnostic push\n#pragma clang diagnostic ignored \"-Wall\"\n"
        "#pragma STDC FP_CONTRACT ON\n#pragma message(\"hi\")\n#pragma push_macro(\"X\")\n#pragma pop_macro(\"X\")\n"
        "#pragma GCC poison bad\n#pragma GCC system_header\n#pragma\n"
        "#define X 1\n#undef X\n#if 1\n#elif 0\n#else\n#endif\n#ifdef X\n#endif\n#ifndef X\n#elifdef Y\n#elifndef Z\n"
        "#endif\n#line 3 \"x.c\"\n# 4 \"y.c\" 1\n#error e\n#warning w\n#\n"
        '#include "h.h"\n#include <wakeful.h>\n#include "nested/v.h"\n#include <missing.h>\n'
    )
    assert scan(text, extra={"h.h": "\n", "nested/v.h": '#include "../h.h"\n'}) == []


@pytest.mark.parametrize(
    "text",
    ['#inc\\\nlude "/abs"\n', '#inc\\ \nlude "/abs"\n', '# /* c */ include "/abs"\n', '%:include "/abs"\n',
     '\v#include "/abs"\n', '\f#include "/abs"\n', '#if 0\n#include "/abs"\n#endif\n',
     '/* a\n */ #include "/abs"\n'],
)
def test_scan_row9_hidden_directives(text: str) -> None:
    assert "absolute include path" in one(text)


def test_scan_row12_identifiers() -> None:
    assert "universal character name" in one("int a\\u00e9;\n")
    assert "non-ASCII" in one("int é;\n")


@pytest.mark.parametrize("prefix", ["R", "LR", "uR", "UR", "u8R"])
def test_scan_row21_raw_strings(prefix: str) -> None:
    text = f'{prefix}"x(" /* )x";\n#embed "{CANARY}"\n// */\n'
    assert "raw string literal" in one(text)
    text2 = f'{prefix}"x(\n)x"; _Pragma("GCC dependency \\"{CANARY}\\"") int d;\n'
    assert any("raw string literal" in f for f in scan(text2))


def test_scan_positions_and_all_files() -> None:
    found = scan('int a;\n  #include "/x"\n', extra={"b/h.h": "#import <y>\n"})
    assert found == ["b/h.h:1:2: error: directive not allowed: #import", "main.c:2:12: error: absolute include path"]


def test_resolve_include_order_and_escapes() -> None:
    b = validate({"sdk_version": 1, "entry": "nested/main.c",
                  "files": {"nested/main.c": "", "include/value.h": "", "nested/v.h": "", "v.h": ""}})
    sdk = frozenset(SDK)
    assert resolve_include("../include/value.h", True, "nested", b, sdk) == ("src/include/value.h", None)
    assert resolve_include("v.h", True, "nested", b, sdk) == ("src/nested/v.h", None)
    assert resolve_include("v.h", False, "nested", b, sdk) == ("src/v.h", None)
    assert resolve_include("wakeful.h", False, "", b, sdk) == ("sdk/wakeful.h", None)
    assert resolve_include("nested/../v.h", False, "", b, sdk) == ("src/v.h", None)
    assert resolve_include("missing/../v.h", False, "", b, sdk) == (None, None)  # no such directory
    assert resolve_include("../sdk/wakeful.h", True, "", b, sdk) == (None, "include path escapes the bundle")
    assert resolve_include("limits.h", False, "", b, sdk) == (None, None)
    assert resolve_include("./nested/./../v.h", False, "", b, sdk) == ("src/v.h", None)


def test_forbidden_predefined_macros() -> None:
    macros = {"A": "__has_include", "B": "A", "C": "1", "D": "_", "E": "__x"}
    assert forbidden_predefined(macros) == frozenset({"A", "B", "D"})
    bundle = validate({"sdk_version": 1, "entry": "m.c", "files": {"m.c": "int x = B;\n"}})
    assert scan_bundle(bundle, SDK, frozenset({"B"}))


# §4.3: the preprocessed text
PP_HEAD = '# 1 "src/main.c"\n# 1 "<built-in>" 1\n# 1 "<built-in>" 3\n# 374 "<built-in>" 3\n# 1 "src/main.c" 2\n'


def test_pp_accepts_markers_pragmas_and_rewrites_faithfully() -> None:
    text = PP_HEAD + "int  x = 1;\n\n#pragma pack(push, 1)\n\tlong y;\n# 7 \"src/h.h\" 1 3 4\nchar z;\n"
    out, findings = check_preprocessed(text)
    assert findings == []
    assert out == text


@pytest.mark.parametrize(
    ("body", "message"),
    [(f' # embed "{CANARY}"\n', "directive token '#'"), (f'  # include "{CANARY}"\n', "directive token '#'"),
     (f'%: include "{CANARY}"\n', "directive token '%:'"), ("a ## b\n", "directive token '##'"),
     ("a %:%: b\n", "directive token '%:%:'"), ('x # 1 "a"\n', "directive token '#'"),
     ('# 1 "a" 5\n', "directive token '#'"), ('# 1 x\n', "directive token '#'"),
     ("#pragma GCC dependency \"x\"\n", "directive token '#'"), ("#define X\n", "directive token '#'"),
     ('asm(".incbin \\"x\\"");\n', "inline assembly"), ("__asm__(\"\");\n", "inline assembly"),
     ("__asm (\"\");\n", "inline assembly"), ("int __has_include;\n", "forbidden identifier"),
     ('R"x"\n', "raw string literal"), ("int a @ b;\n", "stray character"), ("int \\u00e9;\n", "universal character"),
     ("int é;\n", "non-ASCII")],
)
def test_pp_row23_and_7a_refusals(body: str, message: str) -> None:
    _, findings = check_preprocessed(PP_HEAD + "int ok;\n" + body)
    assert any(message in f.message for f in findings)
    assert findings[0].path == "src/main.c" and findings[0].line == 2


def test_pp_positions_follow_line_markers() -> None:
    _, findings = check_preprocessed('# 10 "src/h.h"\nint a;\nint asm;\n')
    assert [(f.path, f.line, f.col) for f in findings] == [("src/h.h", 11, 5)]


def test_pp_keeps_line_numbers_across_splices_and_comments() -> None:
    out, findings = check_preprocessed("int a = \\\n 1;\nint /* x\n */ b;\nint c;\n")
    assert findings == []
    assert out.split("\n")[4] == "int c;"
