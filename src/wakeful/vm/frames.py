"""Frame sizes (vm.md §5.1): a dataflow analysis of r10-derived values over one function's control-flow graph.

Each register is "not r10-derived" (absent from the state), ``r10 + K`` for K in ``[lo, hi]`` (an interval),
or "unknown r10-derived" (``None``). The frame is the deepest access any path can make, or the full 4,096 bytes
as soon as a derived value escapes precise tracking. See docs/decisions-vm-frames.md for the helper-argument
rule and what S10 compares.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from wakeful.errors import WakefulError
from wakeful.vm import isa
from wakeful.vm.guest import HELPER_ARITY
from wakeful.vm.isa import Insn
from wakeful.vm.link import Linked, Span, fail

__all__ = ["MAX_FRAME", "WIDEN_AFTER", "frame_sizes"]

MAX_FRAME = 4096
# vm.md §5.1: an interval still changing after this many changes at a loop head is widened to "unknown"
WIDEN_AFTER = 3
_ARGS = (1, 2, 3, 4, 5)
# sdk.md §9.7: these helpers return their first argument (dest)
_RETURNS_DEST = frozenset({"memcpy", "memmove", "memset"})

Value = tuple[int, int] | None  # an interval of K, or None: unknown r10-derived
State = dict[int, Value]  # register -> value; an absent register is not r10-derived


class _Full(WakefulError):
    """A derived value escaped precise tracking: the frame is the full 4,096 bytes (vm.md §5.1)."""


def frame_sizes(linked: Linked, order: Sequence[int]) -> tuple[int, ...]:
    """vm.md §5.1: every function's frame, a multiple of 8 ≤ 4,096; ``STACK`` if a tracked access needs more.
    ``order`` lists every function with callees before callers (the verifier's postorder)."""
    frames = [0] * len(linked.funcs)
    args: dict[int, frozenset[int]] = {}
    for index in order:
        cfg = _Cfg(linked, linked.funcs[index], args)
        args[index] = cfg.arguments()
        frames[index] = cfg.frame(entry=index == linked.entry)
    return tuple(frames)


class _Need:
    """The deepest access seen so far: bytes below r10 and the slot that needs them."""

    def __init__(self) -> None:
        self.depth = 0
        self.slot = -1

    def access(self, state: State, base: int, off: int, slot: int) -> None:
        # vm.md §5.1: an access through r10 + [lo, hi] with offset off needs lo + off bytes below r10
        if base != 10 and base not in state:
            return
        value = (0, 0) if base == 10 else state[base]
        if value is None:
            raise _Full  # unknown at a use
        if -(value[0] + off) > self.depth:
            self.depth, self.slot = -(value[0] + off), slot


def _join(a: Value, b: Value) -> Value:
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _merge(old: State, new: State, widen: bool) -> State:
    """The union of two entry states; with ``widen``, a register whose interval grew becomes unknown."""
    out = dict(old)
    for reg, value in new.items():
        if reg not in out:
            out[reg] = None if widen else value
            continue
        joined = _join(out[reg], value)
        out[reg] = None if widen and joined != out[reg] else joined
    return out


class _Cfg:
    """Basic blocks of one function in reverse postorder, with the loop heads (targets of back edges);
    ``args`` are the argument registers (r1-r5) each analysed callee reads."""

    def __init__(self, linked: Linked, f: Span, args: dict[int, frozenset[int]]) -> None:
        self.linked, self.f, self.args = linked, f, args
        second = linked.second
        slots = [s for s in range(f.start, f.end) if not second[s]]
        succ = {s: _successors(linked, s) for s in slots}
        leaders = {f.start}
        for s in slots:
            targets, ends = succ[s]
            if ends:
                leaders.update(targets)
                leaders.add(s + 1)
        self.blocks: dict[int, list[int]] = {}
        current: list[int] = []
        for s in slots:
            if s in leaders:
                current = self.blocks.setdefault(s, [])
            current.append(s)
        self.succ = {b: [t for t in succ[body[-1]][0] if t < f.end] for b, body in self.blocks.items()}
        self.order = self._reverse_postorder(f.start)
        self.rank = {b: i for i, b in enumerate(self.order)}
        self.heads = {t for b in self.order for t in self.succ[b] if self.rank[t] <= self.rank[b]}

    def frame(self, *, entry: bool) -> int:
        try:
            # vm.md §5 entry registers: the entry's r1 is END, the same address as its r10
            states = self.fixed_point({1: (0, 0)} if entry else {})
            need = _Need()
            for block in self.order:
                self.run(block, dict(states[block]), need)
        except _Full:
            return MAX_FRAME
        frame = (need.depth + 7) // 8 * 8
        if frame > MAX_FRAME:
            fail(self.linked, "STACK", need.slot, f"frame of {frame} bytes exceeds {MAX_FRAME} (stack_frame_bytes)")
        return frame

    def arguments(self) -> frozenset[int]:
        """The registers of r1-r5 the function may read before writing them (backward liveness)."""
        summary = {}
        for block in self.order:
            used: set[int] = set()
            defined: set[int] = set()
            for slot in self.blocks[block]:
                uses, defs = _uses_defs(self, slot, self.linked.raw[slot])
                used |= uses - defined
                defined |= defs
            summary[block] = (used, defined)
        live = {block: set(summary[block][0]) for block in self.order}
        changed = True
        while changed:
            changed = False
            for block in reversed(self.order):
                out = set().union(*(live[s] for s in self.succ[block] if s in live))
                new = summary[block][0] | (out - summary[block][1])
                if new != live[block]:
                    live[block], changed = new, True
        return frozenset(live[self.order[0]] & {1, 2, 3, 4, 5})

    def _reverse_postorder(self, entry: int) -> list[int]:
        seen, post, stack = {entry}, [], [(entry, iter(self.succ[entry]))]
        while stack:
            block, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                post.append(block)
            elif nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, iter(self.succ[nxt])))
        return post[::-1]

    def fixed_point(self, start: State) -> dict[int, State]:
        """Entry states of every reachable block from ``start``: a worklist taken in reverse postorder (inner
        loops settle before the code after them runs), until no entry changes."""
        entry: dict[int, State] = {self.order[0]: dict(start)}
        changes = dict.fromkeys(self.heads, 0)
        work = [0]
        queued = {0}
        while work:
            rank = heapq.heappop(work)
            queued.discard(rank)
            block = self.order[rank]
            out = self.run(block, dict(entry[block]), None)
            for nxt in self.succ[block]:
                if self._flow(entry, changes, nxt, out) and self.rank[nxt] not in queued:
                    queued.add(self.rank[nxt])
                    heapq.heappush(work, self.rank[nxt])
        return entry

    @staticmethod
    def _flow(entry: dict[int, State], changes: dict[int, int], block: int, state: State) -> bool:
        """Merge ``state`` into the entry of ``block``; True if that entry changed."""
        old = entry.get(block)
        if old is None:
            entry[block] = dict(state)
            return True
        widen = block in changes and changes[block] >= WIDEN_AFTER
        merged = _merge(old, state, widen)
        if merged == old:
            return False
        entry[block] = merged
        if block in changes:
            changes[block] += 1
        return True

    def run(self, block: int, state: State, need: _Need | None) -> State:
        """Apply the block's instructions to ``state``; record access depths in ``need`` when given."""
        sink = need if need is not None else _Need()
        for slot in self.blocks[block]:
            _step(self, state, slot, self.linked.raw[slot], sink)
        return state


