"""vm.md §6.1 (issue 14 reproduction 5): a loop-free function whose longest path costs 4,097–8,192 units
is a generator and must yield like one.

It used to be emitted without a ``yield``: calling it returned ``(r0, fuel)`` and the ``yield from`` of
its caller failed with ``TypeError`` (``internal error`` at the runtime) — 4,096 instructions worked,
4,097 crashed. Both engines must agree for such functions as the entry and as a callee, straight-line
and with forward branches, and the translated one must charge its fuel (a small slice preempts it).
"""

from __future__ import annotations

import ast
import linecache
from typing import Any

import pytest
from vmexec_kit import Env, Outcome
from vmexec_longgen import both as run_both
from vmexec_longgen import build, disagreement, long_program, saved, seed_program

from wakeful.vm.translate import PLAIN_COST_LIMIT

SIZES = [4000, 4096, 4097, 6000, 8192, 8200]
BRANCHY = [4097, 8200]


def both(funcs: list[tuple[str, str]], slice_insns: int = 16384) -> tuple[Outcome, Outcome, Env, Env]:
    a, b, env_a, env_b = run_both(funcs, slice_insns)
    assert a.fault is None and a.r0 is not None
    assert a.comparable() == b.comparable()
    return a, b, env_a, env_b


def straight(n: int) -> list[tuple[str, str]]:
    return [("main", "r0 = 0\n" + "r0 += 1\n" * (n - 2) + "exit")]


@pytest.mark.parametrize("n", SIZES)
def test_straight_line_entries_agree_and_charge_exactly(n: int) -> None:
    a, b, env_a, env_b = both(straight(n))
    assert a.r0 == b.r0 == n - 2
    # a straight line's longest path is the path taken: both engines leave the same fuel
    assert env_a.fuel_left == env_b.fuel_left == 16384 - n  # type: ignore[attr-defined]


@pytest.mark.parametrize("n", BRANCHY)
@pytest.mark.parametrize("callee", [False, True], ids=["entry", "callee"])
def test_branchy_loop_free_functions_agree(n: int, callee: bool) -> None:
    both(long_program(n, n, callee=callee))


@pytest.mark.parametrize("callee", [False, True], ids=["entry", "callee"])
def test_a_long_loop_free_generator_is_preempted_when_its_fuel_runs_out(callee: bool) -> None:
    a, b, _, _ = both(long_program(7, 6000, callee=callee), slice_insns=1000)
    assert b.preempts >= 1 and a.preempts >= 1


def test_generators_without_loops_or_calls_contain_a_yield() -> None:
    program = build(long_program(3, PLAIN_COST_LIMIT + 1, callee=True), "translate", 16384)
    assert program.fallback is None and program._shape is not None
    assert program._shape.generators == {0, 1}
    tree = ast.parse("".join(linecache.getlines(program._shape.filename)))
    defs = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    for index in program._shape.generators:
        assert any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(defs[f"f{index}"])), index


def test_a_function_of_4096_units_stays_plain() -> None:
    program = build(straight(PLAIN_COST_LIMIT), "translate", 16384)
    assert program._shape is not None and program._shape.generators == frozenset()


@pytest.mark.parametrize("seed", range(4))
def test_generated_long_loop_free_programs_agree(seed: int) -> None:
    """The first seeds of the long loop-free corpus (the integration test runs more)."""
    funcs, slice_insns = seed_program(seed)
    assert disagreement(f"long-seed-{seed}", funcs, slice_insns) is None


SAVED = saved()


@pytest.mark.skipif(not SAVED, reason="no saved long loop-free failures")
@pytest.mark.parametrize(("name", "entry"), SAVED, ids=[n for n, _ in SAVED])
def test_saved_long_loop_free_programs_agree(name: str, entry: dict[str, Any]) -> None:
    both([(n, t) for n, t in entry["funcs"]], entry["slice_insns"])
