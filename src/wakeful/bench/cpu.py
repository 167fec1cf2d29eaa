"""Guest CPU speed (benchmarks.md §1.5): five fixed kernels, exact counts from the reference interpreter.

``count(k) = a + b·k`` from interpreter runs at k = 1 and 2; the translator runs k for about 0.5 s, best of 3.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from wakeful.bench.variants import BenchError
from wakeful.runtime import GuestContext, HandleSpace
from wakeful.vm import PREEMPT, load

__all__ = ["KERNELS", "kernel_request", "measure_kernels", "run_kernel"]

KERNELS = ("fnv", "search", "fill", "sort", "itoa")
TARGET_SECONDS = 0.5  # §1.5: k chosen for about 0.5 s
BEST_OF = 3
SLICE = 16_384

Compile = Callable[[dict[str, Any]], bytes]


def kernel_request(name: str) -> dict[str, Any]:
    """The build request of kernel ``name`` (``kernels/<name>.c``, self-contained)."""
    text = resources.files("wakeful.bench").joinpath("kernels", f"{name}.c").read_text(encoding="utf-8")
    return {"sdk_version": 1, "entry": "main.c", "files": {"main.c": text}}


def run_kernel(elf: bytes, iterations: int, engine: str) -> tuple[int, int, float]:
    """Run one kernel to exit → ``(r0, retired instructions, seconds)``; a guest fault is a ``BenchError``."""
    program = load(elf, engine=engine, slice_insns=SLICE)
    ctx = GuestContext(HandleSpace(), "kernel", layout=program.layout, config={"iterations": iterations})
    inst = program.instantiate(ctx)
    ctx.mem = inst.mem
    gen = inst.gen
    began = time.perf_counter()
    try:
        request = next(gen)
        while True:
            kind, fuel, _args = request
            if kind != PREEMPT:
                raise BenchError(f"kernel suspended in {kind}")
            request = gen.send((0, SLICE + fuel))
    except StopIteration as stop:
        return int(stop.value), ctx.retired, time.perf_counter() - began
    except Exception as exc:  # a guest fault ends the measurement with its message
        raise BenchError(f"kernel failed: {exc}") from None


def _counts(name: str, elf: bytes) -> tuple[int, int, int]:
    """§1.5: interpreter retired counts at k = 1 and 2 → (a, b, r0 at k = 1); the translator must agree."""
    results = []
    for k in (1, 2):
        r, count, _ = run_kernel(elf, k, "interp")
        translated, _, _ = run_kernel(elf, k, "translate")
        if translated != r:
            raise BenchError(f"kernel {name}: translated result {translated} != interpreter {r} at k={k}")
        results.append((r, count))
    (r1, c1), (_, c2) = results
    return c1 - (c2 - c1), c2 - c1, r1


def _iterations(elf: bytes) -> int:
    """k for about 0.5 s: a probe at k = 1, then one rescaled trial."""
    _, _, probe = run_kernel(elf, 1, "translate")
    k = max(1, round(TARGET_SECONDS / 4 / max(probe, 1e-6)))
    _, _, trial = run_kernel(elf, k, "translate")
    return max(1, round(k * TARGET_SECONDS / max(trial, 1e-6)))


def _measure(name: str, elf: bytes) -> dict[str, Any]:
    a, b, r_interp = _counts(name, elf)
    k = _iterations(elf)
    best = math.inf
    for _ in range(BEST_OF):
        _, _, seconds = run_kernel(elf, k, "translate")
        best = min(best, seconds)
    insns = a + b * k
    return {
        "insns": insns,
        "iterations": k,
        "seconds": best,
        "minsn_per_s": insns / best / 1e6,
        "result": r_interp,
    }


def measure_kernels(compile_elf: Compile, names: tuple[str, ...] = KERNELS) -> dict[str, Any]:
    """§1.5: every kernel's figures and the geometric mean in M insn/s."""
    kernels = {name: _measure(name, compile_elf(kernel_request(name))) for name in names}
    rates = [k["minsn_per_s"] for k in kernels.values()]
    geomean = math.exp(sum(math.log(r) for r in rates) / len(rates)) if rates else 0.0
    return {"kernels": kernels, "geomean_minsn_per_s": geomean}
