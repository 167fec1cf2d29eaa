"""``load()``, the immutable ``Program`` and its ``Instance`` (vm.md §1, §5, §6.4): caches and instantiation.

A Program is shared and never mutated; an Instance owns one bytearray and one not-started generator.
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator
from types import MethodType
from typing import Any

from wakeful.errors import GuestFault, InvalidParams
from wakeful.vm.guest import SYNC_HELPERS, GuestEnv
from wakeful.vm.interp import fuel_in_traceback, interpret
from wakeful.vm.linked import Layout, LinkedCode, VerifyReport
from wakeful.vm.shapes import Shape, ShapeCache, constants, shape_key
from wakeful.vm.translate import MEMORY_ERRORS, Untranslatable, fill_fault, generate, recover_fault, translate

__all__ = ["ENGINES", "Instance", "Program", "clear_caches", "load", "shape_stats", "verify_elf"]

ENGINES = ("translate", "interp")
PROGRAM_CAPACITY = 1024
GuestGen = Generator[tuple[str, int, tuple[int, ...]], tuple[int, int], int]

_SHAPES = ShapeCache()
_PROGRAMS: OrderedDict[tuple[Any, ...], Program] = OrderedDict()
_KEYS_BY_CODE: OrderedDict[str, tuple[LinkedCode, tuple[str, tuple[tuple[int, int], ...]]]] = OrderedDict()


class Instance:
    """One running guest: ``mem`` (image + zero stack) and ``gen`` (not started; first send None)."""

    __slots__ = ("gen", "mem", "program")

    def __init__(self, program: Program, mem: bytearray, gen: GuestGen) -> None:
        self.program = program
        self.mem = mem
        self.gen = gen


class Program:
    """vm.md §1: linked code, layout, report and (translate engine) the shape's instance factory."""

    __slots__ = ("code", "engine", "fallback", "layout", "report", "sha256", "shape_key", "slice_insns",
                 "_bound", "_consts", "_env_class", "_recipe", "_shape", "_sync", "_template")

    def __init__(self, code: LinkedCode, layout: Layout, *, report: VerifyReport | None = None,
                 sha256: str = "", slice_insns: int = 16384, engine: str = "translate") -> None:
        _check_engine(engine, slice_insns)
        self.code, self.layout, self.report, self.sha256 = code, layout, report, sha256
        self.engine, self.slice_insns = engine, slice_insns
        self.shape_key, self._recipe = _shape_key_for(code, report)
        self._consts = (*constants(code, self._recipe), layout.writable)
        self._template = layout.image + bytes(layout.size - len(layout.image))
        self._sync = tuple(name for name in code.helpers if name in SYNC_HELPERS)
        self._shape: Shape | None = None
        self._bound: _Bound | None = None
        self._env_class: type | None = None  # the env class whose own methods ``_bound`` binds (``instantiate``)
        self.fallback: str | None = None  # why a translate-engine program runs on the interpreter
        if engine == "translate":
            try:
                self._bind_shape()
            except Untranslatable as exc:  # vm.md §9 S8; decisions-vm-exec.md: same semantics
                self.fallback = str(exc)

    # -- translation (vm.md §6.4) --

    def _bind_shape(self) -> Shape:
        if self._shape is None:
            code, key, recipe = self.code, self.shape_key, self._recipe
            try:
                self._shape = _SHAPES.get(key, lambda: translate(code, key, recipe))
            except Untranslatable:
                _SHAPES.fallbacks += 1
                raise
        return self._shape

    def translation(self) -> str:
        """The generated Python of this program's shape plus this program's constant cells
        (``wakeful vm dump``)."""
        if self.fallback is not None:
            return f"# no translation ({self.fallback}): this program runs on the reference interpreter\n"
        self._bind_shape()
        source, _, _ = generate(self.code, self.shape_key, self._recipe, comments=True)
        names = [f"k{slot}" for slot, _ in self._recipe] + ["W"]
        cells = "\n".join(f"#   {n} = 0x{v:x}" for n, v in zip(names, self._consts))
        return f"{source}\n# constants of this program (shape.factory arguments):\n{cells}\n"

    # -- instances (vm.md §5) --

    def instantiate(self, env: GuestEnv) -> Instance:
        """A fresh instance: one bytearray copy, sync helpers fetched once, one factory call.

        issue 16 (a node's start instantiates thousands of objects of one program): when the env's helpers are
        its class's own methods (``GuestContext``), the bound factory of the last instance serves every env of
        that class without asking it for its helpers again — an env class answers ``helper(name)`` with its
        own method for every instance or for none (vm/guest.py ``GuestEnv``)."""
        mem = bytearray(self._template)
        if self.engine == "interp" or self.fallback is not None:
            sync = {name: env.helper(name) for name in self._sync}
            return Instance(self, mem, interpret(self.code, self.layout, mem, env, sync, self.slice_insns))
        bound = self._bound
        if bound is None or type(env) is not self._env_class:
            bound = self._bind(env)
        entry = bound.instance(mem, env)
        return Instance(self, mem, _run_translated(self, entry, self.slice_insns, env))

    def _bind(self, env: GuestEnv) -> _Bound:
        """The bound factory for ``env``'s helpers (made or found); remembers ``env``'s class when every helper
        is one of its own methods, so ``instantiate`` skips the helper lookups for the next env of that class."""
        helpers = tuple(_unbound(env, n) for n in self._sync)
        bound = self._bound
        if bound is None or bound.helpers != helpers:  # compared by identity: one set per env class
            assert self._shape is not None
            # kept while this program lives, so the shared entry outlives its last instance
            bound = self._bound = _bound_factory(self._shape, self.shape_key, self._consts, helpers)
            self._consts = bound.consts
        cls = type(env)
        own = all(fn is getattr(cls, name, None) for name, fn in zip(self._sync, helpers, strict=True))
        self._env_class = cls if own else None
        return bound


