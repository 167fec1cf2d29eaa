"""Groups, keys, agents, sessions and messages: each operation answers alike in process (``LocalBackend``, with
the principal ``ops.keys.authenticate`` gives the key) and over its HTTP route (``HttpBackend``, the same key),
and refuses alike outside the key's scope or role."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_api import LiveApi, tenant
from test_ops_backends import Caller

from wakeful.harness import ops
from wakeful.harness.errors import HarnessError, Unauthorized
from wakeful.harness.ops import HttpBackend, LocalBackend, Refused

pytestmark = pytest.mark.integration
FRESH = ("id", "created_ms", "key", "archived_ms")  # what two creations (or two archives) never share


@pytest.fixture
def live(store_url: str, tmp_path: Path) -> Iterator[LiveApi]:
    with LiveApi(store_url, tmp_path / "data") as api:
        yield api


class Both:
    """One key, two backends."""

    def __init__(self, live: LiveApi, key: str) -> None:
        self.live, self.key = live, key

    async def _local(self, name: str, args: dict[str, Any], /) -> Any:
        assert self.live.harness is not None
        principal = await ops.keys.authenticate(self.live.harness, self.key)
        return await LocalBackend(self.live.harness, principal).call(name, **args)

    async def _remote(self, name: str, args: dict[str, Any], /) -> Any:
        caller = Caller(self.live.url, self.key)
        try:
            return await HttpBackend(caller).call(name, **args)
        finally:
            await caller.http.aclose()

    def local(self, name: str, /, **args: Any) -> Any:
        return self.live.run(self._local(name, dict(args)))

    def remote(self, name: str, /, **args: Any) -> Any:
        return self.live.run(self._remote(name, dict(args)))

    def alike(self, name: str, /, **args: Any) -> Any:
        local, remote = self.local(name, **args), self.remote(name, **args)
        assert local == remote, name
        return local

    def refused(self, name: str, /, **args: Any) -> tuple[str, str, int]:
        with pytest.raises(HarnessError) as local:
            self.local(name, **args)
        with pytest.raises(Refused) as remote:
            self.remote(name, **args)
        assert local.value.code == remote.value.code, (name, local.value.code, remote.value.code)
        return local.value.code, remote.value.code, remote.value.status


def settled(view: Any) -> Any:
    """A record without what two creations (or two archives) never share."""
    if isinstance(view, dict):
        return {k: settled(v) for k, v in view.items() if k not in FRESH}
    return view


def same_shape(a: Any, b: Any) -> None:
    assert set(a) == set(b) and settled(a) == settled(b)


def test_each_operation_answers_alike_in_process_and_over_http(live: LiveApi) -> None:
    t = live.call(tenant)
    g, admin, agent = Both(live, t["gkey"]), Both(live, t["admin"]), Both(live, t["akey"])
    where = {"group_id": t["group"]}

    same_shape(admin.local("groups.create", name="made"), admin.remote("groups.create", name="made"))
    assert len(admin.alike("groups.list")["items"]) == 3
    assert admin.alike("groups.list", limit=1)["next_cursor"] is not None

    same_shape(g.local("agents.create", **where, name="a2", metadata={"k": 1}),
               g.remote("agents.create", **where, name="a2", metadata={"k": 1}))
    assert len(g.alike("agents.list", **where)["items"]) == 3
    assert agent.alike("agents.list", **where)["items"] == [g.alike("agents.get", **where, agent_id=t["agent"])]
    archived = g.local("agents.archive", **where, agent_id=t["agent"])
    assert archived["agent"]["status"] == "archived" and archived["paused_loops"] == []
    back = g.remote("agents.unarchive", **where, agent_id=t["agent"])
    assert back["agent"]["status"] == "active" and back["resumed"] == back["quota_paused"] == []
    same_shape(archived, g.remote("agents.archive", **where, agent_id=t["agent"]))
    assert settled(g.local("agents.unarchive", **where, agent_id=t["agent"])) == settled(back)

    mine = {**where, "agent_id": t["agent"]}
    made = agent.local("sessions.create", **mine, title="t")
    same_shape(made, agent.remote("sessions.create", **mine, title="t"))
    assert made["title"] == "t" and made["agent_id"] == t["agent"]
    assert len(agent.alike("sessions.list", **mine)["items"]) == 3
    assert agent.local("sessions.delete", **where, session_id=made["id"]) is None
    other = next(s["id"] for s in agent.remote("sessions.list", **mine)["items"] if s["id"] != t["session"])
    assert agent.remote("sessions.delete", **where, session_id=other) is None
    assert len(agent.alike("sessions.list", **mine)["items"]) == 1

    inbox = {**where, "session_id": t["session"]}
    assert agent.alike("messages.list", **inbox, unhandled=True) == {"items": [], "next_cursor": None}
    assert agent.alike("messages.handled", **inbox, message_ids=["msg_nope"]) == {"handled": []}

    key = g.local("keys.create", **where, role="agent", agent_id=t["agent"], label="x")
    same_shape(key, g.remote("keys.create", **where, role="agent", agent_id=t["agent"], label="x"))
    assert key["key"].startswith("wk_") and key["role"] == "agent"
    listed = g.alike("keys.list", **where)["items"]
    assert key["id"] in {k["id"] for k in listed} and all("key" not in k for k in listed)
    assert g.local("keys.revoke", **where, key_id=key["id"]) is None
    with pytest.raises(Unauthorized):  # revoked: the key cache forgot it at once
        live.run(ops.keys.authenticate(live.harness, key["key"]))  # type: ignore[arg-type]
    second = [k for k in g.remote("keys.list", **where)["items"] if k["label"] == "x" and k["revoked_ms"] is None]
    assert g.remote("keys.revoke", **where, key_id=second[0]["id"]) is None


def test_each_operation_refuses_alike_outside_the_scope_or_role(live: LiveApi) -> None:
    t, other = live.call(tenant), live.call(tenant)
    g, agent = Both(live, t["gkey"]), Both(live, t["akey"])
    theirs = {"group_id": other["group"]}
    mine = {"group_id": t["group"]}
    assert g.refused("agents.list", **theirs)[1:] == ("not_found", 404)
    assert g.refused("agents.get", **mine, agent_id=other["agent"])[1:] == ("agent_not_found", 404)
    assert g.refused("sessions.list", **mine, agent_id=other["agent"])[1:] == ("agent_not_found", 404)
    assert g.refused("messages.list", **mine, session_id=other["session"])[1:] == ("session_not_found", 404)
    assert g.refused("messages.handled", **mine, session_id=other["session"], up_to="x")[0] == "session_not_found"
    assert g.refused("sessions.delete", **mine, session_id=other["session"])[0] == "session_not_found"
    assert g.refused("keys.list", **theirs)[0] == "not_found"
    assert g.refused("keys.revoke", **mine, key_id="key_nope")[1:] == ("not_found", 404)
    assert g.refused("groups.list")[1:] == ("forbidden", 403)
    assert g.refused("groups.create", name="nope")[0] == "forbidden"
    assert agent.refused("agents.create", **mine, name="nope")[1:] == ("forbidden", 403)
    assert agent.refused("agents.archive", **mine, agent_id=t["agent"])[0] == "forbidden"
    assert agent.refused("keys.create", **mine, role="group")[0] == "forbidden"
    assert g.refused("keys.create", **mine, role="admin")[1:] == ("invalid_request", 400)


def test_authenticate_is_the_one_key_check(live: LiveApi) -> None:
    t, other = live.call(tenant), live.call(tenant)
    h = live.harness
    assert h is not None

    def code(token: str | None, acting: str | None = None) -> str:
        with pytest.raises(HarnessError) as refused:
            live.run(ops.keys.authenticate(h, token, acting))
        return refused.value.code

    assert code(None) == code("wk_nope_nope") == "unauthorized"
    assert code(t["akey"], other["agent"]) == "forbidden"  # an agent key acts only as itself
    assert code(t["gkey"], other["agent"]) == "not_found"  # an agent of another group
    person = live.run(ops.keys.authenticate(h, t["gkey"]))
    assert (person.role, person.kind, person.group_id) == ("group", "person", t["group"])
    acting = live.run(ops.keys.authenticate(h, t["admin"], other["agent"]))
    assert (acting.kind, acting.agent_id, acting.agent_group_id) == ("agent", other["agent"], other["group"])
