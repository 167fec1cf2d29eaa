"""Human-mode rendering of records (issue 19, docs/decisions-cli-store.md): a list is an aligned table, one
record is ``key: value`` lines; times (``*_ms`` keys) are ISO-8601 UTC; nested values are compact JSON (never a
Python ``repr``); ``None`` is ``-``; a cell is one line (newlines and controls shown as escapes).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

__all__ = ["cell", "iso_ms", "record_lines", "table_lines"]

MAX_CELL = 80  # characters of one table cell; a longer value is cut with "…" (record_lines shows it whole)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds (``2026-12-01T21:30:00.123Z``)."""
    try:
        moment = datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cell(key: str, value: Any) -> str:
    """One value as text on one line."""
    if value is None:
        return "-"
    if key.endswith("_ms") and isinstance(value, int) and not isinstance(value, bool):
        text = iso_ms(value)
    elif isinstance(value, dict | list | tuple):
        text = json.dumps(value, default=str, separators=(",", ":"), ensure_ascii=False)
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def _row(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return dict(getattr(value, "__dict__", {"value": value}))


def table_lines(rows: list[Any], empty: str = "none") -> list[str]:
    """Rows as an aligned table: a header of the keys in first-seen order, then one line per row."""
    if not rows:
        return [empty]
    records = [_row(r) for r in rows]
    keys: list[str] = []
    for record in records:
        keys += [k for k in record if k not in keys]
    cells = [[_cut(cell(k, r.get(k))) for k in keys] for r in records]
    widths = [max(len(k), *(len(row[i]) for row in cells)) for i, k in enumerate(keys)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*keys).rstrip(), *(fmt.format(*row).rstrip() for row in cells)]


def record_lines(value: Any) -> list[str]:
    """One record as ``key: value`` lines."""
    return [f"{k}: {cell(k, v)}" for k, v in _row(value).items()]


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"