def _unbound(env: GuestEnv, name: str) -> Callable[..., int]:
    """The sync helper ``name`` as a function taking the env first: the class's own function when
    ``env.helper`` answers a method bound to ``env`` (shared by every instance), else a wrapper of what it
    answers (one per instance, for envs whose helpers are closures)."""
    helper = env.helper(name)
    if isinstance(helper, MethodType) and helper.__self__ is env:
        function: Callable[..., int] = helper.__func__
        return function

    def call(_env: GuestEnv, *args: int) -> int:
        return helper(*args)

    return call


class _Bound:
    """A shape's factory called with one constant vector and one set of helper functions: shared by every
    Program with the same shape and constants (data-only variants, benchmarks.md §1.2) whose instances run
    with the same env class, so each saves the globals and the vector (vm.md §10)."""

    __slots__ = ("__weakref__", "consts", "helpers", "instance")

    def __init__(self, consts: tuple[int, ...], helpers: tuple[Callable[..., int], ...],
                 instance: Callable[..., Any]) -> None:
        self.consts, self.helpers, self.instance = consts, helpers, instance


_BoundKey = tuple[str, tuple[int, ...], tuple[Callable[..., int], ...]]
_BOUND: weakref.WeakValueDictionary[_BoundKey, _Bound] = weakref.WeakValueDictionary()


def _bound_factory(shape: Shape, key: str, consts: tuple[int, ...],
                   helpers: tuple[Callable[..., int], ...]) -> _Bound:
    share = (key, consts, helpers)
    bound = _BOUND.get(share)
    if bound is None:
        bound = _BOUND[share] = _Bound(consts, helpers, shape.factory(*consts, *helpers))
    return bound


def _run_translated(program: Program, entry: Callable[..., Any], fuel: int, env: GuestEnv) -> GuestGen:
    """The guest generator around a translated entry: faults are converted here, off the hot path.
    At the end ``env.fuel_left`` gets the fuel left (vm/guest.py; a plain entry's static cost and helper
    charges are charged here, as its caller would)."""
    shape = program._shape
    assert shape is not None
    end, size = program.layout.end, program.layout.size
    try:
        if shape.entry_is_generator:
            r0, env.fuel_left = yield from entry(end, 0, 0, 0, 0, size, fuel)
        else:
            r0 = entry(end, 0, 0, 0, 0, size)
            env.fuel_left = fuel - shape.entry_cost - env.debt
    except MEMORY_ERRORS as exc:
        fault = recover_fault(exc, program.code, shape, program.layout.writable)
        if fault is None:
            raise
        env.fuel_left = _fuel_at_fault(exc, shape, fuel)
        raise fault from None
    except GuestFault as exc:
        fill_fault(exc, program.code, shape)
        env.fuel_left = _fuel_at_fault(exc, shape, fuel)
        raise
    return int(r0)


