"""The routes' key checks (``require_admin``, ``require_member``, ``require_group``) run on the event loop, not in
anyio's worker threads: FastAPI hands a plain-function dependency to a thread on every request (issue 16 — a thread
hop per request, and a restarted node's first request imported anyio's backend and started the pool on the way to
the harness bench's first listing)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from support.asgi_call import asgi_call

from wakeful.api.app import create_app
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness


def test_a_listing_with_a_group_key_runs_no_dependency_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed: list[Any] = []
    real = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append(func)
        return await real(func, *args, **kwargs)

    async def run() -> tuple[int, dict[str, Any], int]:
        h = Harness(Config(data_dir=tmp_path, store_url=f"sqlite:///{tmp_path / 'w.db'}"), sweeps=False)
        await h.start()
        try:
            group = await h.create_group("g")
            _, admin = await h.create_key("admin")
            _, key = await h.create_key("group", group_id=group.id)
            app = create_app(h, public_docs=False, ui=False)
            monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
            _, status, _, data = await asgi_call(app, "GET", f"/v1/agent-groups/{group.id}/loops", key=key)
            _, admin_status, _, _ = await asgi_call(app, "GET", "/v1/groups", key=admin)
            return status, json.loads(data), admin_status
        finally:
            await h.stop()

    status, body, admin_status = asyncio.run(run())
    assert (status, body["items"], admin_status) == (200, [], 200)
    assert handed == [], handed
