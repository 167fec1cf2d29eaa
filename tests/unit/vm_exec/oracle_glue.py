"""The glue between the independent oracle (oracle_ebpf.py) and wakeful: the only place both meet.

It hands the oracle what an ELF holds (raw slots, relocations, section bytes) plus the layout facts the
verifier decides (frame sizes, stack size, vm.md §5.1), answers helper calls with the test kit's
deterministic ``Env`` (the same helpers the engines get), and compares the oracle with both engines on
registers (spilled by the generated programs), memory, exit code, fault and helper-call sequence.
Nothing here implements an instruction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oracle_ebpf as oracle
import oracle_elf
from vmexec_kit import Env, Outcome
from vmexec_kit import run as run_engine

from wakeful.errors import GuestFault
from wakeful.vm import asm, load

# sdk.md §9.8: arity of the helpers the test programs call; the two suspending ones are answered 0
ARITY = {"memcpy": 3, "memset": 3, "memcmp": 3, "memmove": 3, "sf_now_mono_ms": 0, "sf_yield": 0,
         "sf_sleep_ms": 1}
SUSPENDING = {"sf_yield", "sf_sleep_ms"}
CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "oracle"

Parts = Sequence[tuple[str, bytes, Sequence[asm.Reloc]]]


@dataclass
class _Writable:
    writable: int  # what the kit's Env reads of a Layout


@dataclass
class Three:
    """The same program run by the oracle, the interpreter and the translator."""

    oracle: tuple[Any, ...]
    interp: Outcome
    translate: Outcome
    steps: int

    def agree(self) -> bool:
        return self.oracle == self.interp.comparable() == self.translate.comparable()

    def why(self) -> str:
        names = ("r0", "fault", "mem", "events")
        out = []
        for i, name in enumerate(names):
            o, a, b = self.oracle[i], self.interp.comparable()[i], self.translate.comparable()[i]
            if not o == a == b:
                if name == "mem":
                    o, a, b = (_first_diff(o, a), _first_diff(o, b), "")
                out.append(f"{name}: oracle={o} interp={a} translate={b}")
        return "; ".join(out)


def _first_diff(x: bytes, y: bytes) -> str:
    at = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
    return f"differs at index {at} (lengths {len(x)}/{len(y)})"


def assemble(funcs: Sequence[tuple[str, str]]) -> list[tuple[str, bytes, list[asm.Reloc]]]:
    return [(name, *asm.assemble(text)) for name, text in funcs]


def run_three(parts: Parts, *, rodata: bytes = b"", data: bytes = b"", bss: int = 0,
              slice_insns: int = 16384, coverage: set[str] | None = None) -> Three:
    """Build one ELF from assembled functions and run it in all three."""
    blob = asm.elf([asm.Func(n, c, relocs=list(r)) for n, c, r in parts], rodata=rodata, data=data, bss=bss)
    return run_elf(blob, slice_insns=slice_insns, coverage=coverage)


def run_elf(blob: bytes, *, slice_insns: int = 16384, coverage: set[str] | None = None) -> Three:
    """Load ``blob`` in both engines and in the oracle (its own ELF reader), run all three."""
    progs = [load(blob, engine=e, slice_insns=slice_insns, max_elf_bytes=1 << 20) for e in ("interp", "translate")]
    interp, translate = run_engine(progs[0]), run_engine(progs[1])
    # layout facts from the verifier (vm.md §5.1): frame sizes and the stack size
    frames = {f.name: f.frame_bytes for f in progs[0].code.functions}
    layout = progs[0].layout
    loaded = oracle_elf.load(blob, frames, layout.stack_bytes)
    # the oracle lays memory out itself; the loader must agree with it (vm.md §5)
    assert (loaded.writable - oracle.BASE, len(loaded.mem)) == (layout.rodata_bytes, layout.size), layout
    env = Env()
    machine = oracle.Machine(loaded.code, loaded.mem, loaded.writable, _helpers(env), ARITY, coverage)
    env.mem, env.layout = machine.mem, _Writable(loaded.writable - oracle.BASE)  # type: ignore[assignment]
    result = machine.run()
    return Three((result.r0, result.fault, result.mem, env.calls), interp, translate, result.steps)


def _helpers(env: Env) -> oracle.Helper:
    def call(name: str, args: tuple[int, ...]) -> int:
        if name in SUSPENDING:
            env.calls.append(("suspend", name, *args))
            return 0
        try:
            return env.helper(name)(*args)
        except GuestFault as exc:
            raise oracle.OracleFault(exc.fault_code, exc.address, exc.size) from exc

    return call


# ---------------------------------------------------------------- the oracle's failure corpus (vm.md §9.2)


def save(name: str, funcs: Sequence[tuple[str, str]], *, rodata: bytes, data: bytes, bss: int,
         slice_insns: int) -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    entry = {"funcs": [list(f) for f in funcs], "rodata": rodata.hex(), "data": data.hex(), "bss": bss,
             "slice_insns": slice_insns}
    (CORPUS / f"{name}.json").write_text(json.dumps(entry, indent=1))


def saved() -> list[tuple[str, dict[str, Any]]]:
    return [(p.stem, json.loads(p.read_text())) for p in sorted(CORPUS.glob("*.json"))]


def replay(entry: dict[str, Any], coverage: set[str] | None = None) -> Three:
    return run_three(assemble([(str(n), str(t)) for n, t in entry["funcs"]]), rodata=bytes.fromhex(entry["rodata"]),
                     data=bytes.fromhex(entry["data"]), bss=entry["bss"], slice_insns=entry["slice_insns"],
                     coverage=coverage)
