"""S10 (vm.md §9, §5.1) for clang-built programs: every fixture gives the same result with its computed frames
as with every frame at 4,096 bytes, and clang -O2 code that fills local arrays back to front (reproduction 4
of issue 14) returns the checksum Python computes."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "vm_exec"))

from vmexec_kit import Env, run  # noqa: E402
from vmexec_s10 import SAME, compare  # noqa: E402

from wakeful.vm import load  # noqa: E402
from wakeful.vm.isa import MASK64  # noqa: E402

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
SF_CLOSED = -6 & MASK64


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"s10_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixtures() -> dict[str, str]:
    """Every clang fixture of the VM tests and the benchmark guests and kernels, by name."""
    out: dict[str, str] = {}
    clang = _module(ROOT / "tests" / "integration" / "vm_exec" / "test_vm_exec_clang.py")
    for name, body in {**clang.PROGRAMS, **clang.KERNELS}.items():
        out[f"exec-{name}"] = clang.source(body.replace("ITERS", "2"))
    front = _module(ROOT / "tests" / "integration" / "vm_front" / "test_vm_front_clang.py")
    out.update({f"front-{name}": body for name, body in front.PROGRAMS.items()})
    for folder in ("src/wakeful/bench/kernels", "src/wakeful/bench/guests", "tests/support/guests"):
        out.update({f"{Path(folder).name}-{p.stem}": p.read_text() for p in sorted((ROOT / folder).glob("*.c"))})
    return out


class S10Env(Env):
    """The kit's deterministic env plus what the fixtures call: logs recorded with their bytes, and every other
    helper (no config, no JSON) answers SF_INVALID, so guests take their fallback paths."""

    def helper(self, name: str) -> Callable[..., int]:
        if hasattr(self, "h_" + name):
            return super().helper(name)

        def invalid(*args: int) -> int:
            self.calls.append((name, *args))
            return -1

        return invalid

    def h_sf_log_raw(self, ptr: int, length: int) -> int:
        assert self.mem is not None
        index = self._region(ptr, length, False, "sf_log_raw")
        self.calls.append(("logged", bytes(self.mem[index : index + length])))
        return 0


def answer(kind: str, args: tuple[int, ...]) -> int:
    return SF_CLOSED if kind == "sf_event_next" else 0


FIXTURES = fixtures()


@pytest.mark.parametrize("name", sorted(FIXTURES))
@pytest.mark.parametrize("engine", ["interp", "translate"])
def test_fixture_gives_the_same_result_with_full_frames(name: str, engine: str, compile_c: Any) -> None:
    program = load(compile_c(FIXTURES[name]), engine=engine, slice_insns=5000)
    verdict, a, b = compare(program, env=S10Env, answer=answer)
    assert verdict == SAME, (name, a[:2], b[:2])


# -- reproduction 4: clang -O2 fills a local array back to front --

BACK_TO_FRONT = r"""
#include <wakeful.h>
static sf_u64 table[64];
volatile int count = 40;
volatile sf_u64 seed = 12345;
SF_MAIN sf_i64 main(void) {
    for (int i = 0; i < 64; i++) table[i] = (sf_u64)i * 3 + 1;
    sf_u64 a[40];
    int m = count;
    sf_u64 x = seed;
    for (int i = 0; i < m; i++) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; a[39 - i] = x; }
    sf_u64 h = 0;
    for (int i = 0; i < m; i++) h = h * 31 + a[39 - i];
    for (int i = 0; i < 64; i++) h = h * 7 + table[i];
    return (sf_i64)h;
}
"""


def back_to_front_expected() -> int:
    x, a = 12345, [0] * 40
    for i in range(40):
        x = (x * 6364136223846793005 + 1442695040888963407) & MASK64
        a[39 - i] = x
    h = 0
    for i in range(40):
        h = (h * 31 + a[39 - i]) & MASK64
    for i in range(64):
        h = (h * 7 + i * 3 + 1) & MASK64
    return h


CALLEE_FILLS = r"""
#include <wakeful.h>
volatile int count = 24;
__attribute__((noinline)) static sf_u64 fill(int m) {
    sf_u64 a[24];
    for (int i = 0; i < m; i++) a[23 - i] = (sf_u64)(i + 1) * 0x9E3779B97F4A7C15ULL;
    sf_u64 h = 0;
    for (int i = 0; i < m; i++) h = h * 131 + a[23 - i];
    return h;
}
SF_MAIN sf_i64 main(void) {
    sf_u64 keep[8];
    for (int i = 0; i < 8; i++) keep[i] = 0x1111111111111111ULL * (sf_u64)(i + 1);
    sf_u64 h = fill(count);
    for (int i = 0; i < 8; i++) h = h * 3 + keep[i];
    return (sf_i64)h;
}
"""


def callee_fills_expected() -> int:
    a = [0] * 24
    for i in range(24):
        a[23 - i] = ((i + 1) * 0x9E3779B97F4A7C15) & MASK64
    h = 0
    for i in range(24):
        h = (h * 131 + a[23 - i]) & MASK64
    for i in range(8):
        h = (h * 3 + 0x1111111111111111 * (i + 1)) & MASK64
    return h


@pytest.mark.parametrize(("source", "expected"), [(BACK_TO_FRONT, back_to_front_expected),
                                                  (CALLEE_FILLS, callee_fills_expected)], ids=["main", "callee"])
@pytest.mark.parametrize("engine", ["interp", "translate"])
def test_clang_back_to_front_array_checksum(source: str, expected: Any, engine: str, compile_c: Any) -> None:
    program = load(compile_c(source), engine=engine)
    out = run(program)
    assert out.fault is None
    assert out.r0 == expected()
    verdict, a, b = compare(program)
    assert verdict == SAME, (a[:2], b[:2])
