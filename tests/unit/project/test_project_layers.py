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
STDLIB_ONLY = {"errors", "vm", "build", "runtime", "sdk"}


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
