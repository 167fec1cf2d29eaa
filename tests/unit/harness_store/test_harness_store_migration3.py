"""Migration 3 (issue 19) creates exactly the live ``loop_webhook_verifier`` table, on both dialects."""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateTable

from wakeful.harness.store import schema


def _ddl(table: sa.Table) -> list[str]:
    return [str(CreateTable(table).compile(dialect=d)) for d in (sqlite.dialect(), postgresql.dialect())]


def test_migration_0003_matches_the_live_table() -> None:
    frozen = importlib.import_module("wakeful.harness.store.migrations.0003_webhook_verifier")
    assert frozen.metadata is not schema.metadata
    assert _ddl(frozen.loop_webhook_verifier) == _ddl(schema.loop_webhook_verifier)
    assert not schema.loop_webhook_verifier.indexes
