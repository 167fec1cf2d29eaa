"""build.md §6 rows 1–12, 7a, 14, 21–25: file-access attacks against a canary, in the three configurations.

Scans only and everything on: the expected outcome holds, identically for the existing and the missing path.
Landlock only (scans off): the build may succeed or fail, but the secret appears nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from build_support import (
    MAIN,
    Canary,
    leaks,
    make_builder,
    make_canary,
    require_available,
    require_landlock,
)

from wakeful.build.driver import Builder, BuildResult

pytestmark = pytest.mark.integration

# (id, source with @P@ for the canary path, expected failure, expected text in the error)
SCAN = "scan"
CASES: list[tuple[str, str, str, str]] = [
    ("r1-quote", '#include "@P@"\n', SCAN, "absolute include path"),
    ("r1-angle", "#include <@P@>\n", SCAN, "absolute include path"),
    ("r1-passwd", '#include "/etc/passwd"\n', SCAN, "absolute include path"),
    ("r2-dotdot", '#include "../x.h"\n', SCAN, "escapes the bundle"),
    ("r2-sdk", "#include <../sdk/wakeful.h>\n", SCAN, "escapes the bundle"),
    ("r2-nested", '#include "a/../../x.h"\n', SCAN, "escapes the bundle"),
    ("r3-string", '#define P "@P@"\n#include P\n', SCAN, "computed include"),
    ("r3-angle", "#define P <@P@>\n#include P\n", SCAN, "computed include"),
    ("r3-str", "#define STR(x) #x\n#include STR(@P@)\n", SCAN, "computed include"),
    ("r4-next", '#include_next "@P@"\n', SCAN, "directive not allowed"),
    ("r4-import", '#import "@P@"\n', SCAN, "directive not allowed"),
    ("r4-embed-host", 'const char e[] = {\n#embed "@P@"\n};\n', SCAN, "directive not allowed"),
    ("r4-embed-bundle", 'const char e[] = {\n#embed "data.h"\n};\n', SCAN, "directive not allowed"),
    ("r4-ident", '#ident "@P@"\n', SCAN, "directive not allowed"),
    ("r4-assert", "#assert machine(bpf)\n", SCAN, "directive not allowed"),
    ("r5-if", '#if __has_include("@P@")\nint y;\n#endif\n', SCAN, "forbidden identifier"),
    ("r5-next", '#if __has_include_next("@P@")\n#endif\n', SCAN, "forbidden identifier"),
    ("r5-embed", '#if __has_embed("@P@")\n#endif\n', SCAN, "forbidden identifier"),
    ("r5-macro", '#define H __has_include("@P@")\n#if H\n#endif\n', SCAN, "forbidden identifier"),
    ("r6-paste", '#define C(a,b) a##b\n#if C(__has_,include)("@P@")\nint y;\n#endif\n', SCAN, "forbidden identifier"),
    ("r6-two", '#define C(a,b) a##b\n#define D(a,b) C(a,b)\nD(_Pra,gma)("GCC dependency \\"@P@\\"")\n',
     SCAN, "forbidden identifier"),
    ("r6-va", '#define V(...) __VA_ARGS__\n#define C(a,b) a##b\n#if V(C(__has_,include))("@P@")\n#endif\n',
     SCAN, "forbidden identifier"),
    ("r7", '_Pragma("GCC dependency \\"@P@\\"")\n', SCAN, "forbidden identifier"),
    ("r7a-file", 'asm(".incbin \\"@P@\\"");\n', SCAN, "inline assembly"),
    ("r7a-func", 'void f(void) { asm(".incbin \\"@P@\\""); }\n', SCAN, "inline assembly"),
    ("r7a-include", '__asm__(".include \\"@P@\\"");\n', SCAN, "inline assembly"),
    ("r7a-paste", '#define C(a,b) a##b\nC(a,sm)(".incbin \\"@P@\\"");\n', SCAN, "inline assembly"),
    ("r7a-paste2", '#define C(a,b) a##b\nC(__as,m__)(".incbin \\"@P@\\"");\n', SCAN, "inline assembly"),
    ("r8-dependency", '#pragma GCC dependency "@P@"\n', SCAN, "pragma not allowed: #pragma GCC dependency"),
    ("r8-module", "#pragma clang module import x\n", SCAN, "pragma not allowed: #pragma clang module"),
    ("r8-alias", '#pragma include_alias("a.h", "@P@")\n#include "a.h"\n', SCAN, "pragma not allowed: #pragma include_alias"),
    ("r8-crash", "#pragma clang __debug crash\n", SCAN, "pragma not allowed: #pragma clang __debug"),
    ("r8-overflow", "#pragma clang __debug overflow_stack\n", SCAN, "pragma not allowed: #pragma clang __debug"),
    ("r8-comment", '#pragma comment(lib, "@P@")\n', SCAN, "pragma not allowed: #pragma comment"),
    ("r9-splice", '#inc\\\nlude "@P@"\n', SCAN, "absolute include path"),
    ("r9-splice-space", '#inc\\ \nlude "@P@"\n', SCAN, "absolute include path"),
    ("r9-comment", '# /* c */ include "@P@"\n', SCAN, "absolute include path"),
    ("r9-digraph", '%:include "@P@"\n', SCAN, "absolute include path"),
    ("r9-vt", '\v#include "@P@"\n', SCAN, "absolute include path"),
    ("r9-ff", '\f#include "@P@"\n', SCAN, "absolute include path"),
    ("r9-if0", '#if 0\n#include "@P@"\n#endif\n', SCAN, "absolute include path"),
    ("r10-trigraph", '??=include "@P@"\n', "compiler_error", "error"),
    ("r11-line", '#line 1 "@P@"\nint x = ;\n', "compiler_error", "<host>/secret.h:"),
    ("r11-marker", '# 1 "@P@"\nint x = ;\n', "compiler_error", "<host>/secret.h:"),
    ("r12-ucn", "int a\\u00e9;\n", SCAN, "universal character name"),
    ("r12-utf8", "int \u00e9;\n", SCAN, "non-ASCII"),
    *[(f"r21-{p}-embed", f'{p}"x(" /* )x";\n#embed "@P@"\n// */\n', SCAN, "raw string literal")
      for p in ("R", "LR", "uR", "UR", "u8R")],
    *[(f"r21-{p}-pragma", f'{p}"x(\n)x"; _Pragma("GCC dependency \\"@P@\\"") int d;\n', SCAN, "raw string literal")
      for p in ("R", "LR", "uR", "UR", "u8R")],
    ("r23-hash", '#define H #\nH embed "@P@"\n', SCAN, "directive token '#'"),
    ("r23-empty", '#define E\nE # include "@P@"\n', SCAN, "directive token '#'"),
    ("r23-digraph", '#define H %:\nH include "@P@"\n', SCAN, "directive token '%:'"),
    ("r23-paste", "#define H(x) x\nH(##) H(%:%:)\n", SCAN, "directive token '##'"),
    ("r25-limits", "#include <limits.h>\n", "compiler_error", "'limits.h' file not found"),
    ("r25-stdarg", "#include <stdarg.h>\n", "compiler_error", "'stdarg.h' file not found"),
]
CONFIGS = ("scans-only", "landlock-only", "everything-on")


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Canary:
    return make_canary(tmp_path_factory.mktemp("canary"))


@pytest.fixture(scope="module")
def builders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Builder]]:
    base = tmp_path_factory.mktemp("confinement")
    made = {
        "scans-only": make_builder(base / "scans", landlock=False, cache=False),
        # scans off lets `#pragma clang __debug overflow_stack` spin: bound it well below 15 s
        "landlock-only": make_builder(base / "landlock", scans=False, cache=False, cpu_seconds=2,
                                      deadline_seconds=3.0),
        "everything-on": make_builder(base / "all", cache=False),
    }
    yield made
    for b in made.values():
        b.close()


def attack(builder: Builder, template: str, path: str) -> BuildResult:
    source = template.replace("@P@", path) + MAIN
    files = {"main.c": source, "data.h": "1, 2, 3\n"}
    return builder.compile_blocking({"sdk_version": 1, "entry": "main.c", "files": files})


def normalised(result: BuildResult, canary: Canary) -> tuple[str | None, str]:
    text = (result.error or "").replace(canary.path, "@P@").replace(canary.missing, "@P@")
    return result.failure, text


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(("case", "template", "failure", "text"), CASES, ids=[c[0] for c in CASES])
def test_confinement_attack(
    builders: dict[str, Builder], canary: Canary, config: str, case: str, template: str, failure: str, text: str
) -> None:
    builder = builders[config]
    require_available(builder)
    if config == "landlock-only":
        require_landlock(builder)
    outcomes = []
    for path in (canary.path, canary.missing):
        result = attack(builder, template, path)
        assert leaks(result, canary.secret, builder.build_root) == [], (case, config, result.error)
        outcomes.append(normalised(result, canary))
        if config != "landlock-only":
            assert result.state == "failed" and result.failure == failure, (case, result.failure, result.error)
            assert text in (result.error or ""), (case, result.error)
    if config != "landlock-only":
        assert outcomes[0] == outcomes[1], f"{case}: the existence of the canary shows"


def test_confinement_row14_output_symlink(tmp_path: Path, canary: Canary) -> None:
    """Row 14: the object replaced by a symlink to the canary before collection is refused (O_NOFOLLOW)."""
    before = Path(canary.path).read_bytes(), Path(canary.path).stat().st_mtime_ns

    def swap(staging: Path) -> None:
        obj = staging / "out" / "main.o"
        obj.unlink()
        obj.symlink_to(canary.path)

    with make_builder(tmp_path / "b", before_collect=swap, cache=False) as builder:
        require_available(builder)
        result = attack(builder, "", canary.path)
        assert result.state == "failed" and result.failure == "internal"
        assert "could not be opened" in (result.error or "")
        assert leaks(result, canary.secret, builder.build_root) == []
    assert (Path(canary.path).read_bytes(), Path(canary.path).stat().st_mtime_ns) == before


def test_confinement_row14_planted_staging_symlinks(tmp_path: Path, canary: Canary) -> None:
    """Row 14: symlinks planted where staging roots would be are never followed (fresh mkdtemp)."""
    with make_builder(tmp_path / "b", cache=False) as builder:
        require_available(builder)
        target = Path(canary.path).parent
        listing = sorted(p.name for p in target.iterdir())
        for i in range(64):
            (builder.build_root / "tmp" / f"s{i}-planted{i}").symlink_to(target)
        result = attack(builder, "", canary.path)
        assert result.state == "succeeded", result.error
        assert sorted(p.name for p in target.iterdir()) == listing


def test_confinement_row22_normalised_files_build(tmp_path: Path) -> None:
    """Row 22: a CRLF file and a file starting with U+FEFF are normalised and build."""
    with make_builder(tmp_path / "b", cache=False) as builder:
        require_available(builder)
        crlf = attack(builder, "int a;\r\n#define X 1\r\n".replace("\n", "\n"), "")
        assert crlf.state == "succeeded", crlf.error
        bom = builder.compile_blocking(
            {"sdk_version": 1, "entry": "main.c", "files": {"main.c": "\ufeff" + MAIN.replace("\n", "\r\n")}}
        )
        assert bom.state == "succeeded", bom.error


def test_confinement_row24_backend_crashes(tmp_path: Path) -> None:
    """Row 24: crashes report compiler_crashed with the explanation; no reproducer, no staging or zig path."""
    kept: list[list[str]] = []

    def keep(staging: Path) -> None:
        kept.append(sorted(str(p.relative_to(staging)) for p in staging.rglob("*")))

    with make_builder(tmp_path / "b", scans=False, cache=False, keep_staging=keep) as builder:
        require_available(builder)
        zig_dir = str(Path(builder.zig or "").parent)
        for pragma in ("#pragma clang __debug crash\n", "#pragma clang __debug llvm_fatal_error\n"):
            result = attack(builder, pragma, "")
            assert result.state == "failed" and result.failure == "compiler_crashed", result.error
            error = result.error or ""
            assert "wakeful: the compiler crashed on this input" in error
            assert str(builder.build_root) not in error and zig_dir not in error and "/tmp/" not in error
            assert "PLEASE submit" not in error and "Stack dump" not in error
        variadic = attack(builder, "int f(int n, ...) { return n; }\n", "")
        assert variadic.failure in ("compiler_error", "compiler_crashed")
        assert "wakeful: no variadic functions" in (variadic.error or "") or variadic.failure == "compiler_crashed"
    reproducers = [name for listing in kept for name in listing
                   if name.endswith((".sh", ".crash")) or "-" in Path(name).name and name.endswith(".c")]
    assert reproducers == []
    assert all(name.split("/")[0] in ("src", "sdk", "out", "tmp") for listing in kept for name in listing)
