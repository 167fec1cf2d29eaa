"""S11 (vm.md §9): no byte of the ELF other than integers reaches generated Python source, and every
generated module passes a fixed syntax allowlist before ``compile()``.

Reproduction 1 of issue 14: a function symbol or a section name carrying Python statements became code
of the generated function (``def fN(...):  # NAME``) and ran as the server's user.
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from vmexec_kit import run
from vmexec_progen import generate as generate_program

from wakeful.errors import InvalidObject
from wakeful.vm import asm, elf, load
from wakeful.vm import translate as translate_mod
from wakeful.vm.program import Program, clear_caches, shape_stats

REPO = Path(__file__).resolve().parents[3]
CLANG_SOURCES = sorted([*(REPO / "src/wakeful/sdk/examples").glob("*.c"), *(REPO / "src/wakeful/bench").rglob("*.c")])


def hostile(marker: Path) -> str:
    """A statement at the generated function body's indentation that leaves ``marker`` behind."""
    return f"\n            __import__('os').system('touch {marker}')#"


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    clear_caches()  # a shape cached by another test would skip generation
    path = tmp_path / "ran"
    yield path
    clear_caches()


def hostile_section_elf(section: str) -> bytes:
    """main calls g in ``section``; g calls an unnamed function after it (named ``SECTION+16``)."""
    g = "call pc+1\nexit\nr0 = 5\nexit"
    return asm.elf([asm.Func("main", "call g\nexit"), asm.Func("g", g, section=section)])


def run_or_refuse(data: bytes) -> tuple[int | None, str | None]:
    try:
        program = load(data)
    except InvalidObject as exc:
        return None, exc.rule
    return run(program).r0, None


# ---------------------------------------------------------------- issue 14, reproduction 1


def test_hostile_function_symbol_never_runs(marker: Path) -> None:
    data = asm.elf([asm.Func("main" + hostile(marker), "r0 = 7\nexit")])
    r0, refused = run_or_refuse(data)
    assert not marker.exists(), "a symbol name became host code"
    assert (r0, refused) == (None, "ELF_STRTAB")


def test_hostile_section_name_never_runs(marker: Path) -> None:
    r0, refused = run_or_refuse(hostile_section_elf("x" + hostile(marker)))
    assert not marker.exists(), "a section name became host code"
    assert (r0, refused) == (None, "ELF_STRTAB")


def test_names_that_bypass_the_loader_never_reach_the_source(marker: Path) -> None:
    """Defence in depth: linked code whose function names hold statements (as if the loader's name
    check were gone) translates to source without them, runs correctly and names its faults."""
    program = load(hostile_section_elf(".text"))
    evil = hostile(marker)
    funcs = tuple(dataclasses.replace(f, name=f.name + evil) for f in program.code.functions)
    code = dataclasses.replace(program.code, functions=funcs)
    clear_caches()
    forged = Program(code, program.layout, engine="translate")
    assert forged.fallback is None
    assert run(forged).r0 == 5
    assert not marker.exists(), "a function name became host code"
    assert forged._shape is not None
    compiled = "".join(linecache.getlines(forged._shape.filename))
    assert compiled and "__import__" not in compiled and "main" not in compiled
    assert "\n" not in forged._shape.filename and "main" not in forged._shape.filename
    # the display listing keeps each name on its own comment line
    listing = forged.translation()
    assert ast.dump(ast.parse(listing)) == ast.dump(ast.parse(compiled))


def test_a_faulting_hostile_name_is_reported_through_the_line_table(marker: Path) -> None:
    program = load(asm.elf([asm.Func("main", "r1 = 0\nr0 = *(u64 *)(r1 + 0)\nexit")]))
    code = dataclasses.replace(program.code, functions=tuple(
        dataclasses.replace(f, name="main" + hostile(marker)) for f in program.code.functions))
    clear_caches()
    fault = run(Program(code, program.layout, engine="translate")).fault
    assert fault is not None and fault[0] == "MEMORY_READ" and fault[3] == "main" + hostile(marker)
    assert not marker.exists()


# ---------------------------------------------------------------- real programs carry no names into source


# words of the translator's own templates (a name equal to one of them would match by coincidence)
VOCABULARY = {"def", "return", "while", "true", "else", "not", "yield", "from", "break", "continue", "pass",
              "shape", "instance", "env", "debt", "fuel", "preempt", "wakeful", "translation", "generator",
              "plain", "entry"}


def elf_names(data: bytes) -> set[str]:
    obj = elf.parse(data, max_elf_bytes=1 << 20)
    names = {s.name for s in obj.sections} | {obj.sym_name(s.num) for s in obj.symbols}
    return {n for n in names if len(n) >= 3 and n.lower() not in VOCABULARY}


@pytest.mark.parametrize("path", CLANG_SOURCES, ids=[p.name for p in CLANG_SOURCES])
def test_clang_programs_translate_without_their_names(path: Path, compile_c: Callable[..., bytes]) -> None:
    data = compile_c(path.read_text(), name=path.name)
    clear_caches()
    program = load(data)
    assert program.fallback is None and program._shape is not None
    source = "".join(linecache.getlines(program._shape.filename))
    names = elf_names(data) | {f.name for f in program.code.functions}
    assert "main" in names and "spinfoam.main" in names
    assert [n for n in names if n in source or n in program._shape.filename] == []
    # the only comment is the header; there are no strings at all
    assert [line for line in source.splitlines() if "#" in line] == source.splitlines()[:1]
    assert re.findall(r"['\"]", source) == []


# ---------------------------------------------------------------- the allowlist (vm.md §9 S11)


