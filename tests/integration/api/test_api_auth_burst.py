"""Authentication takes no write lock (issue 14, reproduction 8): while another connection holds SQLite's write
lock for longer than the busy timeout, a burst of concurrent read-only requests — unknown keys and valid ones —
is answered in full, no ``503``/``database is locked``; the uses land in ``last_used_ms`` by the node's batched
flush once the lock is free (harness.md §2.1, docs/decisions-api.md)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from live_api import LiveApi, auth, tenant, wait_for

from wakeful import Harness
from wakeful.harness.store import schema

pytestmark = pytest.mark.integration

BURST = 360


def _requests(base: str, t: dict[str, str]) -> list[tuple[str, dict[str, str], int]]:
    """(url, headers, expected status): unknown key ids (each distinct), group and agent keys, /healthz."""
    g = f"{base}/v1/agent-groups/{t['group']}"
    out = []
    for i in range(BURST):
        kind = i % 4
        if kind == 0:
            out.append((f"{g}/agents", auth(f"wk_key_{i:012d}_" + "A" * 43), 401))
        elif kind == 1:
            out.append((f"{g}/agents", auth(t["gkey"]), 200))
        elif kind == 2:
            out.append((f"{base}/v1/info", auth(t["akey"]), 200))
        else:
            out.append((f"{base}/healthz", {}, 200))
    return out


async def _burst(requests: list[tuple[str, dict[str, str], int]]) -> list[tuple[int, str]]:
    limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        async def one(url: str, headers: dict[str, str]) -> tuple[int, str]:
            r = await client.get(url, headers=headers)
            return r.status_code, r.text
        return await asyncio.gather(*(one(url, headers) for url, headers, _ in requests))


def test_a_read_burst_never_waits_for_the_write_lock(tmp_path: Path) -> None:
    db = tmp_path / "wakeful.db"
    with LiveApi(f"sqlite:///{db}", tmp_path / "data") as live:
        t = live.call(tenant)
        requests = _requests(live.url, t)
        holder = sqlite3.connect(db, timeout=0, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # the write lock, held past the 5 s busy timeout of every writer
            got = asyncio.run(_burst(requests))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        wrong = [(url, want, status, body[:200]) for (url, _, want), (status, body) in zip(requests, got, strict=True)
                 if status != want]
        assert wrong == [], f"{len(wrong)} of {BURST} answers were not as expected, e.g. {wrong[:3]}"
        assert not any("locked" in body for _, body in got)

        async def stamps(h: Harness) -> dict[str, int | None]:
            K = schema.api_key
            async with h.store.tx(readonly=True) as tx:
                return {r.id: r.last_used_ms for r in await tx.execute(sa.select(K.c.id, K.c.last_used_ms))}

        used = {t["gkey"][3:19], t["akey"][3:19]}
        wait_for(lambda: all(live.call(stamps)[k] is not None for k in used), timeout=60, every=0.5)
        assert live.call(stamps)[t["admin"][3:19]] is None  # an unused key is not stamped
