"""Migration 3: ``loop_webhook_verifier``, one signature check per Loop webhook (issue 19), as it stood at schema
version 3 (frozen: a copy of the table in ``schema.py``, never edited; later changes are new migrations).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

metadata = sa.MetaData()  # frozen: the version-3 table, never edited

# the referenced table, named only so the foreign key resolves (created by migration 1, not here)
_loop = sa.Table("loop", metadata, sa.Column("id", sa.String(40), primary_key=True))

loop_webhook_verifier = sa.Table(
    "loop_webhook_verifier",
    metadata,
    sa.Column("loop_id", sa.String(40), sa.ForeignKey("loop.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("scheme", sa.String(20), nullable=False),
    sa.Column("secret", sa.Text, nullable=False),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)


def upgrade(conn: Connection) -> None:
    loop_webhook_verifier.create(conn, checkfirst=False)
