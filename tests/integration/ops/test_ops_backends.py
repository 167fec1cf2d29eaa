"""One operation, two backends: ``LocalBackend`` (in process, with a principal) and ``HttpBackend`` (the HTTP
route named in the operation table, the key deciding the principal) answer the same JSON and the same refusals;
and every operation's route is one the HTTP API really serves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_api import LiveApi, make_loop, tenant
from ops_support import Caller, agent_of

from wakeful.harness import ops
from wakeful.harness.errors import NotFound
from wakeful.harness.ops import OPERATIONS, HttpBackend, LocalBackend, Refused

pytestmark = pytest.mark.integration




@pytest.fixture
def live(store_url: str, tmp_path: Path) -> Iterator[LiveApi]:
    with LiveApi(store_url, tmp_path / "data") as api:
        yield api




def test_local_and_http_backends_answer_alike(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)

    async def both(name: str, **args: Any) -> tuple[Any, Any]:
        assert live.harness is not None
        local = await LocalBackend(live.harness, agent_of(t)).call(name, **args)
        caller = Caller(live.url, t["akey"])
        try:
            remote = await HttpBackend(caller).call(name, **args)
        finally:
            await caller.http.aclose()
        return local, remote

    for name, args in [("loops.get", {"include": "logs,pending"}), ("loops.logs", {"limit": 5}),
                       ("loops.transitions", {})]:
        local, remote = live.run(both(name, group_id=t["group"], loop_id=loop_id, **args))
        for view in (local, remote):
            view.pop("updated_ms", None)
        assert local == remote, name
    got, _ = live.run(both("loops.get", group_id=t["group"], loop_id=loop_id))
    assert got["id"] == loop_id and got["agent_id"] == t["agent"]


def test_both_backends_refuse_a_loop_outside_the_scope(live: LiveApi, compile_c: Any) -> None:
    t, other = live.call(tenant), live.call(tenant)
    loop_id = make_loop(live, other, compile_c)
    assert live.harness is not None

    async def local() -> None:
        await LocalBackend(live.harness, agent_of(t)).call("loops.get", group_id=other["group"], loop_id=loop_id)

    with pytest.raises(NotFound):
        live.run(local())

    async def remote() -> None:
        caller = Caller(live.url, t["akey"])
        try:
            await HttpBackend(caller).call("loops.get", group_id=t["group"], loop_id=loop_id)
        finally:
            await caller.http.aclose()

    with pytest.raises(Refused) as refused:
        live.run(remote())
    assert refused.value.code == "not_found" and refused.value.status == 404


def test_every_operation_is_served_by_its_route(live: LiveApi) -> None:
    assert ops.loops.get is OPERATIONS["loops.get"].fn
    doc = live.client.get(f"{live.url}/openapi.json").json()
    served = {(method.upper(), path) for path, item in doc["paths"].items() for method in item}
    missing = [(op.name, op.method, op.path) for op in OPERATIONS.values() if (op.method, op.path) not in served]
    assert not missing
