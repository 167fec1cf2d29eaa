"""With the database unavailable the routes answer 503 ``unavailable`` and nothing is half-written
(harness.md §10.5): SQLite made unwritable under a live server, PostgreSQL cut behind a TCP proxy."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_api import LiveApi, auth, count_events, make_loop, tenant, wait_for
from support.harness_fixtures import PgProxy, sqlite_read_only

pytestmark = pytest.mark.integration


def test_sqlite_unwritable_is_503(tmp_path: Path, compile_c: Any) -> None:
    db = tmp_path / "wakeful.db"
    with LiveApi(f"sqlite:///{db}", tmp_path / "data") as live:
        t = live.call(tenant)
        loop_id = make_loop(live, t, compile_c)
        url = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
        assert live.client.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "a"}).status_code == 202
        before = count_events(live, loop_id)
        with sqlite_read_only(db):
            r = live.client.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "b"})
            assert r.status_code == 503 and r.json()["error"] == "unavailable", r.text
            assert r.headers["x-request-id"] and "Traceback" not in r.text
            hook = live.client.post(f"{live.url}/v1/agent-groups/{t['group']}/agents", headers=auth(t["gkey"]),
                                    json={"name": "x"})
            assert hook.status_code == 503
        assert count_events(live, loop_id) == before  # nothing half-written

        def post_again() -> httpx.Response | None:  # the store recovers once writable (a 503 meanwhile writes nothing)
            r = live.client.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "b"})
            assert r.status_code in (202, 503), r.text
            return r if r.status_code == 202 else None

        r = wait_for(post_again, timeout=30, every=0.5)
        assert r.json()["duplicate"] is False  # the refused event was never kept


class _ProxyThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = PgProxy()
        asyncio.run_coroutine_threadsafe(self.proxy.__aenter__(), self.loop).result(10)

    def cut(self) -> None:
        self.loop.call_soon_threadsafe(self.proxy.cut)

    def restore(self) -> None:
        self.loop.call_soon_threadsafe(self.proxy.restore)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.__aexit__(None, None, None), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def test_postgresql_cut_is_503(pg_schema: str, tmp_path: Path, compile_c: Any) -> None:
    proxy = _ProxyThread()
    try:
        with LiveApi(proxy.proxy.url(pg_schema), tmp_path / "data") as live:
            t = live.call(tenant)
            loop_id = make_loop(live, t, compile_c)
            url = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
            assert live.client.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "a"}).status_code == 202
            before = count_events(live, loop_id)
            proxy.cut()
            for event_id in ("b", "c"):
                r = live.client.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": event_id})
                assert r.status_code == 503 and r.json()["error"] == "unavailable", r.text
            health = live.client.get(f"{live.url}/healthz")
            assert health.status_code == 503 and health.json()["store"] == "unavailable"
            proxy.restore()
            assert count_events(live, loop_id) == before
            r = live.client.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "b"})
            assert r.status_code == 202 and r.json()["duplicate"] is False
            assert live.client.get(f"{live.url}/healthz").status_code == 200
    finally:
        proxy.close()
