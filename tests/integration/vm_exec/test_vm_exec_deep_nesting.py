"""Deeply nested loops (vm.md §9 S8, §6.2): clang-built programs with 20, 21 and 40 nested loops load and
run in both engines with equal results; a translation CPython refuses falls back to the interpreter.

CPython refuses more than 20 statically nested blocks; before the fix a 21-deep loop nest was a
``SyntaxError`` at load (an internal error instead of a program or ``InvalidObject``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "vm_exec"))

from vmexec_kit import run  # noqa: E402

import wakeful.vm.translate as translate_mod  # noqa: E402
from wakeful.vm import clear_caches, load, shape_stats  # noqa: E402

pytestmark = pytest.mark.integration


def nest_source(depth: int) -> str:
    """``depth`` nested counted loops; the bound is read from memory so clang keeps every loop.
    Every fifth level runs twice, the others once (the innermost body runs 2^ceil(depth/5) times)."""
    head = "".join(f"for (volatile int i{k} = 0; i{k} < lim[{int(k % 5 == 0)}]; i{k}++) {{ g++;\n" for k in range(depth))
    return ("#include <wakeful.h>\n"
            "static volatile sf_u64 g; static volatile int lim[2] = {1, 2};\n"
            "SF_MAIN sf_i64 main(void) { sf_u64 t = 0;\n"
            f"{head} t += g;\n{'}' * depth}\nreturn (sf_i64)t; }}\n")


def expected(depth: int) -> int:
    """The value of ``t``: a Python model of the same loop nest."""
    state = {"g": 0, "t": 0}

    def level(k: int) -> None:
        if k == depth:
            state["t"] += state["g"]
            return
        for _ in range(2 if k % 5 == 0 else 1):
            state["g"] += 1
            level(k + 1)

    level(0)
    return state["t"] & ((1 << 64) - 1)


@pytest.mark.parametrize("depth", [20, 21, 40])
def test_deep_loop_nests_run_in_both_engines(depth: int, compile_c: Any) -> None:
    elf = compile_c(nest_source(depth))
    a = run(load(elf, engine="interp"))
    translated = load(elf, engine="translate")
    assert translated.fallback is None  # the depth limit keeps CPython's block limit out of reach
    b = run(translated)
    assert a.fault is None and b.fault is None
    assert a.r0 == b.r0 == expected(depth)
    assert a.comparable() == b.comparable()


def test_untranslatable_program_falls_back_to_the_interpreter(compile_c: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # without the depth limit a 21-deep nest hits CPython's SyntaxError: the backstop must catch it
    monkeypatch.setattr(translate_mod, "MAX_REGION_DEPTH", 1000)
    clear_caches()
    elf = compile_c(nest_source(21))
    before = shape_stats()
    program = load(elf, engine="translate")
    after = shape_stats()
    assert program.fallback is not None and "SyntaxError" in program.fallback
    assert after["fallbacks"] == before["fallbacks"] + 1
    assert "reference interpreter" in program.translation()
    out = run(program)
    assert out.fault is None and out.r0 == expected(21)
    assert out.comparable() == run(load(elf, engine="interp")).comparable()
    clear_caches()

