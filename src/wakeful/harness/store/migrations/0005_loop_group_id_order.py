"""Migration 5: the Loops of a group in id order, ``loop_group_id_id (group_id, id)`` in place of the plain
``ix_loop_group_id (group_id)`` (issue 16 — frozen: the version-5 index, never edited; later changes are new
migrations).

A page of ``loops.list`` is ``WHERE group_id = ? AND id > ? ORDER BY id LIMIT n``. With the group's index alone each
page read every Loop of the group and sorted them (SQLite: a temporary B-tree; PostgreSQL: a sort of the group), so
listing N Loops page by page cost O(N² / limit) rows — at N = 10,000 the harness bench's first full listing after
a restart was ~0.5 s of the node's CPU. The pair serves every lookup by ``group_id`` the old index served.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def upgrade(conn: Connection) -> None:
    conn.execute(sa.text("CREATE INDEX loop_group_id_id ON loop (group_id, id)"))
    conn.execute(sa.text("DROP INDEX ix_loop_group_id"))
