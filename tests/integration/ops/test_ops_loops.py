"""The Loop and webhook operations (issue 15): ``LocalBackend`` (in process, as a principal) and ``HttpBackend``
(the routes, the key deciding the principal) answer alike for create, list, pause, resume, delete, webhook and
the verifier, and refuse alike a Loop outside the principal's scope."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_api import COUNTER_C, LiveApi, tenant
from ops_support import Caller, agent_of

from wakeful.harness.errors import AgentNotFound, NotFound
from wakeful.harness.ops import HttpBackend, LocalBackend, Refused

pytestmark = pytest.mark.integration

VOLATILE = ("id", "loop_id", "name", "created_ms", "updated_ms", "activated_ms", "runtime", "node", "node_id",
            "object_id", "url", "hint")
SPEC = {"scheme": "hmac-sha256", "secret": "s3cret-s3cret-s3cret-0123", "header": "X-Sig", "encoding": "base64"}




@pytest.fixture
def live(store_url: str, tmp_path: Path) -> Iterator[LiveApi]:
    with LiveApi(store_url, tmp_path / "data") as api:
        yield api




def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


async def _both(live: LiveApi, t: dict[str, str], steps: Any) -> tuple[list[Any], list[Any]]:
    """Run ``steps(backend, tag)`` once in process and once over HTTP, as the tenant's agent."""
    assert live.harness is not None
    local = await steps(LocalBackend(live.harness, agent_of(t)), "local")
    caller = Caller(live.url, t["akey"])
    try:
        remote = await steps(HttpBackend(caller), "http")
    finally:
        await caller.http.aclose()
    return local, remote