def _successors(linked: Linked, slot: int) -> tuple[list[int], bool]:
    """(successor slots, whether the instruction ends a block) of the instruction at ``slot``."""
    insn = linked.raw[slot]
    cls, code = insn.op & 0x07, insn.op & 0xF0
    if cls == isa.LD:
        return [slot + 2], False
    if cls not in (isa.JMP, isa.JMP32) or insn.op == isa.OP_CALL:
        return [slot + 1], False
    if insn.op == isa.OP_EXIT:
        return [], True
    if code == isa.JA:
        return [slot + (insn.off if cls == isa.JMP else insn.imm) + 1], True
    return [slot + 1, slot + insn.off + 1], True


# ---------------------------------------------------------------- transfer functions


def _derived(state: State, reg: int) -> bool:
    return reg == 10 or reg in state


def _escape(state: State, *regs: int) -> None:
    # vm.md §5.1: combined with a register, any other operation, stored, compared, returned or passed
    if any(_derived(state, r) for r in regs):
        raise _Full


def _step(cfg: _Cfg, state: State, slot: int, insn: Insn, need: _Need) -> None:
    cls = insn.op & 0x07
    if cls in (isa.ALU, isa.ALU64):
        _alu(state, insn)
    elif cls == isa.LD:
        state.pop(insn.dst, None)
    elif cls == isa.LDX:
        need.access(state, insn.src, insn.off, slot)
        state.pop(insn.dst, None)
    elif cls == isa.ST:
        need.access(state, insn.dst, insn.off, slot)
    elif cls == isa.STX:
        _store(state, insn, slot, need)
    elif insn.op == isa.OP_CALL:
        _call(cfg, state, slot, need)
    elif insn.op == isa.OP_EXIT:
        _escape(state, 0)
    elif insn.op & 0xF0 != isa.JA:
        _escape(state, insn.dst, *((insn.src,) if insn.op & isa.X else ()))


