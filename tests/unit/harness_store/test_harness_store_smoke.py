"""Smoke: the store fixture opens a migrated store at HEAD on both backends."""

from __future__ import annotations

from typing import Any

from wakeful.harness.store.migrations import HEAD, stored_version


async def test_fixture_store_is_at_head(store: Any) -> None:
    assert await stored_version(store) == HEAD
