"""Migration 1: every table of harness.md §2 as ``schema.py`` defines them at version 1.

When a later migration alters one of these tables, freeze that table's version-1 definition here first.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from wakeful.harness.store import schema


def upgrade(conn: Connection) -> None:
    schema.metadata.create_all(conn, checkfirst=False)
