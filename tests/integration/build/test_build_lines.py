"""Issue 18: builds keep a line table from clang's debug line information, bound to the ELF's SHA-256 and never
changing the ELF, so a fault names the bundle line (and the SDK wrapper it happened in). Real clang, real VM."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from build_support import build, make_builder, require_available

from wakeful.build.driver import COMPILE, Builder, command_line
from wakeful.build.lines import build_line_table
from wakeful.errors import GuestFault
from wakeful.runtime.handles import HandleSpace
from wakeful.runtime.helpers import GuestContext
from wakeful.vm import load

pytestmark = pytest.mark.integration

SOURCE = """#include <wakeful.h>
static char out[8];
__attribute__((noinline)) static sf_i64 put(char *at, sf_i64 v) {
  *at = (char)v;
  return v;
}
SF_MAIN sf_i64 main(void) {
  sf_handle cfg = sf_config();
  sf_i64 mode = 0, at = 0;
  wf_json_get_i64(cfg, "mode", &mode);
  wf_json_get_i64(cfg, "at", &at);
  char *where = mode ? (char *)at : out; /* an address clang cannot see: no store is folded away */
  if (mode == 1)
    return (sf_i64)wf_u64_to_dec(12345, where, 8);
  return put(where, 7);
}
"""
DEC_LINE = 14  # the wf_u64_to_dec call: its stores fault inside the SDK wrapper
PUT_LINE = 4  # the store in the bundle's own function


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builder]:
    with make_builder(tmp_path_factory.mktemp("lines"), cache=True) as b:
        require_available(b)
        yield b


def fault_of(elf: bytes, mode: int, engine: str) -> GuestFault:
    prog = load(elf, engine=engine)
    ctx = GuestContext(HandleSpace(), "o1", layout=prog.layout, config={"mode": mode, "at": 16})
    inst = prog.instantiate(ctx)
    ctx.mem = inst.mem
    with pytest.raises(GuestFault) as caught:
        inst.gen.send(None)
    return caught.value


@pytest.mark.parametrize("engine", ["translate", "interp"])
def test_build_lines_fault_names_the_bundle_line(builder: Builder, engine: str) -> None:
    result = build(builder, SOURCE)
    assert result.state == "succeeded" and result.elf is not None, result.error
    table = result.lines
    assert table is not None and table.elf_sha256 == result.sha256
    inside = fault_of(result.elf, 1, engine)
    text = table.fault_text(str(inside), inside.function, inside.pc)
    assert text.startswith(f"main.c:{DEC_LINE}: ") and text.endswith(" (in wf_u64_to_dec)"), text
    assert str(inside) in text
    own = fault_of(result.elf, 2, engine)
    assert table.fault_text(str(own), own.function, own.pc) == f"main.c:{PUT_LINE}: {own}"
    assert table.fault_text("x", "no_such_function", 0) == "x"  # no row: the message unchanged


def test_build_lines_never_change_the_elf(builder: Builder, tmp_path: Path) -> None:
    """The returned ELF is the plain compile's, byte for byte: no debug section, same bytes as the compile step."""
    kept: list[Path] = []
    with make_builder(tmp_path / "root", cache=False,
                      keep_staging=lambda p: kept.append(Path(shutil.copytree(p, tmp_path / f"s{len(kept)}")))) as b:
        result = build(b, SOURCE)
    assert result.elf is not None and result.lines is not None
    assert b".debug_" not in result.elf and b".BTF" not in result.elf
    staging = kept[-1]
    (staging / "out" / "main.o").unlink()
    assert b.zig is not None
    subprocess.run(command_line(COMPILE, b.zig, "main.c", str(staging)), cwd=staging, check=True)
    assert (staging / "out" / "main.o").read_bytes() == result.elf
    debug = (staging / "out" / "lines.o").read_bytes()
    assert build_line_table(debug, result.elf, "x") is not None
    other = build(builder, SOURCE.replace("12345", "54321"))
    assert other.elf is not None and build_line_table(debug, other.elf, "x") is None  # code differs: no table
    assert build_line_table(b"\x7fELF" + bytes(60), result.elf, "x") is None


def test_build_lines_kept_by_the_cache(builder: Builder) -> None:
    first = build(builder, SOURCE + "// cached\n")
    second = build(builder, SOURCE + "// cached\n")
    assert second.cached and first.lines is not None and second.lines == first.lines
