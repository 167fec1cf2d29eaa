"""Migration 4: ``artifact_lines``, the line table of a built artifact (issue 18), as it stood at schema version 4
(frozen: a copy of the table in ``schema.py``, never edited; later changes are new migrations).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

metadata = sa.MetaData()  # frozen: the version-4 table, never edited

# the referenced table, named only so the foreign key resolves (created by migration 1, not here)
_artifact = sa.Table("artifact", metadata, sa.Column("group_id", sa.String(40), primary_key=True),
                     sa.Column("sha256", sa.String(64), primary_key=True))

artifact_lines = sa.Table(
    "artifact_lines",
    metadata,
    sa.Column("group_id", sa.String(40), primary_key=True),
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("lines", sa.Text, nullable=False),
    sa.ForeignKeyConstraint(["group_id", "sha256"], ["artifact.group_id", "artifact.sha256"], ondelete="CASCADE"),
)


def upgrade(conn: Connection) -> None:
    artifact_lines.create(conn, checkfirst=False)