def test_the_allowlist_knows_exactly_the_prebound_names() -> None:
    from wakeful.vm.srccheck import PREBOUND_CALLS, PREBOUND_VALUES

    assert set(translate_mod.NAMESPACE) == PREBOUND_CALLS | PREBOUND_VALUES


def test_generated_programs_pass_the_allowlist_and_use_all_of_it(marker: Path) -> None:
    """No generated program falls back to the interpreter because of the check (which would hide the
    translator from the S9 differential tests), and every allowed node type is needed."""
    from wakeful.vm.srccheck import ALLOWED_NODES, check_source

    seen: set[type[ast.AST]] = set()
    for seed in range(400):
        prog = generate_program(seed)
        blob = asm.elf([asm.Func(n, c, relocs=rl) for n, c, rl in prog.binary], rodata=prog.rodata,
                       data=prog.data, bss=prog.bss)
        program = load(blob)
        assert program.fallback is None, (seed, program.fallback)
        assert program._shape is not None
        tree = ast.parse("".join(linecache.getlines(program._shape.filename)))
        check_source(tree)
        seen |= {type(node) for node in ast.walk(tree)}
    assert seen == ALLOWED_NODES


SHAPE_PREFIX = "def shape(W):\n    def instance(M, env, H):\n"
REFUSED = {
    "import": "import os",
    "import from": "from os import system",
    "dunder attribute": "r0 = env.__class__",
    "other attribute": "r0 = M.hex",
    "attribute of a prebound name": "r0 = LDQ.__self__",
    "builtin call": "r0 = open(0)",
    "exec": "exec(0)",
    "dunder import": "__import__(0)",
    "register call": "r0 = r1(0)",
    "keyword call": "r0 = f1(r1=0)",
    "string constant": "r0 = 'os'",
    "yield op as a string": "r0 = yield ('preempt', fuel, ())",
    "bytes constant": "r0 = b'x'",
    "float constant": "r0 = 1.5",
    "None": "r0 = None",
    "foreign name": "r0 = os",
    "builtins": "r0 = __builtins__",
    "lambda": "r0 = lambda: 0",
    "comprehension": "r0 = [i for i in M]",
    "list": "r0 = [1]",
    "global": "global r0",
    "nonlocal": "nonlocal W",
    "try": "try:\n            pass\n        except:\n            pass",
    "with": "with M:\n            pass",
    "for": "for i in M:\n            pass",
    "decorator": "@LDQ\n        def f9():\n            pass",
    "annotation": "def f9(r1: int):\n            pass",
    "default": "def f9(r1=0):\n            pass",
    "star args": "def f9(*r1):\n            pass",
    "foreign function name": "def evil():\n            pass",
    "foreign parameter": "def f9(os):\n            pass",
    "subscript of env": "r0 = env[0]",
    "delete": "del r0",
    "assert": "assert r0",
    "raise": "raise r0",
    "await-free async": "async def f9():\n            pass",
    "class": "class C:\n            pass",
    "starred": "r0 = f1(*M)",
    "f-string": "r0 = f'{r1}'",
}


@pytest.mark.parametrize("snippet", list(REFUSED.values()), ids=list(REFUSED))
def test_tampered_source_is_refused(snippet: str) -> None:
    from wakeful.vm.srccheck import UnsafeSource, check_source

    source = SHAPE_PREFIX + "        " + snippet + "\n        return f0\n    return instance\n"
    with pytest.raises(UnsafeSource):
        check_source(ast.parse(source))


def test_two_definitions_at_module_level_are_refused() -> None:
    from wakeful.vm.srccheck import UnsafeSource, check_source

    with pytest.raises(UnsafeSource):
        check_source(ast.parse("def shape(W):\n    pass\nr0 = 1\n"))


def tamper(monkeypatch: pytest.MonkeyPatch, statement: str) -> None:
    """A test hook: the generator's output gets ``statement`` as the first line of shape()."""
    real = translate_mod.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        source, out, infos = real(*args, **kwargs)
        first, rest = source.split("\n    def instance", 1)
        return f"{first}\n    {statement}\n    def instance{rest}", out, infos

    monkeypatch.setattr(translate_mod, "generate", generate)


@pytest.mark.parametrize("statement", ["__import__('os').system('touch {m}')", "import os; os.system('touch {m}')",
                                       "open('{m}', 'w')", "env.__class__.x = open('{m}', 'w')"])
def test_tampered_generator_output_is_refused_before_compile(
        statement: str, marker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tamper(monkeypatch, statement.format(m=marker))
    program = load(asm.elf([asm.Func("main", "r0 = 7\nexit")]))
    assert not marker.exists()
    assert program.fallback is not None and "S11 allowlist" in program.fallback
    assert run(program).r0 == 7  # the program still runs, on the reference interpreter
    assert shape_stats()["fallbacks"] >= 1


def test_the_check_runs_only_on_shape_cache_misses(marker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checks: list[int] = []
    real = translate_mod.check_source

    def counting(tree: ast.Module) -> None:
        checks.append(1)
        real(tree)

    monkeypatch.setattr(translate_mod, "check_source", counting)
    body = "r1 = {k}\nr0 = *(u64 *)(r10 - 8)\nr0 += r1\nexit"
    before = shape_stats()
    for k in range(5):  # constants are lifted: one shape
        for data in (b"", bytes([k]) * 8):  # data variants: the same shape again
            assert run(load(asm.elf([asm.Func("main", body.format(k=k))], data=data))).r0 == k
    assert len(checks) == 1
    run(load(asm.elf([asm.Func("main", "r0 = 1\nr0 *= 3\nexit")])))  # another shape
    after = shape_stats()
    assert len(checks) == 2 == after["misses"] - before["misses"]
    assert after["hits"] - before["hits"] == 9
