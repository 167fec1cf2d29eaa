"""The linked, verified form of a program: what the loader hands to the translator and interpreter.

Produced by ``vm/link.py`` + ``vm/verify.py`` + ``vm/memory.py``; immutable and shared by all instances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wakeful.vm.isa import BASE, Insn


@dataclass(frozen=True, slots=True)
class Function:
    """One guest function: slots ``[start, end)`` of ``LinkedCode.insns`` (global slot numbers)."""

    name: str  # STT_FUNC symbol name, or "SECTION+OFFSET" for an unnamed local-call target
    section: str
    start: int
    end: int
    frame_bytes: int  # static frame size, multiple of 8, <= 4096 (vm.md §5.1)
    calls: tuple[int, ...]  # function indexes called (distinct, in first-call order)
    helpers: tuple[str, ...]  # helper names called (distinct, in first-call order)


@dataclass(frozen=True, slots=True)
class Layout:
    """Guest memory layout (vm.md §5). Indexes are offsets into the instance's bytearray;
    guest address = BASE + index."""

    rodata_bytes: int  # R: rodata region size, rounded up to the largest writable alignment (>= 8)
    data_bytes: int  # writable data + bss, rounded to 8 (D)
    bss_bytes: int  # part of data_bytes that is zeroed (informational)
    stack_bytes: int  # sum of frames on the deepest call chain
    image: bytes  # template of [0, R + D): rodata, data (data relocations applied), zeroed bss

    @property
    def writable(self) -> int:
        """W: first writable index."""
        return self.rodata_bytes

    @property
    def size(self) -> int:
        """Length of the instance's bytearray: R + D + stack."""
        return self.rodata_bytes + self.data_bytes + self.stack_bytes

    @property
    def end(self) -> int:
        """END: one past the last guest address; the entry's r10 and r1."""
        return BASE + self.size


@dataclass(frozen=True, slots=True)
class LinkedCode:
    """All code sections concatenated into one slot array, linked.

    * ``insns``: every slot. Jumps keep their relative ``off`` (target = pc + off + 1; JMP32 JA uses imm).
    * CALL slots are rewritten: ``src == PSEUDO_HELPER`` with ``imm`` = index into ``helpers``, or
      ``src == PSEUDO_CALL`` with ``imm`` = index into ``functions``.
    * LD_IMM64: first slot's ``imm`` holds the full u64 constant (relocations applied); second slot zero.
    """

    insns: tuple[Insn, ...]
    functions: tuple[Function, ...]  # in section order
    entry: int  # index of the entry function (the one in ``spinfoam.main``)
    helpers: tuple[str, ...]  # helper names, index = PSEUDO_HELPER imm
    func_at: dict[int, int] = field(default_factory=dict)  # start slot -> function index

    def function_of(self, slot: int) -> int:
        """Index of the function containing ``slot``."""
        for i, f in enumerate(self.functions):
            if f.start <= slot < f.end:
                return i
        raise ValueError(slot)


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """vm.md §4.3; ``to_json`` gives the documented JSON form."""

    sha256: str
    elf_bytes: int
    code_key: str
    entry: str
    instructions: int
    functions: tuple[dict[str, Any], ...]
    call_chain: tuple[str, ...]
    stack_bytes: int
    helpers: tuple[str, ...]
    image: dict[str, int]
    ignored_sections: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "sha256": self.sha256,
            "elf_bytes": self.elf_bytes,
            "code_key": self.code_key,
            "entry": self.entry,
            "instructions": self.instructions,
            "functions": [dict(f) for f in self.functions],
            "call_chain": list(self.call_chain),
            "stack_bytes": self.stack_bytes,
            "helpers": list(self.helpers),
            "image": dict(self.image),
            "ignored_sections": list(self.ignored_sections),
        }
