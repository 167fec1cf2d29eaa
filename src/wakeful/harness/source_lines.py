"""Faults that name the source (issue 18): a built artifact's line table, read from beside it in the store."""

from __future__ import annotations

from typing import Any

from wakeful.build.lines import LineTable
from wakeful.harness.store import artifacts
from wakeful.harness.store.core import Tx

__all__ = ["keep_table", "stored_table", "with_source_line"]


async def keep_table(tx: Tx, group_id: str, sha256: str, table: LineTable | None) -> None:
    """Store a build's table beside its artifact (never for another digest; the ELF is untouched)."""
    if table is not None:
        await artifacts.put_lines(tx, group_id=group_id, sha256=sha256, lines=table.to_json())


async def stored_table(tx: Tx, group_id: str, sha256: str) -> LineTable | None:
    data = await artifacts.get_lines(tx, group_id, sha256)
    try:
        table = LineTable.from_json(data) if data is not None else None
    except (KeyError, TypeError, ValueError):
        return None
    return table if table is not None and table.elf_sha256 == sha256 else None


def with_source_line(table: LineTable | None, text: str, fault: dict[str, Any] | None) -> str:
    """``main.c:42: <text> (in wf_json_get_str)`` when ``table`` covers the fault's (function, pc), else ``text``."""
    function, pc = (fault or {}).get("function"), (fault or {}).get("pc")
    if table is None or not isinstance(function, str) or not isinstance(pc, int) or isinstance(pc, bool):
        return text
    return table.fault_text(text, function, pc)
