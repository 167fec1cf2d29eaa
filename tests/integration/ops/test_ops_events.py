"""The event, build and artifact operations on both backends: ``LocalBackend`` (in process, with a principal) and
``HttpBackend`` (their HTTP routes, the key deciding the principal) answer the same JSON and refuse alike outside
the principal's scope."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_api import LiveApi, auth, make_loop, tenant
from ops_support import Caller, agent_of

from wakeful.harness.errors import HarnessError
from wakeful.harness.ops import HttpBackend, LocalBackend, Principal, Refused

pytestmark = pytest.mark.integration

EXITS_5 = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { sf_log(\"five\"); return 5; }\n"




@pytest.fixture
def live(store_url: str, tmp_path: Path) -> Iterator[LiveApi]:
    with LiveApi(store_url, tmp_path / "data") as api:
        yield api




def _person(t: dict[str, str]) -> Principal:
    return Principal("group", "k", t["group"], None)


def _both(live: LiveApi, principal: Principal, key: str) -> Any:
    async def call(name: str, **args: Any) -> tuple[Any, Any]:
        assert live.harness is not None
        local = await LocalBackend(live.harness, principal).call(name, **dict(args))
        caller = Caller(live.url, key)
        try:
            remote = await HttpBackend(caller).call(name, **dict(args))
        finally:
            await caller.http.aclose()
        return local, remote

    return lambda name, **args: live.run(call(name, **args), timeout=120)


def _refusals(live: LiveApi, principal: Principal, key: str, name: str, **args: Any) -> tuple[str, str]:
    async def local() -> str:
        assert live.harness is not None
        try:
            await LocalBackend(live.harness, principal).call(name, **dict(args))
        except HarnessError as exc:
            return exc.code
        return "answered"

    async def remote() -> str:
        caller = Caller(live.url, key)
        try:
            await HttpBackend(caller).call(name, **dict(args))
        except Refused as exc:
            return exc.code
        finally:
            await caller.http.aclose()
        return "answered"

    return live.run(local()), live.run(remote())


def test_event_operations_answer_alike(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    both = _both(live, agent_of(t), t["akey"])
    at = {"group_id": t["group"], "loop_id": loop_id}
    sent, again = both("events.send", topic="hold", payload={"n": 1}, event_id="e1", **at)
    assert sent == {"status": "accepted", "event_id": "e1", "duplicate": False}
    assert again == {"status": "accepted", "event_id": "e1", "duplicate": True}  # the same id: one event
    listed, listed_remote = both("events.list", payloads=True, **at)
    assert listed == listed_remote and [e["event_id"] for e in listed["items"]] == ["e1"]
    assert listed["items"][0]["payload"] == {"n": 1} and set(listed) == {"items", "next_cursor", "pending_count"}
    pending, pending_remote = both("events.list", status="pending", limit=1, **at)
    assert pending == pending_remote
    discarded, discarded_remote = both("events.discard", event_ids=["never-sent"], **at)
    assert discarded == discarded_remote == {"discarded": []}
    retried, retried_remote = both("events.retry", event_ids=["never-sent"], **at)
    for view in (retried, retried_remote):
        view["loop"].pop("updated_ms", None)
    assert retried == retried_remote and retried["retried"] == [] and retried["loop"]["id"] == loop_id


def test_build_sdk_and_artifact_operations_answer_alike(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    both = _both(live, agent_of(t), t["akey"])
    sdk, sdk_remote = both("sdk.get", group_id=t["group"])
    assert sdk == sdk_remote and sdk["sdk_version"] == 1 and sdk["limits"]["pending_events"] == 32
    built, built_remote = both("builds.create", group_id=t["group"], source=EXITS_5, path="/loops/five.elf")
    for report in (built, built_remote):
        report.pop("cached")
    assert built == built_remote and built["state"] == "succeeded" and built["path"] == "/loops/five.elf"
    failed, failed_remote = both("builds.create", group_id=t["group"], source="int main(void) { return nope; }")
    assert failed == failed_remote and failed["state"] == "failed" and "nope" in failed["diagnostics"]
    ran, ran_remote = both("builds.test", group_id=t["group"], artifact="/loops/five.elf",
                           events=[{"topic": "go"}], host_replies={"agent.notify": [{"result": {}}]})
    for report in (ran, ran_remote):
        report.pop("guest_ms")
    assert ran == ran_remote and ran["exit_code"] == 5 and ran["logs"] == ["five"]
    assert ran["artifact"] == built["artifact"] and ran["logs_refused"] == {}

    person = _both(live, _person(t), t["gkey"])
    meta, meta_remote = person("artifacts.get", group_id=t["group"], sha256=built["artifact"])
    assert meta == meta_remote and meta["origin"] == "build" and meta["size"] == built["elf_bytes"]

    elf = compile_c(EXITS_5, name="up.c")
    assert live.harness is not None
    local = live.run(LocalBackend(live.harness, agent_of(t)).call("artifacts.upload", group_id=t["group"], elf=elf,
                                                                   path="/loops/up.elf"))
    remote = live.client.post(f"{live.url}/v1/agent-groups/{t['group']}/artifacts", params={"path": "/loops/up.elf"},
                              content=elf, headers=auth(t["akey"], **{"Content-Type": "application/octet-stream"}))
    assert remote.status_code == 201 and remote.json() == local and local["size"] == len(elf)


def test_both_backends_refuse_alike_outside_the_scope(live: LiveApi, compile_c: Any) -> None:
    t, other = live.call(tenant), live.call(tenant)
    theirs = make_loop(live, other, compile_c)
    agent, key = agent_of(t), t["akey"]
    for name, args in [("events.list", {}), ("events.retry", {}), ("events.discard", {}),
                       ("events.send", {"topic": "t"})]:
        assert _refusals(live, agent, key, name, group_id=t["group"], loop_id=theirs, **args) == (
            "not_found", "not_found"), name
    # another group in the path: outside the key's scope
    for name, args in [("events.list", {"loop_id": theirs}), ("sdk.get", {}),
                       ("builds.test", {"artifact": "/loops/counter.elf"}), ("builds.create", {"source": EXITS_5})]:
        assert _refusals(live, agent, key, name, group_id=other["group"], **args) == ("not_found", "not_found"), name
    # an agent key may not read artifact metadata (a group route); a test of a path the agent never built
    assert _refusals(live, agent, key, "artifacts.get", group_id=t["group"], sha256="0" * 64) == (
        "forbidden", "forbidden")
    assert _refusals(live, agent, key, "builds.test", group_id=t["group"], artifact="/loops/none.elf") == (
        "artifact_not_found", "artifact_not_found")
    assert _refusals(live, agent, key, "builds.test", group_id=t["group"], timeout_s=31) == (
        "invalid_request", "invalid_request")
