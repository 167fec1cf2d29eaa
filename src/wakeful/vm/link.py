"""Linking (vm.md §3, pipeline step 4): relocations, helper binding by name, local calls, function bounds.

Produces a ``Linked`` working form for the verifier, then the immutable ``LinkedCode`` (vm/linked.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

from wakeful.errors import InvalidObject
from wakeful.vm import isa
from wakeful.vm.disasm import disasm_insn
from wakeful.vm.elf import CODE, DATA, RODATA, SHN_ABS, SHN_UNDEF, STT_FUNC, ElfObject, Rel, Sec
from wakeful.vm.guest import HELPER_ARITY
from wakeful.vm.isa import BASE, MASK32, Insn
from wakeful.vm.linked import Function, LinkedCode
from wakeful.vm.memory import DataReloc, Placement

__all__ = ["Linked", "Span", "fail", "finish", "link"]

R_BPF_64_64, R_BPF_64_ABS64, R_BPF_64_ABS32, R_BPF_64_NODYLD32, R_BPF_64_32 = 1, 2, 3, 4, 10
KNOWN_RELOCS = {R_BPF_64_64, R_BPF_64_ABS64, R_BPF_64_ABS32, R_BPF_64_NODYLD32, R_BPF_64_32}
HELPER_HINT = "link helpers by name (declare them extern and call them; numeric ids and kfuncs are not supported)"


@dataclass(frozen=True, slots=True)
class Span:
    """A function's bounds in global slots; ``base``/``limit`` bound its code section."""

    name: str
    section: str
    start: int
    end: int
    base: int


@dataclass
class Linked:
    """The link result the verifier checks: raw slots plus what linking decided about them."""

    raw: list[Insn]
    second: bytearray  # 1 where a slot is the second half of an LD_IMM64
    funcs: list[Span]
    func_at: dict[int, int]
    entry: int
    bases: dict[int, int]  # code section index -> first global slot
    calls: dict[int, tuple[bool, int | str]] = field(default_factory=dict)  # slot -> (helper?, name | index)
    consts: dict[int, int] = field(default_factory=dict)  # LD_IMM64 slot -> u64 value
    data_relocs: list[DataReloc] = field(default_factory=list)

    def function_of(self, slot: int) -> int:
        """Index of the function holding ``slot`` (binary search over starts)."""
        lo, hi = 0, len(self.funcs) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.funcs[mid].start <= slot:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def describe(self, slot: int) -> str:
        """The instruction at ``slot`` in pseudo-C, with linked call names and LD_IMM64 constants."""
        insn = self.raw[slot]
        call = self.calls.get(slot)
        if call is not None:
            name = call[1] if call[0] else self.funcs[int(call[1])].name
            return f"call {name}"
        if slot in self.consts and not insn.src and not insn.off:
            return f"r{insn.dst} = {self.consts[slot]:#x} ll"
        return disasm_insn(insn)


def fail(linked: Linked, rule: str, slot: int, reason: str) -> NoReturn:
    """Raise ``InvalidObject`` in the vm.md §4 shape ``FUNC+PC 'INSN': reason``."""
    f = linked.funcs[linked.function_of(slot)]
    raise InvalidObject(rule, f"{f.name}+{slot - f.start} '{linked.describe(slot)}': {reason}")


# ---------------------------------------------------------------- pass A: slots and function starts


def link(obj: ElfObject, placement: Placement, *, max_instructions: int) -> Linked:
    """vm.md §3: decode every code section into one slot array, find functions, apply relocations."""
    codes = obj.of_kind(CODE)
    bases, total = {}, 0
    for sec in codes:
        bases[sec.num] = total
        total += sec.size // 8
    # vm.md §4 INSN_COUNT: total instruction slots <= max_instructions
    if total > max_instructions:
        raise InvalidObject("INSN_COUNT", f"{total} instructions, more than the limit of {max_instructions}")
    raw = isa.decode_all(b"".join(obj.content(s) for s in codes))
    second = _second_slots(raw, codes, bases)
    relmap = _code_relocs(obj, codes, bases)
    starts = _starts(obj, raw, second, codes, bases, relmap)
    linked = _spans(obj, codes, bases, starts, raw, second)
    _link_slots(obj, linked, relmap, placement)
    linked.data_relocs = _data_relocs(obj, placement)
    return linked


def _second_slots(raw: list[Insn], codes: list[Sec], bases: dict[int, int]) -> bytearray:
    second = bytearray(len(raw))
    for sec in codes:
        slot, end = bases[sec.num], bases[sec.num] + sec.size // 8
        while slot < end:
            if raw[slot].op == isa.OP_LDDW and slot + 1 < end:
                second[slot + 1] = 1
                slot += 2
            else:
                slot += 1
    return second


