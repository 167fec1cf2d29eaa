"""The VM front fuzz harness: inputs, oracles, warm-cache sequences and the corpus (vm.md §9 S8, S11, S12).

One *case* is a sequence of steps run in one process with the load caches warm: ``load`` an ELF (through
``wakeful.vm.load``, every cache in play), ``evict`` the verification cache (what 1,024 other code keys would
do), or ``clear`` every cache. After every load the oracles compare it with a fresh load of the same bytes:

* S8: ``load`` raises nothing but ``InvalidObject``; the run raises nothing but ``GuestFault``.
* S12: the warm load agrees with ``loader.prepare(data, cache=None)`` (refusal rule, linked code, functions,
  helpers, layout) and the warm program (translated, shared shape cache) runs exactly like a fresh
  interpreter program (result or fault, helper calls, memory).
* S11: the generated source of the warm program never contains :data:`elf_fuzz.MARKER` (planted in every
  mutated name), and :data:`elf_fuzz.SENTINEL` (what planted code would create) never appears.

Cases come from a :class:`~elf_fuzz.Chooser`, so atheris, hypothesis and the fixed-seed run share them;
a failing case is saved as JSON under ``tests/corpus/vm_fuzz/`` and replayed by every test run.
"""

from __future__ import annotations

import hashlib
import json
import linecache
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.elf_fuzz import MARKER, SENTINEL, Chooser, edit_in_span, mutate
from wakeful.errors import GuestFault, InvalidObject
from wakeful.vm import Program, asm, clear_caches, load, loader
from wakeful.vm.guest import PREEMPT

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "vm_fuzz"
FUEL = 2000  # per slice
SLICES = 4  # helper suspensions answered before a still-running guest is closed
PREEMPTS = 8  # preemptions answered before a still-running guest is closed
HISTORY = 24  # earlier cases kept so a find that needs their cache entries can be replayed
LONG_MIN, LONG_MAX = 3_900, 8_190  # straight-line functions around the 4,096-unit generator threshold


# ---------------------------------------------------------------- seeds


ROOT = Path(__file__).resolve().parents[2]
C_SEEDS = [*sorted((ROOT / "src" / "wakeful" / "sdk" / "examples").glob("*.c")),
           *sorted((ROOT / "tests" / "support" / "guests").glob("*.c"))]


def clang_seeds() -> list[bytes]:
    """The guide's examples and the test guests, built by clang (tests/support/cc.py; cached by content)."""
    from support.cc import compile_c

    return [compile_c(path.read_text(), name=path.name) for path in C_SEEDS]


def asm_seeds() -> list[bytes]:
    """Objects clang does not make: an unnamed local-call target in ``.text`` (its function is named
    ``.text+OFF``, so a section name reaches the translator) and data relocations."""
    return [
        asm.elf(
            [asm.Func("main", "r1 = rodata + 2 ll\nr2 = 3\ncall sf_log_raw\ncall g\nr1 = data ll\n"
                              "r3 = *(u64 *)(r1 + 0)\nr0 += r3\nexit"),
             asm.Func("g", "call pc+2\nr0 += 1\nexit\nr0 = 7\nexit", section=".text")],
            rodata=b"hello\0world\0", data=bytes(range(16)), bss=8,
            extra_relocs=[(".data", asm.Reloc(8, 2, ".rodata"))],
        ),
    ]


def long_function(n: int) -> bytes:
    """A loop-free, call-free entry of ``n`` instructions (vm.md §6.1: above 4,096 units a generator)."""
    return asm.elf([asm.Func("main", "r0 = 0\n" + "r0 += 3\n" * (n - 2) + "exit")])


# ---------------------------------------------------------------- cases


