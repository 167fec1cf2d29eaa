"""The frozen migration 0002 creates exactly the live control tables, and 0001 exactly the version-1 harness
tables."""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from sqlalchemy.schema import CreateIndex, CreateTable

from wakeful.control import schema as control_schema
from wakeful.harness.store import schema as harness_schema


def _ddl(metadata: sa.MetaData) -> dict[str, str]:
    from sqlalchemy.dialects import postgresql, sqlite

    out = {}
    for table in metadata.sorted_tables:
        for dialect in (sqlite.dialect(), postgresql.dialect()):
            text = str(CreateTable(table).compile(dialect=dialect))
            text += "".join(str(CreateIndex(i).compile(dialect=dialect)) for i in sorted(table.indexes,
                                                                                         key=lambda i: str(i.name)))
            out[f"{table.name}/{dialect.name}"] = text
    return out


def test_migration_0002_matches_control_schema() -> None:
    frozen = importlib.import_module("wakeful.harness.store.migrations.0002_control").metadata
    assert _ddl(frozen) == _ddl(control_schema.metadata)


def test_migration_0001_is_frozen() -> None:
    """0001 holds its own copy of the version-1 tables (a later column change is a new migration, not an edit)."""
    frozen = importlib.import_module("wakeful.harness.store.migrations.0001_initial").metadata
    assert frozen is not harness_schema.metadata
    assert set(frozen.tables) == {
        "schema_meta", "agent_group", "api_key", "agent", "session", "message", "artifact", "artifact_path", "loop",
        "loop_event", "loop_log", "loop_transition", "node", "agent_lease", "rate_bucket",
    }
    assert not set(frozen.tables) & set(control_schema.metadata.tables)
