"""The store's dependency budget (style.md, harness.md §3): the standard library, SQLAlchemy Core (never the
ORM), the SQLite driver SQLAlchemy already runs on (``aiosqlite``: ``sqlite_inline`` adapts its connection), and
wakeful's own errors; nothing from the rest of the harness, the runtime or the faces."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parents[3] / "src" / "wakeful" / "harness" / "store"
ALLOWED_WAKEFUL = ("wakeful.errors", "wakeful.harness.errors", "wakeful.harness.store")


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path.name}: use absolute imports"
            names.append(node.module if node.module != "wakeful" else f"wakeful.{node.names[0].name}")
    return names


@pytest.mark.parametrize("path", sorted(STORE.rglob("*.py")), ids=lambda p: str(p.relative_to(STORE)))
def test_store_imports_stay_in_budget(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "wakeful":
            assert name == "wakeful.__version__" or name.startswith(ALLOWED_WAKEFUL), (
                f"{path.name} imports {name}"
            )
        elif top == "sqlalchemy":
            assert not name.startswith("sqlalchemy.orm"), f"{path.name}: no ORM (harness.md §3)"
        elif top != "aiosqlite":
            assert top in sys.stdlib_module_names or top == "__future__", f"{path.name} imports {name}"
