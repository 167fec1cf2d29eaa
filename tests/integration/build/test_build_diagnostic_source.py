"""build.md §4.3, §7 (audit item 10): compile-step diagnostics quote the agent's own source line, not the
macro-expanded line of the driver-written `out/main.i`, and never quote a host file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from build_support import build, make_builder, make_canary, require_available

from wakeful.build.driver import Builder

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builder]:
    with make_builder(tmp_path_factory.mktemp("diagsrc"), cache=False) as b:
        require_available(b)
        yield b


def test_diagnostic_source_quotes_the_sf_main_line_with_its_column(builder: Builder) -> None:
    line = "SF_MAIN sf_i64 main(void) { sf_i64 y = 3; return nope + y; } // tail"
    result = build(builder, "#include <wakeful.h>\n" + line + "\n")
    assert result.failure == "compiler_error", result.error
    error = result.error or ""
    column = line.index("nope")
    assert f"main.c:2:{column + 1}: error: use of undeclared identifier 'nope'" in error
    assert f"    2 | {line}\n      | {' ' * column}^~~~\n" in error
    assert "__attribute__" not in error and "spinfoam.main" not in error


def test_diagnostic_source_macro_expansion_points_at_the_line(builder: Builder) -> None:
    files = {"main.c": '#include <wakeful.h>\n#include "inc/bad.h"\nSF_MAIN sf_i64 main(void) {\n'
                       "  sf_i64 x = BAD(2);\n  return x;\n}\n",
             "inc/bad.h": "#define BAD(v) ((v) + undefined_thing)\n"}
    result = build(builder, files)
    error = result.error or ""
    assert "main.c:4:3: error: use of undeclared identifier 'undefined_thing'" in error, error
    assert "    4 |   sf_i64 x = BAD(2);\n" in error and "((2) + undefined_thing)" not in error


def test_diagnostic_source_stack_limit_quotes_sf_main(builder: Builder) -> None:
    src = ("#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { volatile char buf[5000]; "
           "for (int i = 0; i < 5000; i++) buf[i] = (char)i; return buf[4999]; }\n")
    result = build(builder, src)
    error = result.error or ""
    assert "stack limit is exceeded" in error and "    2 | SF_MAIN sf_i64 main(void) {" in error, error
    assert "__attribute__" not in error


def test_diagnostic_source_never_quotes_a_host_file(builder: Builder, tmp_path: Path) -> None:
    """A line marker may name any file; only bundle and SDK texts are ever substituted."""
    canary = make_canary(tmp_path)
    src = f'#include <wakeful.h>\n#line 1 "{canary.path}"\nSF_MAIN sf_i64 main(void) {{ return nope; }}\n'
    result = build(builder, src)
    assert result.failure == "compiler_error", result.error
    assert canary.secret not in (result.error or "") + result.diagnostics
    assert "<host>/secret.h:1:" in (result.error or "")