def _fuel_at_fault(exc: BaseException, shape: Shape, fuel: int) -> int:
    return fuel_in_traceback(exc, lambda code: code.co_filename == shape.filename, fuel)


# ---------------------------------------------------------------- keys and caches


def _shape_key_for(code: LinkedCode, report: VerifyReport | None) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The shape key is a function of the linked code, so data variants (which share the verification
    cache's ``LinkedCode``, §1.1) skip recomputing it.

    vm.md §9 S12: the memo is found by the report's code key but used only for the very code it was computed
    from (or equal code), so a report naming another program's key never lends that program's shape."""
    if report is None or not report.code_key:
        return shape_key(code)
    hit = _KEYS_BY_CODE.get(report.code_key)
    if hit is None or not (hit[0] is code or hit[0] == code):
        hit = _KEYS_BY_CODE[report.code_key] = (code, shape_key(code))
        if len(_KEYS_BY_CODE) > PROGRAM_CAPACITY:
            _KEYS_BY_CODE.popitem(last=False)
    return hit[1]


def _check_engine(engine: str, slice_insns: int) -> None:
    if engine not in ENGINES:
        raise InvalidParams(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if not isinstance(slice_insns, int) or slice_insns <= 0:
        raise InvalidParams(f"slice_insns must be a positive integer, not {slice_insns!r}")


def _check_limits(max_elf_bytes: int, max_instructions: int, max_image_bytes: int) -> None:
    # vm.md §1 option ceilings
    for name, value, ceiling in (("max_elf_bytes", max_elf_bytes, 1 << 20),
                                 ("max_instructions", max_instructions, 65536),
                                 ("max_image_bytes", max_image_bytes, 1 << 20)):
        if not isinstance(value, int) or not 0 < value <= ceiling:
            raise InvalidParams(f"{name} must be in 1..{ceiling}, not {value!r}")


def load(data: bytes, *, max_elf_bytes: int = 65536, max_instructions: int = 8192,
         max_image_bytes: int = 65536, slice_insns: int = 16384, engine: str = "translate") -> Program:
    """vm.md §1: ELF bytes → Program (cached by SHA-256 and options); raises ``InvalidObject``."""
    _check_limits(max_elf_bytes, max_instructions, max_image_bytes)
    _check_engine(engine, slice_insns)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidParams(f"an ELF object must be bytes, not {type(data).__name__}")
    data = bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    key = (digest, max_elf_bytes, max_instructions, max_image_bytes, slice_insns, engine)
    program = _PROGRAMS.get(key)
    if program is not None:
        _PROGRAMS.move_to_end(key)
        return program
    from wakeful.vm.loader import prepare  # type: ignore[import-not-found,unused-ignore]

    prepared = prepare(data, max_elf_bytes=max_elf_bytes, max_instructions=max_instructions,
                       max_image_bytes=max_image_bytes)
    program = Program(prepared.code, prepared.layout, report=prepared.report, sha256=prepared.sha256,
                      slice_insns=slice_insns, engine=engine)
    _PROGRAMS[key] = program
    if len(_PROGRAMS) > PROGRAM_CAPACITY:
        _PROGRAMS.popitem(last=False)
    return program


def verify_elf(data: bytes, *, max_elf_bytes: int = 65536, max_instructions: int = 8192,
               max_image_bytes: int = 65536) -> VerifyReport:
    """vm.md §4.3: the VerifyReport of an ELF, or ``InvalidObject`` (delegates to the loader)."""
    from wakeful.vm.loader import verify_elf as verify  # type: ignore[import-not-found,unused-ignore]

    report: VerifyReport = verify(data, max_elf_bytes=max_elf_bytes, max_instructions=max_instructions,
                                  max_image_bytes=max_image_bytes)
    return report


def shape_stats() -> dict[str, int]:
    """Shape-cache counters: translated, hits, misses (benchmarks.md §1.4)."""
    return _SHAPES.stats()


def clear_caches() -> None:
    """Forget every cached program, shape key and shape (tests; counters are kept)."""
    _PROGRAMS.clear()
    _KEYS_BY_CODE.clear()
    _BOUND.clear()
    _SHAPES.clear()
