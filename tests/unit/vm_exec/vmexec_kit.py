"""Test kit for the execution engines: build programs from assembler text, a deterministic GuestEnv,
and a driver that runs a program to completion in either engine and records what happened.

``build()`` goes through ``asm.elf`` + ``wakeful.vm.load`` when the loader exists; until then it links
the assembler output by hand into ``LinkedCode``/``Layout`` (vm/linked.py conventions).
"""

from __future__ import annotations

import importlib.util
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wakeful.errors import GuestFault
from wakeful.vm import asm, isa
from wakeful.vm.guest import PREEMPT
from wakeful.vm.isa import BASE, Insn
from wakeful.vm.linked import Function, Layout, LinkedCode
from wakeful.vm.program import Program

HAVE_LOADER = importlib.util.find_spec("wakeful.vm.loader") is not None
FRAME = 512


# ---------------------------------------------------------------- building programs


def _align(n: int, a: int = 8) -> int:
    return (n + a - 1) // a * a


def link_by_hand(funcs: Sequence[tuple[str, str]], *, rodata: bytes = b"", data: bytes = b"",
                 bss: int = 0) -> tuple[LinkedCode, Layout]:
    """A minimal linker for tests: first function is the entry; calls by name; rodata/data/bss refs."""
    r = _align(len(rodata))
    d = _align(len(data) + bss)
    bases = {".rodata": BASE, ".data": BASE + r, ".bss": BASE + r + len(data)}
    names = [n for n, _ in funcs]
    insns: list[Insn] = []
    spans: list[tuple[int, int, list[tuple[int, Any]]]] = []
    helpers: list[str] = []
    for _name, text in funcs:
        raw, relocs = asm.assemble(text)
        start = len(insns)
        decoded = list(isa.decode_all(raw))
        byslot = {rl.offset // 8: rl for rl in relocs}
        calls: list[int] = []
        for i, ins in enumerate(decoded):
            rl = byslot.get(i)
            if ins.op == isa.OP_LDDW:
                value = (ins.imm & isa.MASK32) | ((decoded[i + 1].imm & isa.MASK32) << 32)
                if rl is not None:
                    value += bases[asm.SECTION_ALIASES.get(str(rl.symbol), str(rl.symbol))]
                insns.append(Insn(ins.op, ins.dst, 0, 0, value & isa.MASK64))
                insns.append(Insn(0, 0, 0, 0, 0))
                continue
            if ins.op == isa.OP_LDDW or (i > 0 and decoded[i - 1].op == isa.OP_LDDW):
                continue
            if ins.op == isa.OP_CALL and rl is not None:
                sym = str(rl.symbol)
                if sym in names:
                    calls.append(names.index(sym))
                    ins = Insn(ins.op, 0, isa.PSEUDO_CALL, 0, names.index(sym))
                else:
                    if sym not in helpers:
                        helpers.append(sym)
                    ins = Insn(ins.op, 0, isa.PSEUDO_HELPER, 0, helpers.index(sym))
            insns.append(ins)
        spans.append((start, len(insns), calls))
    functions = tuple(
        Function(n, "spinfoam.main" if i == 0 else ".text", s, e, FRAME, tuple(dict.fromkeys(c)), ())
        for i, (n, (s, e, c)) in enumerate(zip(names, spans))
    )
    image = rodata + bytes(r - len(rodata)) + data + bytes(d - len(data))
    layout = Layout(r, d, bss, FRAME * len(funcs), image)
    code = LinkedCode(tuple(insns), functions, 0, tuple(helpers), {f.start: i for i, f in enumerate(functions)})
    return code, layout


def build(funcs: Sequence[tuple[str, str]], *, engine: str, rodata: bytes = b"", data: bytes = b"",
          bss: int = 0, slice_insns: int = 16384, via_elf: bool | None = None,
          max_elf_bytes: int = 65536) -> Program:
    """A Program from assembler text, through asm.elf + load when the loader exists."""
    if via_elf is None:
        via_elf = HAVE_LOADER
    if via_elf:
        from wakeful.vm import load

        data_elf = asm.elf([asm.Func(n, t) for n, t in funcs], rodata=rodata, data=data, bss=bss)
        return load(data_elf, engine=engine, slice_insns=slice_insns, max_elf_bytes=max_elf_bytes)
    code, layout = link_by_hand(funcs, rodata=rodata, data=data, bss=bss)
    return Program(code, layout, engine=engine, slice_insns=slice_insns)


# ---------------------------------------------------------------- a deterministic guest environment


class Env:
    """A GuestEnv with deterministic memcpy/memset/memcmp/sf_now_mono_ms that records every call."""

    def __init__(self) -> None:
        self.debt = 0
        self.retired = 0
        self.calls: list[tuple[Any, ...]] = []
        self.mem: bytearray | None = None
        self.layout: Layout | None = None
        self.clock = 0

    def helper(self, name: str) -> Callable[..., int]:
        fn: Callable[..., int] = getattr(self, "h_" + name)

        def call(*args: int) -> int:
            self.calls.append((name, *args))
            return fn(*args)

        return call

    def _region(self, ptr: int, length: int, write: bool, helper: str) -> int:
        assert self.mem is not None and self.layout is not None
        lo = BASE + (self.layout.writable if write else 0)
        if length and not (lo <= ptr and ptr + length <= BASE + len(self.mem)):
            raise GuestFault("HELPER_POINTER", f"{helper}: invalid pointer 0x{ptr:x} length {length}",
                             address=ptr, size=length, helper=helper)
        self.debt += (length + 15) // 16
        return ptr - BASE

    def h_memcpy(self, dst: int, src: int, n: int) -> int:
        self.debt += 8
        d, s = self._region(dst, n, True, "memcpy"), self._region(src, n, False, "memcpy")
        assert self.mem is not None
        self.mem[d : d + n] = self.mem[s : s + n]
        return dst

    def h_memset(self, dst: int, value: int, n: int) -> int:
        self.debt += 8
        d = self._region(dst, n, True, "memset")
        assert self.mem is not None
        self.mem[d : d + n] = bytes([value & 0xFF]) * n
        return dst

    def h_memcmp(self, a: int, b: int, n: int) -> int:
        self.debt += 8
        i, j = self._region(a, n, False, "memcmp"), self._region(b, n, False, "memcmp")
        assert self.mem is not None
        x, y = bytes(self.mem[i : i + n]), bytes(self.mem[j : j + n])
        return (x > y) - (x < y)

    def h_sf_now_mono_ms(self) -> int:
        self.debt += 8
        self.clock += 7
        return self.clock


@dataclass
class Outcome:
    """What one run did: exit r0 or fault, memory, helper calls and suspensions (in order)."""

    r0: int | None = None
    fault: tuple[str, int | None, int | None, str | None, int | None] | None = None
    mem: bytes = b""
    events: list[tuple[Any, ...]] = field(default_factory=list)
    preempts: int = 0
    retired: int = 0
    fuel_at_preempt: list[int] = field(default_factory=list)

    def comparable(self) -> tuple[Any, ...]:
        return (self.r0, self.fault, self.mem, self.events)


def run(program: Program, *, max_preempts: int = 10_000, answer: Callable[[str, tuple[int, ...]], int] | None = None,
        env: Env | None = None) -> Outcome:
    """Drive a guest to its end: PREEMPT resumes with a fresh slice (debt carried), suspensions are
    answered with ``answer(kind, args)`` (default 0) and a fresh slice."""
    env = env or Env()
    inst = program.instantiate(env)
    env.mem, env.layout = inst.mem, program.layout
    out = Outcome()
    send: Any = None
    slice_insns = program.slice_insns
    try:
        while True:
            kind, fuel, args = inst.gen.send(send)
            if kind == PREEMPT:
                out.preempts += 1
                out.fuel_at_preempt.append(fuel)
                if out.preempts > max_preempts:
                    inst.gen.close()
                    raise AssertionError("guest did not finish")
                send = (0, slice_insns + fuel)
                continue
            env.calls.append(("suspend", kind, *args))
            send = ((answer or (lambda k, a: 0))(kind, args), slice_insns)
    except StopIteration as stop:
        out.r0 = stop.value
    except GuestFault as exc:
        out.fault = (exc.fault_code, exc.address, exc.size, exc.function, exc.pc)
    out.mem = bytes(inst.mem)
    out.events = list(env.calls)
    out.retired = env.retired
    return out


def both(funcs: Sequence[tuple[str, str]], **kw: Any) -> tuple[Outcome, Outcome]:
    """Run the same program in the interpreter and the translator."""
    opts = {k: v for k, v in kw.items() if k in ("rodata", "data", "bss", "slice_insns", "via_elf")}
    runopts = {k: v for k, v in kw.items() if k in ("answer", "max_preempts")}
    a = run(build(funcs, engine="interp", **opts), **runopts)
    b = run(build(funcs, engine="translate", **opts), **runopts)
    return a, b


def r0_of(text: str, **kw: Any) -> int:
    """Run a one-function program in both engines, assert agreement, return r0."""
    a, b = both([("main", text)], **kw)
    assert a.comparable() == b.comparable(), (a.comparable()[:2], b.comparable()[:2])
    assert a.fault is None, a.fault
    assert a.r0 is not None
    return a.r0


def fault_of(text: str, **kw: Any) -> tuple[Any, ...]:
    a, b = both([("main", text)], **kw)
    assert a.comparable() == b.comparable(), (a.fault, b.fault, a.r0, b.r0)
    assert a.fault is not None, f"no fault, r0={a.r0}"
    return a.fault


U64 = struct.Struct("<Q")


# ---------------------------------------------------------------- differential runs (vm.md §9.2)


def diff_elf(funcs: Sequence[tuple[str, str]], *, rodata: bytes, data: bytes, bss: int, slice_insns: int,
             via_elf: bool | None = None, binary: Sequence[tuple[str, bytes, Any]] = ()) -> tuple[Outcome, Outcome]:
    """Build once (asm.elf when the loader exists), run in both engines. ``binary`` gives the functions
    already assembled (raw slots + relocations), which skips the text assembler."""
    if via_elf is None:
        via_elf = HAVE_LOADER
    if via_elf:
        from wakeful.vm import load

        parts = ([asm.Func(n, code, relocs=rl) for n, code, rl in binary] if binary
                 else [asm.Func(n, t) for n, t in funcs])
        blob = asm.elf(parts, rodata=rodata, data=data, bss=bss)
        progs = [load(blob, engine=e, slice_insns=slice_insns) for e in ("interp", "translate")]
    else:
        code, layout = link_by_hand(funcs, rodata=rodata, data=data, bss=bss)
        progs = [Program(code, layout, engine=e, slice_insns=slice_insns) for e in ("interp", "translate")]
    return run(progs[0]), run(progs[1])


# ---------------------------------------------------------------- the differential corpus

CORPUS = __import__("pathlib").Path(__file__).resolve().parents[2] / "corpus" / "diff"


def corpus_settings() -> dict[str, Any]:
    import json

    settings: dict[str, Any] = json.loads((CORPUS / "seeds.json").read_text())
    return settings


def corpus_programs() -> list[tuple[str, dict[str, Any]]]:
    """Every saved program (name, {funcs, rodata, data (hex), bss, slice_insns})."""
    import json

    return [(p.stem, json.loads(p.read_text())) for p in sorted(CORPUS.glob("*.json")) if p.name != "seeds.json"]


def save_failure(name: str, funcs: Sequence[tuple[str, str]], *, rodata: bytes, data: bytes, bss: int,
                 slice_insns: int) -> None:
    """Save a failing program to the corpus, so every later run replays it (vm.md §9.2)."""
    import json

    entry = {"funcs": [list(f) for f in funcs], "rodata": rodata.hex(), "data": data.hex(), "bss": bss,
             "slice_insns": slice_insns}
    (CORPUS / f"{name}.json").write_text(json.dumps(entry, indent=1))


def replay(entry: dict[str, Any]) -> tuple[Outcome, Outcome]:
    return diff_elf([tuple(f) for f in entry["funcs"]], rodata=bytes.fromhex(entry["rodata"]),  # type: ignore[misc]
                    data=bytes.fromhex(entry["data"]), bss=entry["bss"], slice_insns=entry["slice_insns"])


def diff_seed(seed: int, settings: dict[str, Any]) -> tuple[Outcome, Outcome, str | None]:
    """Run generated program ``seed`` in both engines; on disagreement save it and return a reason."""
    from vmexec_progen import generate

    prog = generate(seed)
    slice_insns = settings["small_slice"] if seed % settings["small_slice_every"] == 0 else 16384
    kw = {"rodata": prog.rodata, "data": prog.data, "bss": prog.bss, "slice_insns": slice_insns}
    try:
        a, b = diff_elf(prog.funcs, binary=prog.binary, **kw)
    except Exception as exc:  # a crash is a failure to save as much as a disagreement
        save_failure(f"seed-{seed}", prog.funcs, **kw)
        return Outcome(), Outcome(), f"seed {seed}: {type(exc).__name__}: {exc}"
    if a.comparable() != b.comparable():
        save_failure(f"seed-{seed}", prog.funcs, **kw)
        return a, b, f"seed {seed}: interp r0={a.r0} fault={a.fault} / translate r0={b.r0} fault={b.fault}"
    return a, b, None
