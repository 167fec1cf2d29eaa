"""No module reads another object's private attributes (issue 15: "the node owns its state").

A leading underscore makes a name private to the module that defines it. An ``ast`` walk over ``src/wakeful``
flags, outside that module:

- ``getattr(x, "_name")`` / ``hasattr`` / ``setattr`` with a literal private name, whatever ``x`` is but
  ``self`` / ``cls``;
- ``x._name`` where ``x`` is not ``self`` / ``cls`` / ``super()``, not a class or function defined at module
  level in the same module, and ``_name`` is not defined by a class of the same module (``self._name = …``,
  a method or a class attribute): another module's object, reached past its public surface.

A few names start with an underscore and are public by their library's documentation (``PUBLIC_UNDERSCORE``).
Face files that still violate are listed in ``ALLOWED`` with their count (the list only shrinks); a deliberate
read of another library's internals is in ``EXEMPT`` with its reason.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src" / "wakeful"

# public API that happens to start with an underscore: namedtuple/Row members, os._exit, ast node fields
PUBLIC_UNDERSCORE = frozenset({"_mapping", "_fields", "_asdict", "_replace", "_make", "_exit"})

# face files rewritten by the issue-15 face work: they still reach into the harness and control; each entry is
# the number of private reads left, and the faces' rewrite takes them to zero (then deletes the entry)
# (public accessors to switch to: Harness.control_if_running, Harness.started — see the face helpers' brief)
ALLOWED: dict[str, int] = {
}

# deliberate reads of another library's internals, each with its reason (file, the flagged expression)
EXEMPT: dict[tuple[str, str], str] = {
    ("runtime/stdio.py", "getattr(loop, '_ready', None)"):
        "asyncio's ready deque, read when the loop has one: the stdin poll runs only while nothing is ready "
        "(runtime-protocol.md §16 latency); None on other loops",
}

REFLECTION = ("getattr", "hasattr", "setattr")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(private attribute names the module's classes define, names bound at module level but for imports)."""
    attrs: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    attrs.add(item.name)
                elif isinstance(item, ast.Assign):
                    attrs.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    attrs.add(item.target.id)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                            and sub.value.id in ("self", "cls")):
                        attrs.add(sub.attr)
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            top.add(node.name)
        elif isinstance(node, ast.Assign):
            top.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
    return {a for a in attrs if _is_private(a)}, top


def _is_self(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def private_reads(source: str, filename: str = "<snippet>") -> list[str]:
    """``line: text`` for each private read of a foreign object in ``source``."""
    tree = ast.parse(source, filename=filename)
    own, top = _own_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in REFLECTION
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and _is_private(node.args[1].value)
                and not _is_self(node.args[0])):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            if node.attr in PUBLIC_UNDERSCORE or node.attr in own or _is_self(node.value):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in top:
                continue
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@functools.cache
def _violations() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        found = [f for f in private_reads(path.read_text(), str(path))
                 if (rel, f.partition(": ")[2]) not in EXEMPT]
        if found:
            out[rel] = found
    return out


def test_no_module_reads_a_foreign_private_attribute() -> None:
    problems = []
    for rel, found in _violations().items():
        if len(found) > ALLOWED.get(rel, 0):
            problems.append(f"{rel} (allowed {ALLOWED.get(rel, 0)}):\n    " + "\n    ".join(found))
    assert not problems, "private attributes read across modules:\n" + "\n".join(problems)


def test_each_exemption_still_matches_its_line() -> None:
    for (rel, expr), reason in EXEMPT.items():
        found = [f.partition(": ")[2] for f in private_reads((SRC / rel).read_text(), rel)]
        assert expr in found and reason, f"{rel}: exemption {expr!r} matches nothing; delete it"


def test_the_allowlist_only_names_faces_that_still_violate() -> None:
    found = _violations()
    for rel, count in ALLOWED.items():
        assert rel.split("/")[0] in ("api", "mcp", "cli"), f"{rel}: only face files may be allowlisted"
        assert len(found.get(rel, [])) == count, f"{rel}: {len(found.get(rel, []))} private reads, allowlist says {count}"


@pytest.mark.parametrize("snippet", [
    'getattr(harness, "_control", None)\n',
    "def f(node):\n    return node._lock('x').locked()\n",
    "def f(self):\n    return self.node._residents\n",
    "import os.path\nos.path._joinrealpath\n",
    "hasattr(h, '_bridge')\n",
])
def test_probe_flags_a_private_read(snippet: str) -> None:
    assert private_reads(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "class A:\n    def __init__(self):\n        self._x = 1\n    def same(self, other):\n        return other._x\n",
    "class A:\n    _cache = {}\n\ndef f():\n    return A._cache\n",
    "def f(row):\n    return dict(row._mapping), row._asdict()\n",
    "def f(self):\n    return self._x, super()._y, getattr(self, '_z', None), x.__class__\n",
    "import os\nos._exit(0)\n",
])
def test_probe_lets_own_and_public_names_pass(snippet: str) -> None:
    assert not private_reads(snippet), snippet
