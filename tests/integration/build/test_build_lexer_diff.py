"""build.md §6 row 27: the differential lexer test.

Fuzzed sources without conditional directives (hypothesis, fixed seed, seeded with the confinement inputs and
the saved corpus in tests/corpus/lexer/) are lexed by the scanner and preprocessed by clang with ``-E -dD``;
the macros defined, the headers included and the identifiers lexed must agree. Many sources share one clang
run (several input files in one command line, each its own translation unit, split by its line markers).
A disagreement is saved to the corpus before the test fails.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from build_support import IN_CI, make_builder, require_available
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_build_confinement import CASES

from wakeful.build.bundle import validate
from wakeful.build.driver import PREPROCESS, Builder, command_line
from wakeful.build.helper import compiler_env
from wakeful.build.lexer import lines
from wakeful.build.scan import scan_file

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "lexer"
CASES_WANTED = 2000 if IN_CI else int(os.environ.get("WAKEFUL_LEXER_CASES", "2000"))
BATCH = 400
HEADERS = {f"h{i}.h": f"#define H{i} {i}\n" for i in range(3)}
MACROS = frozenset({f"M{i}" for i in range(5)} | {f"H{i}" for i in range(3)})
MARKER = re.compile(r'^# (\d+) "([^"]*)"((?: \d)*)$')

IDENTS = ["x", "abc", "_y1", "a$b", "$d", "R", "L", "u", "U", "u8", "LR", "uR", "UR", "u8R", "define", "include",
          "M0", "M3", "H1", "e", "p", "asm"]
NUMBERS = ["0", "1", "42", "1e+x", "0x1p-3", "0xe+1", "1.e", ".5x", "1..2", "1$x", "07", "1'2"]
PUNCT = ["#", "%:", "##", "%:%:", "<:", ":>", "<%", "%>", "/", "*", "+", "-", ".", "...", "<", ">", "(", ")",
         ",", ";", "=", "?", "'", '"', "@", "\\", "??=", "??/", "&&", "->"]
WS = [" ", "\t", "\v", "\f", "\n", "\\\n", "\\ \n", "\\\t\n"]
BODY = st.sampled_from(["a", " ", "\\", '\\"', "\\'", '"', "'", "/*", "*/", "//", "\n", "\\\n", "x", "é", "R\"", "#"])
DIRECTIVES = ["define M{m} {n}", "define M{m}", "define M{m}(a) a", "include \"h{h}.h\"", "include <h{h}.h>", "",
              "de\\\nfine M{m} {n}", "inc\\ \nlude \"h{h}.h\"", "/* c */ define M{m} {n}", "define /* x\n */ M{m} 1"]


@st.composite
def directive(draw: st.DrawFn) -> str:
    lead = draw(st.sampled_from(["", " ", "\t", "\v", "\f", "/* a */ ", "/* a\n */ "]))
    hash_ = draw(st.sampled_from(["#", "%:", "# ", "#\\\n", "# /**/ "]))
    body = draw(st.sampled_from(DIRECTIVES)).format(
        m=draw(st.integers(0, 4)), n=draw(st.integers(0, 9)), h=draw(st.integers(0, 2)))
    return f"\n{lead}{hash_}{body}\n"


def literal(quote: str) -> st.SearchStrategy[str]:
    prefix = st.sampled_from(["", "L", "u", "U", "u8", "R", "LR", "u8R"])
    return st.builds(lambda p, b, end: f"{p}{quote}{''.join(b)}{end}", prefix, st.lists(BODY, max_size=6),
                     st.sampled_from([quote, quote, ""]))


FRAGMENT = st.one_of(
    st.sampled_from(IDENTS), st.sampled_from(NUMBERS), st.sampled_from(PUNCT), st.sampled_from(WS),
    literal('"'), literal("'"),
    st.builds(lambda b, end: "/*" + "".join(b) + end, st.lists(BODY, max_size=6), st.sampled_from(["*/", "*/", ""])),
    st.builds(lambda b: "//" + "".join(b), st.lists(BODY, max_size=5)),
    directive(),
)
SOURCE = st.lists(FRAGMENT, max_size=24).map("".join)


def _seeds() -> list[str]:
    seeds = [p.read_text() for p in sorted(CORPUS.glob("*.c"))]
    for _, template, _, _ in CASES:
        text = template.replace("@P@", "/nonexistent/wakeful-seed.h")
        if not re.search(r"#\s*(if|elif|include|import|embed|pragma|line|\d)|%:|__has|_Pragma|[^\x00-\x7f]|\\u", text):
            seeds.append(text)
    return seeds


def _generate() -> list[str]:
    found: dict[str, None] = {}

    @settings(max_examples=CASES_WANTED + CASES_WANTED // 3, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(SOURCE)
    def collect(source: str) -> None:
        if len(found) < CASES_WANTED and source not in found and _eligible(source):
            found[source] = None

    collect()
    return list(found)


def _eligible(source: str) -> bool:
    # §6 row 27: no conditional directives; outside literals and comments the scan refuses non-ASCII and
    # UCNs anyway, and clang (not the scan) would read them as identifier characters
    if "\r" in source or "\x00" in source:
        return False
    scanned = _scan(source)
    return not any("non-ASCII" in f.message or "universal" in f.message for f in scanned.findings)


def _scan(source: str):  # type: ignore[no-untyped-def]
    bundle = validate({"sdk_version": 1, "entry": "c.c", "files": {"c.c": source, **HEADERS}})
    return scan_file("c.c", bundle.files["c.c"], bundle, frozenset())


def _expected(source: str) -> tuple[list[str], list[str], list[str]]:
    result = _scan(source)
    defines = list(result.defines)
    for inc in result.includes:
        defines.extend(_scan_header(inc))
    if set(result.defines) - MACROS:
        return sorted(defines), result.includes, []  # user macros rewrite identifiers: compare the rest
    idents = [i for i in result.identifiers if i not in MACROS]
    return sorted(defines), result.includes, idents


def _scan_header(path: str) -> list[str]:
    name = path.split("/", 1)[1]
    return [f"H{name[1]}"] if name in HEADERS else []


def _clang(builder: Builder, workdir: Path, sources: list[str]) -> dict[int, tuple[list[str], list[str], list[str]]]:
    (workdir / "src").mkdir(parents=True)
    (workdir / "sdk").mkdir()
    (workdir / "out").mkdir()
    (workdir / "tmp").mkdir()
    for name, text in HEADERS.items():
        (workdir / "src" / name).write_text(text)
    names = []
    for i, source in enumerate(sources):
        (workdir / "src" / f"c{i:05d}.c").write_text(validate(
            {"sdk_version": 1, "entry": "c.c", "files": {"c.c": source}}).files["c.c"])
        names.append(f"src/c{i:05d}.c")
    argv = command_line(PREPROCESS, builder.zig or "", "X", str(workdir))
    argv = [a for a in argv if a not in ("-o", "out/pp.i", "src/X")]
    proc = subprocess.run([*argv, "-dD", "-w", "-Wno-everything", *names], cwd=workdir, env=compiler_env(str(workdir)),
                          capture_output=True, timeout=120, check=False)
    return _parse(proc.stdout.decode("utf-8", "replace"))


def _parse(output: str) -> dict[int, tuple[list[str], list[str], list[str]]]:
    per_case: dict[int, tuple[list[str], list[str], list[str]]] = {}
    case = -1
    current = ""
    body: list[str] = []

    def flush() -> None:
        if case >= 0:
            defines, includes, _ = per_case[case]
            idents = [t.text for line in lines("\n".join(body)) for t in line
                      if t.kind == "ident" and t.text not in MACROS]
            per_case[case] = (sorted(defines), includes, idents)

    for line in output.split("\n"):
        m = MARKER.match(line)
        if m:
            name, flags = m.group(2), m.group(3).split()
            tu = re.fullmatch(r"src/c(\d{5})\.c", name)
            if tu and not flags and m.group(1) == "1" and int(tu.group(1)) != case:
                flush()
                case, body = int(tu.group(1)), []
                per_case[case] = ([], [], [])
            if "1" in flags and name.startswith("src/h"):
                per_case[case][1].append(name)
            current = name
            continue
        if case < 0 or not current.startswith("src/"):
            continue
        d = re.match(r"#define (\w+)", line)
        if d:
            per_case[case][0].append(d.group(1))
        elif current.startswith("src/c") and not re.match(r"#\s*(pragma|ident|sccs)\b", line):
            body.append(line)  # lines clang passes through as directives (#pragma, #ident) are not code
    flush()
    return per_case


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    b = make_builder(tmp_path_factory.mktemp("lexdiff"), cache=False)
    require_available(b)
    b.close()
    return b


def test_lexer_differential_row27(builder: Builder, tmp_path: Path) -> None:
    sources = list(dict.fromkeys(_seeds() + _generate()))
    assert len(sources) >= CASES_WANTED
    failures: list[str] = []
    batches = [sources[start : start + BATCH] for start in range(0, len(sources), BATCH)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outputs = list(pool.map(lambda nb: _clang(builder, tmp_path / f"batch{nb[0]}", nb[1]), enumerate(batches)))
    for batch, got in zip(batches, outputs):
        for i, source in enumerate(batch):
            expected = _expected(source)
            actual = got.get(i)
            if actual is not None and not expected[2] and set(_scan(source).defines) - MACROS:
                actual = (actual[0], actual[1], [])
            if actual != expected:
                failures.append(source)
    for source in failures:
        name = hashlib.sha256(source.encode()).hexdigest()[:12]
        (CORPUS / f"fail-{name}.c").write_text(source)
    assert not failures, f"{len(failures)} lexer disagreements saved to {CORPUS}; first: {failures[0]!r}"


def test_lexer_differential_compares_something(builder: Builder, tmp_path: Path) -> None:
    """The harness can fail: a wrong expectation is noticed, and real sources produce non-empty results."""
    source = 'x /* y */ L"s" z\n#define M1 2\n#include "h1.h"\nR"w" M1\n'
    got = _clang(builder, tmp_path, [source])[0]
    assert got == _expected(source) == (["H1", "M1"], ["src/h1.h"], ["x", "z", "R"])
    assert Counter(got[2]) != Counter(["x", "L", "z", "R"])