# vm.md §3: one relocation per slot, r_offset 8-aligned inside the code section, known type, valid symbol
def _code_relocs(obj: ElfObject, codes: list[Sec], bases: dict[int, int]) -> dict[int, Rel]:
    out: dict[int, Rel] = {}
    for sec in codes:
        for rel in obj.rels.get(sec.num, ()):
            _check_rel(obj, sec, rel)
            if rel.offset % 8 or rel.offset >= sec.size:
                raise InvalidObject("RELOC_TARGET", f"relocation at {sec.name}+{rel.offset} is not an instruction")
            slot = bases[sec.num] + rel.offset // 8
            if slot in out:
                raise InvalidObject("RELOC_TARGET", f"two relocations at {sec.name}+{rel.offset}")
            out[slot] = rel
    return out


def _check_rel(obj: ElfObject, sec: Sec, rel: Rel) -> None:
    if rel.type not in KNOWN_RELOCS:
        raise InvalidObject("RELOC_TYPE", f"unsupported relocation type {rel.type} at {sec.name}+{rel.offset}")
    if rel.sym >= len(obj.symbols):
        raise InvalidObject("RELOC_SYMBOL", f"relocation at {sec.name}+{rel.offset} uses symbol {rel.sym}, which does not exist")


def _starts(
    obj: ElfObject, raw: list[Insn], second: bytearray, codes: list[Sec], bases: dict[int, int],
    relmap: dict[int, Rel],
) -> set[int]:
    # vm.md §2: functions start at each code section's start, its STT_FUNC symbols, every local-call target
    starts = set(bases.values())
    for sym in obj.symbols:
        if sym.type == STT_FUNC and sym.shndx in bases:
            starts.add(bases[sym.shndx] + sym.value // 8)
    for slot, insn in enumerate(raw):
        if insn.op == isa.OP_CALL and not second[slot]:
            target = _local_target(obj, raw, slot, relmap.get(slot), codes, bases)
            if target is not None and not isinstance(target, str) and not second[target]:
                starts.add(target)
    return starts


def _local_target(
    obj: ElfObject, raw: list[Insn], slot: int, rel: Rel | None, codes: list[Sec], bases: dict[int, int],
) -> int | str | None:
    """Global slot of a local call's target, a reason string if it is invalid, None if not local."""
    insn = raw[slot]
    if rel is not None:
        if rel.type != R_BPF_64_32 or insn.src not in (0, 1):
            return None
        sym = obj.symbols[rel.sym]
        if sym.shndx not in bases:
            return None
        base, size = bases[sym.shndx], obj.sections[sym.shndx].size // 8
        target = sym.value // 8 + insn.imm + 1
        if not 0 <= target < size:
            return f"call target {obj.sections[sym.shndx].name}+{target * 8} is outside its section"
        return base + target
    if insn.src != isa.PSEUDO_CALL:
        return None
    sec = _section_of(codes, bases, slot)
    base = bases[sec.num]
    target = slot + insn.imm + 1
    if not base <= target < base + sec.size // 8:
        return f"call target pc{insn.imm + 1:+d} is outside section {sec.name}"
    return target


def _section_of(codes: list[Sec], bases: dict[int, int], slot: int) -> Sec:
    found = codes[0]
    for sec in codes:
        if bases[sec.num] <= slot:
            found = sec
    return found


def _spans(
    obj: ElfObject, codes: list[Sec], bases: dict[int, int], starts: set[int], raw: list[Insn], second: bytearray,
) -> Linked:
    names = _function_names(obj, bases)
    funcs: list[Span] = []
    ordered = sorted(starts)
    for sec in codes:
        base, end = bases[sec.num], bases[sec.num] + sec.size // 8
        mine = [s for s in ordered if base <= s < end]
        for i, s in enumerate(mine):
            stop = mine[i + 1] if i + 1 < len(mine) else end
            funcs.append(Span(names.get(s, f"{sec.name}+{(s - base) * 8}"), sec.name, s, stop, base))
    func_at = {f.start: i for i, f in enumerate(funcs)}
    entry_sec = next(s for s in codes if s.name == "spinfoam.main")
    return Linked(raw, second, funcs, func_at, func_at[bases[entry_sec.num]], bases)


def _function_names(obj: ElfObject, bases: dict[int, int]) -> dict[int, str]:
    names: dict[int, str] = {}
    for sym in obj.symbols:
        if sym.type == STT_FUNC and sym.shndx in bases and sym.name_off:
            names.setdefault(bases[sym.shndx] + sym.value // 8, obj.sym_name(sym.num))
    return names


# ---------------------------------------------------------------- pass B: calls and LD_IMM64


def _link_slots(obj: ElfObject, linked: Linked, relmap: dict[int, Rel], placement: Placement) -> None:
    raw, second = linked.raw, linked.second
    codes = obj.of_kind(CODE)
    for slot, insn in enumerate(raw):
        rel = relmap.get(slot)
        if second[slot]:
            if rel is not None:
                fail(linked, "RELOC_TARGET", slot - 1, "relocation on the second slot of an LD_IMM64")
            continue
        if insn.op == isa.OP_CALL:
            _link_call(obj, linked, slot, rel, codes)
        elif insn.op == isa.OP_LDDW:
            _link_ldimm64(obj, linked, slot, rel, placement)
        elif rel is not None:
            fail(linked, "RELOC_TARGET", slot, f"relocation type {rel.type} on an instruction it cannot patch")


# vm.md §3 R_BPF_64_32: undefined symbol -> helper by name; defined code symbol -> local call;
# no relocation: src 1 is a relative local call; src 0 (numeric helper) and src 2 (kfunc) are refused
def _link_call(obj: ElfObject, linked: Linked, slot: int, rel: Rel | None, codes: list[Sec]) -> None:
    insn = linked.raw[slot]
    bases = linked.bases
    if rel is not None and rel.type != R_BPF_64_32:
        fail(linked, "RELOC_TARGET", slot, f"relocation type {rel.type} on a call")
    if rel is None and insn.src == isa.PSEUDO_HELPER:
        fail(linked, "CALL_TARGET", slot, f"numeric helper id {insn.imm} is not supported; {HELPER_HINT}")
    if insn.src not in (isa.PSEUDO_HELPER, isa.PSEUDO_CALL):
        kind = "kfunc call" if insn.src == isa.PSEUDO_KFUNC else f"call with src {insn.src}"
        fail(linked, "CALL_TARGET", slot, f"{kind} is not supported; {HELPER_HINT}")
    if rel is not None and obj.symbols[rel.sym].shndx == SHN_UNDEF:
        _link_helper(obj, linked, slot, rel)
        return
    if rel is not None and obj.symbols[rel.sym].shndx not in bases:
        fail(linked, "RELOC_SYMBOL", slot, f"call to symbol {_sym_label(obj, rel.sym)}, which is not in a code section")
    target = _local_target(obj, linked.raw, slot, rel, codes, bases)
    if isinstance(target, str):
        fail(linked, "CALL_TARGET", slot, target)
    assert target is not None
    if linked.second[target] or target not in linked.func_at:
        fail(linked, "CALL_TARGET", slot, "call target is not the start of a function")
    linked.calls[slot] = (False, linked.func_at[target])


def _link_helper(obj: ElfObject, linked: Linked, slot: int, rel: Rel) -> None:
    name = obj.sym_name(rel.sym)
    if name not in HELPER_ARITY:
        linked.calls[slot] = (True, name)
        fail(linked, "UNKNOWN_HELPER", slot, f"unknown helper {name!r} (sdk.md §9.8 lists the helpers)")
    linked.calls[slot] = (True, name)


# vm.md §3 R_BPF_64_64: LD_IMM64 of a data symbol's guest address, addend in both imm fields
def _link_ldimm64(obj: ElfObject, linked: Linked, slot: int, rel: Rel | None, placement: Placement) -> None:
    raw = linked.raw
    if slot + 1 >= len(raw) or not linked.second[slot + 1]:
        fail(linked, "LDIMM64", slot, "LD_IMM64 needs two slots")
    value = (raw[slot].imm & MASK32) | ((raw[slot + 1].imm & MASK32) << 32)
    if rel is not None:
        if rel.type != R_BPF_64_64 or raw[slot].src:
            fail(linked, "RELOC_TARGET", slot, f"relocation type {rel.type} on an LD_IMM64")
        address = _data_address(obj, rel.sym, value, placement)
        if isinstance(address, str):
            fail(linked, "RELOC_SYMBOL", slot, address)
        value = address
    linked.consts[slot] = value


def _data_address(obj: ElfObject, sym_index: int, addend: int, placement: Placement) -> int | str:
    """Guest address of ``symbol + addend``, or why it is refused (not data, outside its section)."""
    reason = _data_symbol_problem(obj, sym_index, placement)
    if reason is not None:
        return reason
    sym = obj.symbols[sym_index]
    lo = BASE + placement.addr[sym.shndx]
    hi = lo + obj.sections[sym.shndx].size
    value = lo + sym.value + addend
    if lo <= value <= hi:
        return value
    return f"address {value:#x} of {_sym_label(obj, sym_index)} + {addend} is outside its section [{lo:#x}, {hi:#x}]"


def _data_symbol_problem(obj: ElfObject, sym_index: int, placement: Placement) -> str | None:
    sym = obj.symbols[sym_index]
    if sym.shndx == SHN_UNDEF:
        return f"undefined data symbol {_sym_label(obj, sym_index)}"
    if sym.shndx == SHN_ABS or sym.shndx >= len(obj.sections):
        return f"symbol {_sym_label(obj, sym_index)} has no section"
    if obj.sections[sym.shndx].kind == CODE:
        return f"function pointers are not supported ({_sym_label(obj, sym_index)})"
    if sym.shndx not in placement.addr:
        where = f"section {sym.shndx} ({obj.sections[sym.shndx].name})"
        return f"symbol {_sym_label(obj, sym_index)} is in {where}, which is not loaded"
    return None


def _sym_label(obj: ElfObject, index: int) -> str:
    sym = obj.symbols[index]
    if sym.name_off:
        return obj.sym_name(index)
    if 0 < sym.shndx < len(obj.sections) and obj.sections[sym.shndx].name:
        return obj.sections[sym.shndx].name
    return f"#{index}"


# vm.md §3 R_BPF_64_ABS64 / ABS32: inside a data section, aligned; applied per ELF by vm/memory.py
def _data_relocs(obj: ElfObject, placement: Placement) -> list[DataReloc]:
    out: list[DataReloc] = []
    for sec in obj.sections:
        rels = obj.rels.get(sec.num)
        if not rels or sec.kind == CODE:
            continue
        used: set[int] = set()
        for rel in rels:
            out.append(_data_reloc(obj, sec, rel, placement, used))
    return out


def _data_reloc(obj: ElfObject, sec: Sec, rel: Rel, placement: Placement, used: set[int]) -> DataReloc:
    _check_rel(obj, sec, rel)
    where = f"{sec.name}+{rel.offset}"
    if rel.type not in (R_BPF_64_ABS64, R_BPF_64_ABS32) or sec.kind not in (RODATA, DATA):
        raise InvalidObject("RELOC_TARGET", f"relocation type {rel.type} at {where} is not allowed in a data section")
    width = 8 if rel.type == R_BPF_64_ABS64 else 4
    if rel.offset % width or rel.offset + width > sec.size or used & set(range(rel.offset, rel.offset + width)):
        raise InvalidObject("RELOC_TARGET", f"relocation at {where}: misaligned, overlapping or outside the section")
    used.update(range(rel.offset, rel.offset + width))
    problem = _data_symbol_problem(obj, rel.sym, placement)
    if problem is not None:
        raise InvalidObject("RELOC_SYMBOL", f"{where}: {problem}")
    sym = obj.symbols[rel.sym]
    lo = BASE + placement.addr[sym.shndx]
    return DataReloc(placement.addr[sec.num] + rel.offset, width, lo + sym.value, lo,
                     lo + obj.sections[sym.shndx].size, where)


# ---------------------------------------------------------------- the immutable result


def finish(linked: Linked, frames: list[int]) -> LinkedCode:
    """``LinkedCode`` per vm/linked.py: CALLs rewritten to indexes, LD_IMM64 holding the full constant."""
    helpers: dict[str, int] = {}
    insns = list(linked.raw)
    for slot, (is_helper, target) in sorted(linked.calls.items()):
        insn = insns[slot]
        if is_helper:
            index = helpers.setdefault(str(target), len(helpers))
            insns[slot] = Insn(insn.op, insn.dst, isa.PSEUDO_HELPER, insn.off, index)
        else:
            insns[slot] = Insn(insn.op, insn.dst, isa.PSEUDO_CALL, insn.off, int(target))
    for slot, value in linked.consts.items():
        insn = insns[slot]
        insns[slot] = Insn(insn.op, insn.dst, insn.src, insn.off, value)
        insns[slot + 1] = Insn(0, 0, 0, 0, 0)
    functions = tuple(_function(linked, i, frames[i]) for i in range(len(linked.funcs)))
    return LinkedCode(tuple(insns), functions, linked.entry, tuple(helpers), dict(linked.func_at))


def _function(linked: Linked, index: int, frame: int) -> Function:
    span = linked.funcs[index]
    calls: dict[int, None] = {}
    helpers: dict[str, None] = {}
    for slot in range(span.start, span.end):
        call = linked.calls.get(slot)
        if call is not None:
            if call[0]:
                helpers[str(call[1])] = None
            else:
                calls[int(call[1])] = None
    return Function(span.name, span.section, span.start, span.end, frame, tuple(calls), tuple(helpers))
