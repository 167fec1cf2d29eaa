"""Translator code shape (vm.md §6.1, §6.2): plain vs generator functions, native loops, linear size."""

from __future__ import annotations

import pytest
from vmexec_kit import build, run

from wakeful.vm.translate import MAX_REGION_DEPTH, PLAIN_COST_LIMIT, analyse_program


def kinds(funcs: list[tuple[str, str]]) -> dict[str, bool]:
    program = build(funcs, engine="translate")
    infos = analyse_program(program.code)
    return {program.code.functions[i].name: info.generator for i, info in infos.items()}


def test_straight_line_function_is_plain() -> None:
    assert kinds([("main", "r0 = 1\ncall leaf\nexit"), ("leaf", "r0 = 2\nexit")]) == {"main": False, "leaf": False}


def test_back_edge_makes_a_generator() -> None:
    loop = "r1 = 3\nl:\nr1 += -1\nif r1 != 0x0 goto l\nr0 = 0\nexit"
    assert kinds([("main", "call f\nexit"), ("f", loop)]) == {"main": True, "f": True}


def test_suspending_helper_makes_a_generator() -> None:
    assert kinds([("main", "call f\nexit"), ("f", "call sf_yield\nexit")]) == {"main": True, "f": True}


def test_helper_maximum_charges_count_towards_the_bound() -> None:
    # memcpy may charge 2,056 units: two calls exceed 4,096, one does not (vm.md §6.1, §6.3)
    one = "r1 = 0\nr2 = 0\nr3 = 0\ncall memcpy\nexit"
    two = "r1 = 0\nr2 = 0\nr3 = 0\ncall memcpy\ncall memcpy\nexit"
    assert kinds([("main", "call f\nexit"), ("f", one)])["f"] is False
    assert kinds([("main", "call f\nexit"), ("f", two)])["f"] is True
    assert 2 * 2056 > PLAIN_COST_LIMIT >= 2056


def test_call_cost_accumulates_through_plain_callees() -> None:
    leaf = "r0 = 1\n" * 300 + "exit"
    mid = "call leaf\n" * 10 + "exit"  # 10 * 301 + 11 > 4,096? no: 3,021
    top = "call mid\n" * 2 + "exit"  # 2 * 3,021 > 4,096: generator
    got = kinds([("main", top), ("mid", mid), ("leaf", leaf)])
    assert got == {"main": True, "mid": False, "leaf": False}


SHAPES = {
    "self-loop": ("r0 = 0\nr1 = 50\nl:\nr0 += r1\nr1 += -1\nif r1 != 0x0 goto l\nexit", 1275),
    "while-loop with ja back-edge": (
        "r0 = 0\nr1 = 50\nh:\nif r1 == 0x0 goto out\nr0 += r1\nr1 += -1\ngoto h\nout:\nexit", 1275),
    "nested loops": (
        "r0 = 0\nr1 = 10\no:\nr2 = 10\ni:\nr0 += 1\nr2 += -1\nif r2 != 0x0 goto i\nr1 += -1\n"
        "if r1 != 0x0 goto o\nexit", 100),
    "loop entered from below": (
        "r0 = 0\nr1 = 5\ngoto test\nbody:\nr0 += 3\nr1 += -1\ntest:\nif r1 != 0x0 goto body\nexit", 15),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_loops_become_native_while_loops(name: str) -> None:
    text, expected = SHAPES[name]
    program = build([("main", text)], engine="translate")
    source = program.translation()
    assert "while True:" in source
    assert run(program).r0 == expected == run(build([("main", text)], engine="interp")).r0


def test_self_loop_needs_no_dispatch() -> None:
    source = build([("main", SHAPES["self-loop"][0])], engine="translate").translation()
    assert "if L ==" not in source and "continue" not in source


def test_generated_size_is_linear_in_function_size() -> None:
    def lines(n: int) -> int:
        body = "".join(f"if r1 > 0x{i % 50:x} goto l{i}\nr1 += 1\nl{i}:\n" for i in range(n))
        text = f"r1 = 0\nr9 = 2\ntop:\n{body}r9 += -1\nif r9 != 0x0 goto top\nr0 = r1\nexit"
        return len(build([("main", text)], engine="translate").translation().splitlines())

    small, big = lines(50), lines(400)
    assert big < 8 * small * 1.25 + 50


def _deep_nest(depth: int) -> tuple[str, int]:
    """``depth`` nested bottom-tested loops with their counters on the stack (every eighth runs twice),
    and the value r0 ends with (a Python model of the same nest)."""
    head = "".join(f"*(u64 *)(r10 - {8 * (k + 1)}) = {2 if k % 8 == 0 else 1}\nh{k}:\nr0 += 1\n"
                   for k in range(depth))
    tail = "".join(f"r1 = *(u64 *)(r10 - {8 * (k + 1)})\nr1 += -1\n*(u64 *)(r10 - {8 * (k + 1)}) = r1\n"
                   f"if r1 != 0x0 goto h{k}\n" for k in reversed(range(depth)))

    def count(k: int) -> int:
        return 1 if k == depth else (2 if k % 8 == 0 else 1) * (1 + count(k + 1))

    return f"r0 = 0\n{head}r0 += 1\n{tail}exit", count(0)


@pytest.mark.parametrize("depth", [16, 17, 21, 40, 60])
def test_deep_loop_nests_stay_under_the_block_limit(depth: int) -> None:
    # CPython refuses more than 20 nested blocks: regions deeper than MAX_REGION_DEPTH use dispatch
    text, expected = _deep_nest(depth)
    program = build([("main", text)], engine="translate")
    assert program.fallback is None
    loops = [len(line) - len(line.lstrip()) for line in program.translation().splitlines()
             if line.strip() == "while True:"]
    assert loops and len(loops) <= MAX_REGION_DEPTH + 1
    assert run(program).r0 == expected == run(build([("main", text)], engine="interp")).r0
