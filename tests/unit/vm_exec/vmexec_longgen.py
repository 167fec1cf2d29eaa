"""Long loop-free functions for the differential tests (vm.md §6.1, issue 14 reproduction 5).

A function without back-edges or calls whose longest path costs more than 4,096 units is a generator
that must still yield. ``long_program(seed, n)`` gives such a function of exactly ``n`` instructions:
random ALU64/ALU32 arithmetic on r0-r7 (K and X forms), r10-relative stores and loads, and forward
conditional jumps over a few instructions, ending in a spill of r0-r9 to the stack and ``exit``. With
``callee=True`` it is a callee of a short ``main`` (which passes arguments and sums the result).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from vmexec_kit import Env, Outcome, run

from wakeful.vm import asm, load
from wakeful.vm.program import Program

# failing programs are saved here and replayed by tests/unit/vm_exec/test_vm_exec_long_loopfree.py
# (not tests/corpus/diff: these exceed the default 8,192-instruction limit)
CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "diff_long"

OPS = ["+=", "-=", "*=", "|=", "&=", "^=", "<<=", ">>=", "s>>="]
JUMPS = ["==", "!=", ">", ">=", "<", "<=", "s>", "s>=", "s<", "s<=", "&"]
SPILL = 10  # r0-r9 stored before exit
FRAME = 128  # r10-relative scratch [-FRAME, -SPILL*8)


def _insn(rng: random.Random, left: int) -> list[str]:
    """One to three instructions (never more than ``left``)."""
    d, s = rng.randrange(8), rng.randrange(8)
    w = rng.choice(("r", "w"))
    kind = rng.random()
    if kind < 0.1 and left >= 2:  # a forward jump over 1..min(left - 1, 6) instructions
        skip = rng.randrange(1, min(left - 1, 6) + 1)
        rhs = f"r{s}" if rng.random() < 0.5 else hex(rng.randrange(1 << 31))
        return [f"if {w}{d} {rng.choice(JUMPS)} {rhs if rhs[0] != 'r' else w + rhs[1:]} goto +{skip}"]
    if kind < 0.2:
        off = -8 * rng.randrange(SPILL + 1, FRAME // 8 + 1)
        if rng.random() < 0.5:
            return [f"*(u64 *)(r10 {off}) = r{s}"]
        return [f"r{d} = *(u64 *)(r10 {off})"]
    op = rng.choice(OPS)
    if op in ("<<=", ">>=", "s>>="):
        return [f"{w}{d} {op} {rng.randrange(64 if w == 'r' else 32)}"]
    if rng.random() < 0.5:
        return [f"{w}{d} {op} {w}{s}"]
    return [f"{w}{d} {op} {rng.randrange(-(1 << 31), 1 << 31)}"]


def body(seed: int, n: int) -> str:
    """Assembler text of one loop-free function of exactly ``n`` instructions (n > SPILL + 10)."""
    rng = random.Random(seed)
    lines = [f"r{r} = {rng.randrange(1 << 31)}" for r in range(8)]
    budget = n - len(lines) - SPILL - 1
    while budget > 0:
        for line in _insn(rng, budget):
            lines.append(line)
            budget -= 1
    lines += [f"*(u64 *)(r10 -{8 * (r + 1)}) = r{r}" for r in range(SPILL)]
    lines.append("exit")
    return "\n".join(lines)


def long_program(seed: int, n: int, *, callee: bool = False) -> list[tuple[str, str]]:
    """(name, text) functions: the long function as the entry, or called from a short main."""
    if not callee:
        return [("main", body(seed, n))]
    main = "r1 = 3\nr2 = 4\ncall long\nr6 = r0\nr1 = 5\ncall long\nr0 += r6\nexit"
    return [("main", main), ("long", body(seed, n))]


def build(funcs: list[tuple[str, str]], engine: str, slice_insns: int) -> Program:
    blob = asm.elf([asm.Func(n, t) for n, t in funcs])
    return load(blob, engine=engine, slice_insns=slice_insns, max_instructions=65536, max_elf_bytes=1 << 20)


def both(funcs: list[tuple[str, str]], slice_insns: int = 16384) -> tuple[Outcome, Outcome, Env, Env]:
    """Run in the interpreter and the translator; each env gets the engine's ``fuel_left``."""
    envs = Env(), Env()
    return (run(build(funcs, "interp", slice_insns), env=envs[0]),
            run(build(funcs, "translate", slice_insns), env=envs[1]), *envs)


def disagreement(name: str, funcs: list[tuple[str, str]], slice_insns: int) -> str | None:
    """None when both engines agree and exit; else save the program to the corpus and say why."""
    try:
        a, b, _, _ = both(funcs, slice_insns)
        reason = None if a.comparable() == b.comparable() and a.fault is None else (
            f"interp r0={a.r0} fault={a.fault} / translate r0={b.r0} fault={b.fault}")
    except Exception as exc:  # a crash is saved like a disagreement
        reason = f"{type(exc).__name__}: {exc}"
    if reason is not None:
        CORPUS.mkdir(exist_ok=True)
        entry = {"funcs": [list(f) for f in funcs], "slice_insns": slice_insns}
        (CORPUS / f"{name}.json").write_text(json.dumps(entry, indent=1))
        return f"{name}: {reason}"
    return None


def saved() -> list[tuple[str, dict[str, Any]]]:
    return [(p.stem, json.loads(p.read_text())) for p in sorted(CORPUS.glob("*.json"))]


def seed_program(seed: int) -> tuple[list[tuple[str, str]], int]:
    """Generated program ``seed``: 4,000-8,200 instructions, entry or callee, large or small slice."""
    n = 4000 + (seed * 1637) % 4201
    return long_program(1000 + seed, n, callee=seed % 2 == 1), (16384, 3000)[seed // 2 % 2]
