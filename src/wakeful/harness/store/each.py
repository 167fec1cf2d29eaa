"""A list as rows of one JSON array parameter on SQLite (``json_each``): ``x IN (SELECT … FROM json_each(?))``.

issue 16 (ingest): SQLite plans a row value ``IN`` a ``VALUES`` list — what SQLAlchemy renders for
``tuple_(a, b).in_([...])`` — as a scan of the whole table, and an expanding list makes SQLAlchemy render the
statement's text again on every execution. ``(a, b) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))``
searches the index of ``(a, b)`` and has one text whatever the list's length; ``json_list`` gives the value.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

__all__ = ["json_list", "json_rows", "json_table"]


def json_table(name: str) -> Any:
    """The JSON array parameter ``name`` as a table of one column, ``value`` (its elements)."""
    return sa.func.json_each(sa.bindparam(name, type_=sa.Text)).table_valued("value").alias(f"each_{name}")


def json_rows(name: str, *items: int) -> sa.Select[Any]:
    """The elements of the JSON array parameter ``name`` as rows: the element itself, or with ``items`` the
    members of each element (an array) at those indexes, as columns."""
    value = json_table(name).c.value
    return sa.select(*([value.op("->>")(k) for k in items] if items else [value]))


def json_list(values: Any) -> str:
    """A parameter of ``json_rows``: the list (of strings, or of tuples of them) as JSON text."""
    return json.dumps(values, separators=(",", ":"))