def test_loop_and_webhook_operations_answer_alike(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    elf = compile_c(COUNTER_C, name="counter.c")

    async def upload(h: Any) -> str:
        return str((await h.upload(t["agent"], elf, path="/loops/counter.elf"))["artifact"])

    artifact = live.call(upload)
    g = {"group_id": t["group"]}

    async def steps(backend: Any, tag: str) -> list[Any]:
        made = await backend.call("loops.create", **g, agent_id=t["agent"], session_id=t["session"],
                                  artifact=artifact, name=f"made-{tag}", config={"k": 1})
        loop = {**g, "loop_id": made["id"]}
        seen = [made, await backend.call("loops.pause", **loop), await backend.call("loops.resume", **loop)]
        listed = await backend.call("loops.list", **g, state="active", limit=200)
        seen.append([v["name"] for v in listed["items"] if v["name"] == f"made-{tag}"])
        seen.append(await backend.call("webhooks.webhook", **loop, action="enable"))
        seen.append(await backend.call("webhooks.webhook", **loop, action="enable"))  # the URL is shown once
        seen.append(await backend.call("webhooks.set_verifier", **loop, **SPEC))
        seen.append(await backend.call("webhooks.get_verifier", **loop))
        seen.append(await backend.call("webhooks.clear_verifier", **loop))
        seen.append(await backend.call("webhooks.get_verifier", **loop))
        seen.append(await backend.call("webhooks.webhook", **loop, action="revoke"))
        seen.append(await backend.call("loops.delete", **loop))
        with pytest.raises((NotFound, Refused)) as gone:
            await backend.call("loops.get", **loop)
        seen.append(gone.value.code)
        return [_stable(v) for v in seen]

    local, remote = live.run(_both(live, t, steps))
    assert local[0]["state"] == "active" and local[0]["config"] == {"k": 1} and local[0]["artifact"] == artifact
    assert local[1]["state"] == "paused" and local[2]["state"] == "active" and local[3] == ["made-local"]
    assert local[4]["enabled"] is True and local[6]["verifier"]["scheme"] == "hmac-sha256"
    assert "secret" not in local[6]["verifier"] and local[8] is None and local[9]["verifier"] is None
    assert local[-2] is None and local[-1] == "not_found"
    remote[3] = ["made-local"]  # the one field that differs by design: each side named its own Loop
    assert local == remote


def test_both_backends_refuse_outside_the_scope(live: LiveApi, compile_c: Any) -> None:
    t, other = live.call(tenant), live.call(tenant)

    async def setup(h: Any) -> str:
        art = (await h.upload(other["agent"], compile_c(COUNTER_C, name="counter.c")))["artifact"]
        return str((await h.create_loop(agent_id=other["agent"], session_id=other["session"], artifact=art))["id"])

    foreign = live.call(setup)

    async def steps(backend: Any, tag: str) -> list[str]:
        codes = []
        calls = [("loops.pause", {}), ("loops.resume", {}), ("loops.delete", {}),
                 ("webhooks.webhook", {"action": "enable"}), ("webhooks.get_verifier", {}),
                 ("webhooks.set_verifier", SPEC), ("webhooks.clear_verifier", {})]
        for name, extra in calls:
            with pytest.raises((NotFound, Refused)) as refused:
                await backend.call(name, group_id=t["group"], loop_id=foreign, **extra)
            codes.append(refused.value.code)
        with pytest.raises((AgentNotFound, Refused)) as refused:  # another group's agent and session
            await backend.call("loops.create", group_id=t["group"], agent_id=other["agent"],
                               session_id=other["session"], artifact="/loops/main.elf")
        codes.append(refused.value.code)
        listed = await backend.call("loops.list", group_id=t["group"], agent_id=other["agent"])
        codes.append(str(listed["items"]))
        return codes

    local, remote = live.run(_both(live, t, steps))
    assert local == remote == ["not_found"] * 7 + ["agent_not_found", "[]"]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_loop_created_offline_is_adopted_at_once_on_postgresql(
    harness_runner: Any, store_url: str, tmp_path: Path, compile_c: Any,
) -> None:
    """issue 19: the local command line (``Harness.offline``, no runtime) creates a Loop; a node on the same
    PostgreSQL store that runs no periodic tick adopts it, woken by ``NOTIFY wakeful_loops`` rather than its
    next reconcile. (On SQLite no signal reaches the node: the CLI says how long its reconcile takes.)"""
    from support.loops_harness import loop_row, started, until

    from wakeful.harness import Harness
    from wakeful.harness.config import Config
    from wakeful.harness.ops import OPERATOR
    from wakeful.harness.placement import signals

    node = await started(store_url, None, tmp_path / "node")  # sweeps=False: only a signal can adopt now
    heard: list[tuple[str, str]] = []  # NOTIFY is database-wide: other tests' nodes may signal too, so the
    ears = signals.Listener(node.store, lambda channel, text: heard.append((channel, text)))  # Loop's own id
    ears.start()
    try:
        await ears.connected.wait()
        group = await node.create_group("g")
        agent = await node.create_agent(group.id, "a")
        session = await node.create_session(agent.id)
        art = (await node.upload(agent.id, compile_c(COUNTER_C, name="counter.c")))["artifact"]
        async with Harness(Config(data_dir=tmp_path / "cli", store_url=store_url)).offline() as cli:
            assert cli.signals_nodes
            made = await LocalBackend(cli, OPERATOR).call("loops.create", group_id=group.id, agent_id=agent.id,
                                                           session_id=session.id, artifact=art)
        assert made["runtime"]["state"] == "loading" and made["creator"] == "operator"  # nothing ran here

        async def signalled() -> bool:
            return any(c == signals.LOOPS and t.startswith(made["id"] + " cli-") for c, t in heard)

        async def resident() -> bool:  # in store terms: an incarnation began on the node
            await node.settle()
            row = await loop_row(node, made["id"])
            return row.incarnation >= 1 and row.node_id == node.node.node_id

        await until(signalled)  # the command named this Loop on wakeful_loops …
        await until(resident)  # … and the node, which runs no tick of its own, adopted it
    finally:
        await ears.stop()
        await node.stop()
