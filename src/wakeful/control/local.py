"""The control plane on the operator's own store, for the command line's local mode (no running node)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from wakeful.control.core import Control

__all__ = ["local_control"]


@asynccontextmanager
async def local_control(store_url: str, *, claim_ttl_s: int, intent_grace_s: int) -> AsyncIterator[Control]:
    """An opened ``Control`` on the store at ``store_url`` (the store closed on exit)."""
    from wakeful.harness import Store

    store = await Store.open(store_url)
    try:
        control = Control(store, claim_ttl_s=claim_ttl_s, intent_grace_s=intent_grace_s)
        await control.open()
        yield control
    finally:
        await store.close()