def _alu(state: State, insn: Insn) -> None:
    op, dst, src = insn.op, insn.dst, insn.src
    wide, code, x = op & 0x07 == isa.ALU64, op & 0xF0, bool(op & isa.X)
    if code == isa.MOV and not x:
        state.pop(dst, None)  # overwritten with a constant
        return
    if wide and code == isa.MOV and not insn.off:  # tracked: mov
        if _derived(state, src):
            state[dst] = (0, 0) if src == 10 else state[src]
        else:
            state.pop(dst, None)
        return
    if wide and code in (isa.ADD, isa.SUB) and not x and dst in state:  # tracked: add/sub of an immediate
        value = state[dst]
        if value is not None:
            k = insn.imm if code == isa.ADD else -insn.imm
            state[dst] = (value[0] + k, value[1] + k)
        return
    reads = [src] if x and code != isa.END else []
    if code != isa.MOV:
        reads.append(dst)
    _escape(state, *reads)
    state.pop(dst, None)


def _store(state: State, insn: Insn, slot: int, need: _Need) -> None:
    if insn.op & 0xE0 != isa.MODE_ATOMIC:
        need.access(state, insn.dst, insn.off, slot)
        _escape(state, insn.src)  # a derived value stored to memory
        return
    sel = insn.imm
    if sel == isa.LOAD_ACQ:
        need.access(state, insn.src, insn.off, slot)
        state.pop(insn.dst, None)
        return
    need.access(state, insn.dst, insn.off, slot)
    _escape(state, insn.src)
    if sel == isa.ATOMIC_CMPXCHG:
        _escape(state, 0)
        state.pop(0, None)
    elif sel & isa.FETCH:
        state.pop(insn.src, None)


def _call(cfg: _Cfg, state: State, slot: int, need: _Need) -> None:
    is_helper, target = cfg.linked.calls.get(slot, (False, -1))
    if not is_helper:
        _escape(state, *cfg.args.get(int(target), _ARGS))  # passed to a local function (that reads it)
        state.pop(0, None)
        return
    # helpers touch only [ptr, ptr + len) (vm.md §5), so a derived argument is an access at offset 0
    name = str(target)
    for reg in range(1, HELPER_ARITY.get(name, 5) + 1):
        need.access(state, reg, 0, slot)
    if name in _RETURNS_DEST and 1 in state:
        state[0] = state[1]
    else:
        state.pop(0, None)


# ---------------------------------------------------------------- registers read and written (for arguments)


def _uses_defs(cfg: _Cfg, slot: int, insn: Insn) -> tuple[set[int], set[int]]:
    op, dst, src = insn.op, insn.dst, insn.src
    cls, code, x = op & 0x07, op & 0xF0, bool(op & isa.X)
    if cls in (isa.ALU, isa.ALU64):
        uses = {src} if x and code != isa.END else set()
        return (uses | {dst} if code != isa.MOV else uses), {dst}
    if cls == isa.LD:
        return set(), {dst}
    if cls == isa.LDX:
        return {src}, {dst}
    if cls == isa.ST:
        return {dst}, set()
    if cls == isa.STX:
        return _uses_defs_stx(insn)
    if op == isa.OP_CALL:
        is_helper, target = cfg.linked.calls.get(slot, (False, -1))
        if is_helper:
            return set(range(1, HELPER_ARITY.get(str(target), 5) + 1)), {0}
        return set(cfg.args.get(int(target), _ARGS)), {0}
    if op == isa.OP_EXIT:
        return {0}, set()
    if code == isa.JA:
        return set(), set()
    return ({dst, src} if x else {dst}), set()


def _uses_defs_stx(insn: Insn) -> tuple[set[int], set[int]]:
    if insn.op & 0xE0 != isa.MODE_ATOMIC:
        return {insn.dst, insn.src}, set()
    sel = insn.imm
    if sel == isa.LOAD_ACQ:
        return {insn.src}, {insn.dst}
    if sel == isa.ATOMIC_CMPXCHG:
        return {insn.dst, insn.src, 0}, {0}
    return {insn.dst, insn.src}, ({insn.src} if sel & isa.FETCH else set())
