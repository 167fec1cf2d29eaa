"""The layer rule: vm → build → runtime → harness → control → faces; lower layers never import higher ones.

Also the dependency budget per layer (style.md): vm, build and runtime use the standard library only.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src" / "wakeful"

# rank of each top-level subpackage; the faces api/mcp/bench share a rank and do not import each other
RANK = {
    "errors": 0,
    "checks": 0,  # the record of a doctor check, shared by the harness and the command line
    "sdk": 0,
    "vm": 1,
    "build": 2,
    "runtime": 3,
    "harness": 4,
    "control": 5,
    "api": 6,
    "mcp": 6,
    "bench": 6,
    "embed": 7,  # wakeful.Harness: the node with h.control (control) and h.serve_http (the api face)
    "cli": 8,  # the `wakeful` command fronts every other face (serve → api, mcp, bench)
}
FACES = {"api", "mcp", "bench"}
STDLIB_ONLY = {"errors", "checks", "vm", "build", "runtime", "sdk"}


def _layer_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            base = path.parent.relative_to(SRC.parent).parts
            base = base[: len(base) - (node.level - 1)]
            found.append((".".join((*base, node.module or "")).rstrip("."), node.lineno))
    return found


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_subpackage_has_a_rank() -> None:
    for child in SRC.iterdir():
        if child.name.startswith("_") or child.name == "py.typed":
            continue
        assert child.name.removesuffix(".py") in RANK, f"new top-level module {child.name}: give it a layer"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_lower_layers_never_import_higher_ones(path: Path) -> None:
    layer = _layer_of(path)
    if layer.startswith("_"):
        return  # wakeful/__init__.py, __main__.py: the package entry may point anywhere lazily
    for name, line in _imports(path):
        parts = name.split(".")
        if parts[0] != "wakeful" or len(parts) < 2:
            continue
        target = parts[1]
        assert target in RANK, f"{path}:{line} imports unknown module wakeful.{target}"
        if target == layer:
            continue
        assert RANK[target] < RANK[layer] or (layer in FACES and target not in FACES), (
            f"{path.relative_to(SRC)}:{line}: layer '{layer}' may not import wakeful.{target}"
        )


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if _layer_of(p) in STDLIB_ONLY],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_low_layers_use_the_standard_library_only(path: Path) -> None:
    stdlib = sys.stdlib_module_names
    for name, line in _imports(path):
        top = name.split(".")[0]
        assert top in stdlib or top == "wakeful", (
            f"{path.relative_to(SRC)}:{line}: '{top}' is not in the standard library; "
            "this layer's dependency budget is stdlib only"
        )


def test_the_rule_is_enforced(tmp_path: Path) -> None:
    """The probe can fail: a vm module importing the runtime is flagged."""
    bad = SRC / "vm" / "_layer_probe_tmp.py"
    bad.write_text("from wakeful.runtime import core\n")
    try:
        with pytest.raises(AssertionError, match="may not import"):
            test_lower_layers_never_import_higher_ones(bad)
    finally:
        bad.unlink()


# ---------------------------------------------------------------------- faces reach lower layers by their public faces

# what a face (api, mcp, cli, bench) may import of the layers below: each layer's package, plus the harness's
# public modules (its operations, principals, errors and configuration) — never the store, the node's parts or
# another private module (issue 15)
PUBLIC = {
    "harness": {"wakeful.harness", "wakeful.harness.ops", "wakeful.harness.principal", "wakeful.harness.errors",
                "wakeful.harness.config"},
    "control": {"wakeful.control"},
    "runtime": {"wakeful.runtime"},
    "vm": {"wakeful.vm"},
    "build": {"wakeful.build"},
    "sdk": {"wakeful.sdk"},
}
ALL_FACES = {"api", "mcp", "cli", "bench", "embed"}
# SQL belongs to the store; the benchmarks alone talk to PostgreSQL directly (creating their databases, reading
# pg_stat_database), never to the store's own tables
THIRD_PARTY_FORBIDDEN = {"sqlalchemy": ALL_FACES, "aiosqlite": ALL_FACES - {"bench"}, "asyncpg": ALL_FACES - {"bench"}}


def _face_violations(path: Path) -> list[str]:
    layer = _layer_of(path)
    found = []
    for name, line in _imports(path):
        parts = name.split(".")
        if layer in THIRD_PARTY_FORBIDDEN.get(parts[0], ()):
            found.append(f"{path.relative_to(SRC)}:{line}: a face may not import {parts[0]}")
        if parts[0] != "wakeful" or len(parts) < 2 or parts[1] == layer or parts[1] not in PUBLIC:
            continue
        if name not in PUBLIC[parts[1]] and not name.startswith("wakeful.harness.ops."):  # the operations are public
            found.append(f"{path.relative_to(SRC)}:{line}: {name} is not a public face of wakeful.{parts[1]}")
    return found


@pytest.mark.parametrize("path", [p for p in _modules() if _layer_of(p) in ALL_FACES],
                         ids=lambda p: str(p.relative_to(SRC)))
def test_faces_import_only_the_public_faces_below(path: Path) -> None:
    assert not _face_violations(path)


def test_faces_do_not_import_each_other_through_the_cli() -> None:
    """The command line fronts the other faces; api, mcp and bench never import it."""
    for path in _modules():
        if _layer_of(path) in FACES:
            for name, line in _imports(path):
                assert not name.startswith("wakeful.cli"), f"{path.relative_to(SRC)}:{line} imports {name}"


def test_the_face_rule_is_enforced() -> None:
    bad = SRC / "api" / "_layer_probe_tmp.py"
    bad.write_text("import sqlalchemy\nfrom wakeful.harness.store import loops\nfrom wakeful.harness import ops\n")
    try:
        assert len(_face_violations(bad)) == 2
    finally:
        bad.unlink()


def _transactions(path: Path) -> list[int]:
    """Lines where a module opens a store transaction (``….tx(…)``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "tx"]


@pytest.mark.parametrize("path", [p for p in _modules() if _layer_of(p) in ALL_FACES],
                         ids=lambda p: str(p.relative_to(SRC)))
def test_faces_open_no_transaction(path: Path) -> None:
    """A face calls an operation, which owns its transactions (issue 15)."""
    assert not _transactions(path), f"{path.relative_to(SRC)} opens a store transaction at {_transactions(path)}"


def test_the_transaction_rule_is_enforced() -> None:
    bad = SRC / "cli" / "_layer_probe_tmp.py"
    bad.write_text("async def f(h):\n    async with h.store.tx() as tx:\n        pass\n")
    try:
        assert _transactions(bad) == [2]
    finally:
        bad.unlink()
