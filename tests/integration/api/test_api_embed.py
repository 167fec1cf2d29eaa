"""``await h.serve_http(host, port)`` (interfaces.md §5): an embedded harness serves the HTTP API from its own
process until the serving task is cancelled, and the port is released afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import httpx
import pytest

from wakeful import Harness
from wakeful.harness.config import Config

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_http_from_an_embedded_harness(tmp_path: Path) -> None:
    port = _free_port()

    async def main() -> None:
        async with Harness(Config(data_dir=tmp_path, node_name="embedded"), sweeps=False) as h:
            _, admin = await h.create_key("admin")
            task = asyncio.create_task(h.serve_http("127.0.0.1", port, access_log=False))
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                for _ in range(200):
                    with contextlib.suppress(httpx.ConnectError):
                        health = await client.get("/healthz")
                        break
                    await asyncio.sleep(0.05)
                assert health.status_code == 200 and health.json() == {"status": "ok", "node": "embedded",
                                                                       "store": "ok"}
                made = await client.post("/v1/groups", json={"name": "g"}, headers={"Authorization": f"Bearer {admin}"})
                assert made.status_code == 201
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        with socket.socket() as s:  # the port is free again
            s.bind(("127.0.0.1", port))

    asyncio.run(main())