@dataclass
class Case:
    """Steps: ("load", elf bytes) | ("evict", b"") | ("clear", b"")."""

    steps: list[tuple[str, bytes]] = field(default_factory=list)

    def to_json(self, found: list[str]) -> str:
        steps = [{"op": op, "elf": blob.hex()} if op == "load" else {"op": op} for op, blob in self.steps]
        return json.dumps({"found": found[:5], "steps": steps}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Case:
        raw = json.loads(text)
        return cls([(s["op"], bytes.fromhex(s.get("elf", ""))) for s in raw["steps"]])


def make_case(ch: Chooser, seeds: list[bytes]) -> Case:
    """A base object (a mutated seed, or a long straight-line function), then up to five related loads:
    same size, bytes changed only inside section spans, sometimes with the verification cache evicted."""
    if ch.chance(4):
        return Case([("load", long_function(LONG_MIN + ch.below(LONG_MAX - LONG_MIN)))])
    base = mutate(ch.pick(seeds), ch, ch.below(4))  # 0 rounds: data-only variants of a valid object
    case = Case([("load", base)])
    current = base
    for _ in range(ch.below(6)):
        if ch.chance(30):
            case.steps.append(("evict", b""))
        current = edit_in_span(current if ch.chance(60) else base, ch)
        case.steps.append(("load", current))
    return case


# ---------------------------------------------------------------- oracles


class _RecordingEnv:
    """A GuestEnv whose synchronous helpers return 0, charge 8 units and are recorded with their args."""

    def __init__(self) -> None:
        self.debt = self.retired = self.fuel_left = 0
        self.calls: list[tuple[Any, ...]] = []

    def helper(self, name: str) -> Callable[..., int]:
        def call(*args: int) -> int:
            self.debt += 8
            self.calls.append((name, *args))
            return 0

        return call


def run(program: Program) -> tuple[Any, ...]:
    """(how it ended, r0 or fault code and address, helper calls and suspensions without fuel, memory
    digest); an exception other than GuestFault escapes as ("escape", type, message). Preemptions are
    answered but not recorded (the translator may charge fuel by a static over-approximation, §6.3)."""
    env = _RecordingEnv()
    inst = program.instantiate(env)
    gen, end, waits, preempts = inst.gen, ("running",), 0, 0
    try:
        kind, args = _suspension(gen.send(None))
        while waits < SLICES and preempts < PREEMPTS:
            if kind == PREEMPT:
                preempts += 1
            else:
                waits += 1
                env.calls.append((kind, *args))
            kind, args = _suspension(gen.send((0, FUEL)))
    except StopIteration as stop:
        end = ("exited", stop.value)
    except GuestFault as exc:
        end = ("faulted", exc.fault_code, exc.address)
    except Exception as exc:  # noqa: BLE001 - the property under test (S8)
        return ("escape", type(exc).__name__, str(exc)[:200])
    finally:
        gen.close()
    return (*end, tuple(env.calls), hashlib.sha256(inst.mem).hexdigest())


class NotASuspension(Exception):
    """The guest generator yielded something other than ``(kind, fuel, args)`` (vm/guest.py)."""


def _suspension(value: object) -> tuple[str, tuple[int, ...]]:
    if not (isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], str)):
        raise NotASuspension(f"the guest yielded {value!r}")
    return value[0], tuple(value[2])


