"""Shape keys, lifted constants and the shape cache (vm.md §6.4).

Programs that differ only in constants share one translation: the key zeroes every lifted field, and the
constant vector is rebuilt from the recorded recipe without generating or compiling anything.
"""

from __future__ import annotations

import hashlib
import linecache
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wakeful.vm import isa
from wakeful.vm.isa import MASK32, MASK64, SIGN32, SIGN64, Insn
from wakeful.vm.linked import LinkedCode

__all__ = ["SHAPE_CAPACITY", "TRANSLATOR_VERSION", "Shape", "ShapeCache", "constants", "lift_kind", "shape_key"]

TRANSLATOR_VERSION = "wakeful-translate/1"
SHAPE_CAPACITY = 1024

# lift kinds: how a lifted immediate becomes its closure-cell value
U64, U32, SH64, SH32, S64B, S32B, ST8, ST16, ST32 = range(9)

_LIFT_VALUE: dict[int, Callable[[int], int]] = {
    U64: lambda v: v & MASK64,
    U32: lambda v: v & MASK32,
    SH64: lambda v: v & 63,
    SH32: lambda v: v & 31,
    S64B: lambda v: (v & MASK64) ^ SIGN64,  # biased for signed 64-bit compares (vm.md §6.2)
    S32B: lambda v: (v & MASK32) ^ SIGN32,
    ST8: lambda v: v & 0xFF,
    ST16: lambda v: v & 0xFFFF,
    ST32: lambda v: v & MASK32,
}

_SIGNED_JUMPS = (isa.JSGT, isa.JSGE, isa.JSLT, isa.JSLE)
_STORE_KIND = {isa.SIZE_B: ST8, isa.SIZE_H: ST16, isa.SIZE_W: ST32, isa.SIZE_DW: U64}


def _alu_kind(op: int) -> int | None:
    code = op & 0xF0
    wide = op & 0x07 == isa.ALU64
    # vm.md §6.4: DIV/MOD immediates and END widths stay in the shape; NEG has no immediate
    if op & isa.X or code in (isa.DIV, isa.MOD, isa.END, isa.NEG):
        return None
    if code in (isa.LSH, isa.RSH, isa.ARSH):
        return SH64 if wide else SH32
    return U64 if wide else U32


def _jump_kind(op: int) -> int | None:
    code = op & 0xF0
    if op & isa.X or code in (isa.JA, isa.CALL, isa.EXIT):
        return None
    wide = op & 0x07 == isa.JMP
    if code in _SIGNED_JUMPS:
        return S64B if wide else S32B
    return U64 if wide else U32


def _compute_kind(op: int) -> int | None:
    cls = op & 0x07
    if cls in (isa.ALU, isa.ALU64):
        return _alu_kind(op)
    if cls in (isa.JMP, isa.JMP32):
        return _jump_kind(op)
    if cls == isa.ST:
        return _STORE_KIND[op & 0x18]
    if op == isa.OP_LDDW:
        return U64
    return None


# opcode -> lift kind (None: the immediate is part of the shape)
LIFT: tuple[int | None, ...] = tuple(_compute_kind(op) for op in range(256))


def lift_kind(insn: Insn) -> int | None:
    return LIFT[insn.op]


def shape_key(code: LinkedCode) -> tuple[str, tuple[tuple[int, int], ...]]:
    """vm.md §6.4: (key, recipe). The key hashes the translator version, the instruction stream with
    lifted immediates zeroed, function starts/ends/frames, the entry and helper names; the recipe lists
    (slot, lift kind) of every lifted immediate in slot order."""
    stream: list[tuple[int, int, int, int, int]] = []
    recipe: list[tuple[int, int]] = []
    lift = LIFT
    for slot, (op, dst, src, off, imm) in enumerate(code.insns):
        kind = lift[op]
        if kind is None:
            stream.append((op, dst, src, off, imm))
        else:
            stream.append((op, dst, src, off, 0))
            recipe.append((slot, kind))
    funcs = [(f.start, f.end, f.frame_bytes) for f in code.functions]
    material = repr((TRANSLATOR_VERSION, stream, funcs, code.entry, code.helpers)).encode()
    return hashlib.sha256(material).hexdigest(), tuple(recipe)


def constants(code: LinkedCode, recipe: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """The lifted-constant vector of ``code`` for a shape's recipe (one value per recipe entry)."""
    insns = code.insns
    values = _LIFT_VALUE
    return tuple(values[kind](insns[slot].imm) for slot, kind in recipe)


@dataclass(slots=True)
class Shape:
    """One translation: compiled shape factory, its linecache filename, line table, function facts."""

    key: str
    filename: str
    factory: Callable[..., Any]  # factory(*constants, W, *sync helpers) -> instance(M, env) -> entry function
    lines: Sequence[int]  # generated line number -> global slot (-1: no instruction)
    entry_is_generator: bool
    entry_cost: int
    generators: frozenset[int] = field(default_factory=frozenset)

    def slot_at(self, lineno: int) -> int | None:
        """The slot whose code is on generated line ``lineno`` (vm.md §8 line table)."""
        if 0 <= lineno < len(self.lines) and self.lines[lineno] >= 0:
            return self.lines[lineno]
        return None


class ShapeCache:
    """LRU of shapes (≤ 1,024) with translated / hit / miss counters (benchmarks.md §1.4)."""

    def __init__(self, capacity: int = SHAPE_CAPACITY) -> None:
        self.capacity = capacity
        self._shapes: OrderedDict[str, Shape] = OrderedDict()
        self.translated = 0
        self.hits = 0
        self.misses = 0
        self.fallbacks = 0  # translations that failed: those programs run on the interpreter

    def get(self, key: str, build: Callable[[], Shape]) -> Shape:
        shape = self._shapes.get(key)
        if shape is not None:
            self.hits += 1
            self._shapes.move_to_end(key)
            return shape
        self.misses += 1
        shape = build()
        self.translated += 1
        self._shapes[key] = shape
        if len(self._shapes) > self.capacity:
            _, old = self._shapes.popitem(last=False)
            linecache.cache.pop(old.filename, None)  # live programs keep their code, not the listing
        return shape

    def clear(self) -> None:
        for shape in self._shapes.values():
            linecache.cache.pop(shape.filename, None)
        self._shapes.clear()

    def __len__(self) -> int:
        return len(self._shapes)

    def __contains__(self, key: object) -> bool:
        return key in self._shapes

    def stats(self) -> dict[str, int]:
        return {"translated": self.translated, "hits": self.hits, "misses": self.misses,
                "fallbacks": self.fallbacks}
