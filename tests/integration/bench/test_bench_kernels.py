"""Guest CPU kernels (benchmarks.md §1.5): each builds, counts are linear in k from the reference interpreter,
and the translator's result equals the interpreter's."""

from __future__ import annotations

import pytest

from wakeful.bench.cpu import KERNELS, _counts, kernel_request, run_kernel

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_counts_and_agreement(name: str, compile_c) -> None:  # type: ignore[no-untyped-def]
    elf = compile_c(kernel_request(name)["files"]["main.c"])
    a, b, r1 = _counts(name, elf)  # raises when the engines disagree at k = 1 or 2
    assert b > 0 and a > 0
    r3, c3, _ = run_kernel(elf, 3, "interp")
    assert c3 == a + 3 * b  # count(k) = a + b·k holds beyond the two fitting points
    t3, _, _ = run_kernel(elf, 3, "translate")
    assert t3 == r3