def same_run(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal results; a run cut short (still running) only has to agree on the calls both made."""
    if a[0] != "running" and b[0] != "running":
        return a == b
    n = min(len(a[-2]), len(b[-2]))
    return a[-2][:n] == b[-2][:n]


def _warm(blob: bytes) -> Program | str:
    try:
        return load(blob, slice_insns=FUEL)
    except InvalidObject as exc:
        return f"refused {exc.rule}"
    except Exception as exc:  # noqa: BLE001 - S8
        return f"s8-load-{type(exc).__name__} | {str(exc)[:200]}"


def _fresh(blob: bytes) -> loader.Prepared | str:
    try:
        return loader.prepare(blob, cache=None)
    except InvalidObject as exc:
        return f"refused {exc.rule}"
    except Exception as exc:  # noqa: BLE001 - S8
        return f"s8-load-{type(exc).__name__} | (fresh) {str(exc)[:200]}"


def _source(program: Program) -> str:
    shape = getattr(program, "_shape", None)
    return "".join(linecache.getlines(shape.filename)) if shape is not None else ""


def _compare(warm: Program, fresh: loader.Prepared) -> list[str]:
    """S12: what the warm caches handed out equals a fresh load, field by field."""
    problems = []
    for what, a, b in (("insns", warm.code.insns, fresh.code.insns),
                       ("functions", warm.code.functions, fresh.code.functions),
                       ("helpers", warm.code.helpers, fresh.code.helpers),
                       ("entry", warm.code.entry, fresh.code.entry),
                       ("layout", warm.layout, fresh.layout)):
        if a != b:
            problems.append(f"s12-code | the warm load's {what} differ from a fresh load's")
    return problems


def check_load(blob: bytes, stats: Counter[str] | None = None) -> list[str]:
    """Every oracle on one load with the caches as they are; a list of problems (empty: all held).
    ``stats`` counts outcomes: refused, loaded, and how the runs ended (exited, faulted, running)."""
    SENTINEL.unlink(missing_ok=True)
    warm, fresh = _warm(blob), _fresh(blob)
    stats = Counter() if stats is None else stats
    stats["loaded" if isinstance(warm, Program) else "refused"] += 1
    problems = [r for r in (warm, fresh) if isinstance(r, str) and r.startswith("s8-")]
    if isinstance(warm, str) or isinstance(fresh, str):
        if not problems and warm != fresh:
            problems.append(f"s12-outcome | warm {warm if isinstance(warm, str) else 'loaded'} but fresh "
                            f"{fresh if isinstance(fresh, str) else 'loaded'}")
        return problems
    problems += _compare(warm, fresh)
    if MARKER in _source(warm):
        problems.append("s11-source | an ELF name appears in the generated source")
    got = run(warm)
    stats[got[0]] += 1
    want = run(Program(fresh.code, fresh.layout, slice_insns=FUEL, engine="interp"))
    problems += [f"s8-run-{got[1]} | {got[2]}"] if got[0] == "escape" else []
    if got[0] != "escape" and not same_run(got, want):
        problems.append(f"s12-run | the warm program ran differently from a fresh one: {got[:3]} vs {want[:3]}")
    if SENTINEL.exists():
        problems.append("s11-sentinel | code from an ELF name ran on the host (sentinel file created)")
        SENTINEL.unlink()
    return problems


def clear_all() -> None:
    """Every load cache: programs, shape keys and shapes, verification, data twins."""
    clear_caches()
    loader.CACHE.clear()
    twins = getattr(loader, "TWINS", None)
    if twins is not None:
        twins.clear()


def run_case(case: Case, stats: Counter[str] | None = None) -> list[str]:
    """The case's steps in order, caches warm from step to step; every problem, tagged with its step."""
    problems = []
    for n, (op, blob) in enumerate(case.steps):
        if op == "load":
            problems += [f"{p} (step {n})" for p in check_load(blob, stats)]
        elif op == "evict":
            loader.CACHE.clear()
        else:
            clear_all()
    SENTINEL.unlink(missing_ok=True)
    return problems


def _shows(case: Case, kind: str) -> bool:
    """Whether ``case`` run from cleared caches (as a replay runs) shows a problem of ``kind``."""
    clear_all()
    return bool(case.steps) and any(signature(p) == kind for p in run_case(case))


def shrink(case: Case, kind: str) -> Case:
    """Drop chunks of steps (halves first, single steps last) the ``kind`` of problem does not need."""
    steps, size = list(case.steps), max(1, len(case.steps) // 2)
    while True:
        i = 0
        while i < len(steps):
            trial = steps[:i] + steps[i + size:]
            if _shows(Case(trial), kind):
                steps = trial
            else:
                i += size
        if size == 1:
            break
        size //= 2
    clear_all()
    return Case(steps)


def replayable(case: Case, history: Iterable[Case], kind: str) -> Case | None:
    """``case`` if it shows ``kind`` from cleared caches, else the earlier cases since the caches were last
    cleared followed by it (a problem that needs another program's cache entries), else None."""
    if _shows(case, kind):
        return case
    longer = Case([step for earlier in history for step in earlier.steps] + case.steps)
    return longer if _shows(longer, kind) else None


# ---------------------------------------------------------------- corpus


def signature(problem: str) -> str:
    """The kind of bug (one corpus file per kind and run): ``s8-load-UnicodeDecodeError``, ``s11-source``."""
    return problem.split(" | ", 1)[0]


def save(case: Case, problems: list[str], corpus: Path = CORPUS) -> Path:
    corpus.mkdir(parents=True, exist_ok=True)
    text = case.to_json(problems)
    kind = "".join(c if c.isalnum() or c == "-" else "_" for c in signature(problems[0]))
    path = corpus / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.json"
    path.write_text(text)
    return path


def corpus_files(corpus: Path = CORPUS) -> list[Path]:
    return sorted(corpus.glob("*.json"))


@dataclass
class Tally:
    """Counts of a fuzz run: cases and loads executed, and the first case of each bug kind found."""

    cases: int = 0
    loads: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    found: dict[str, Path] = field(default_factory=dict)


def fuzz(inputs: Iterable[bytes], seeds: list[bytes], tally: Tally, *, save_to: Path | None = CORPUS,
         clear_every: int = 500) -> Tally:
    """Run one case per input (caches warm across cases too); save the first case of each new kind."""
    history: deque[Case] = deque(maxlen=HISTORY)
    for data in inputs:
        case = make_case(Chooser(data), seeds)
        problems = run_case(case, tally.outcomes)
        tally.cases += 1
        tally.loads += sum(op == "load" for op, _ in case.steps)
        new = [kind for kind in dict.fromkeys(signature(p) for p in problems) if kind not in tally.found]
        for kind in new:
            tally.found[kind] = _keep(case, history, kind, problems, save_to)  # leaves the caches cleared
        history.append(case)
        if new or tally.cases % clear_every == 0:
            clear_all()  # junk shapes and programs would otherwise pile up
            history.clear()
    return tally


def _keep(case: Case, history: Iterable[Case], kind: str, problems: list[str], save_to: Path | None) -> Path:
    """Shrink a new find to the smallest case that still shows it from cleared caches, and save it (as
    found, marked, when no replay from cleared caches shows it)."""
    base = replayable(case, history, kind)
    if base is None:
        small, mine = case, [f"{p} [not reproduced from cleared caches]" for p in problems if signature(p) == kind]
    else:
        small = shrink(base, kind)
        mine = [p for p in run_case(small) if signature(p) == kind] or [kind]
    clear_all()
    return save(small, mine, save_to) if save_to else Path(kind)
