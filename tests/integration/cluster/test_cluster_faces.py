"""Faces of a cluster: ``wakeful serve --node-name`` reaches the node row; ``GET /v1/nodes`` (admin) and
``wakeful status`` show nodes, heartbeat age, objects and leases (interfaces.md §2.2, §4.2)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_nodes import Probe, ServeNode, set_up, until
from support.harness_fixtures import pg_url_with_schema

pytestmark = pytest.mark.integration


async def test_nodes_and_leases_in_the_api_and_in_wakeful_status(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=2, loops_per_agent=2)
    nodes = [ServeNode("east-1", url, tmp_path / "e"), ServeNode("west-1", url, tmp_path / "w")]
    probe = await Probe.open(url)
    try:
        await asyncio.gather(*(n.start() for n in nodes))

        async def placed() -> bool:
            return all(obj is not None for _, obj, _ in (await probe.placement()).values())

        await until(placed, timeout=30)
        async with httpx.AsyncClient(timeout=10) as client:
            async def listed() -> list[dict[str, Any]]:
                resp = await client.get(f"{nodes[0].url}/v1/nodes",
                                        headers={"Authorization": f"Bearer {tenant.admin_key}"})
                assert resp.status_code == 200, resp.text
                return list(resp.json()["items"])

            async def gauges_caught_up() -> bool:  # heartbeats carry the objects gauge every second
                return sum(n["objects"] for n in await listed()) == 4

            await until(gauges_caught_up, timeout=10)
            items = await listed()
            assert sorted(n["name"] for n in items) == ["east-1", "west-1"]  # --node-name reached the row
            assert all(n["state"] == "alive" and n["alive"] and n["heartbeat_age_ms"] < 5000 for n in items)
            assert sum(n["leases_held"] for n in items) == 2
            assert all(n["pid"] == s.proc.pid for n in items for s in nodes if s.name == n["name"])  # type: ignore[union-attr]
            group = await client.get(f"{nodes[0].url}/v1/nodes", headers={"Authorization": f"Bearer {tenant.key}"})
            assert group.status_code == 403
            anonymous = await client.get(f"{nodes[0].url}/v1/nodes")
            assert anonymous.status_code == 401

        env = {**os.environ, "WAKEFUL_DB_URL": url, "WAKEFUL_HOME": str(tmp_path / "cli")}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wakeful.cli.main", "status", "--json", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        doc = json.loads(out)
        assert sorted(n["name"] for n in doc["nodes"]) == ["east-1", "west-1"]
        assert doc["leases"]["held"] == 2 and doc["leases"]["agents_without_lease"] == 0
        assert doc["loops"] == {"active": 4}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wakeful.cli.main", "status", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0 and b"east-1" in out and b"leases: 2 held" in out, (out, err)

        remote = await asyncio.create_subprocess_exec(  # remote mode: the nodes of GET /v1/nodes
            sys.executable, "-m", "wakeful.cli.main", "status", "--json", "--server", nodes[1].url,
            "--key", tenant.admin_key, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await remote.communicate()
        assert remote.returncode == 0, err.decode()
        doc = json.loads(out)
        assert sorted(n["name"] for n in doc["nodes"]) == ["east-1", "west-1"] and doc["leases"]["held"] == 2
        assert doc["recent_refusals"]["window_s"] == 3600  # the answering node's 429/503 counts
        refused = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wakeful.cli.main", "status", "--json", "--server", nodes[1].url,
            "--key", tenant.key, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await refused.communicate()
        assert refused.returncode == 1 and json.loads(out)["error"] == "forbidden", out
    finally:
        await asyncio.gather(*(n.close() for n in nodes))
        await probe.close()
