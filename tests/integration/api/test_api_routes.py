"""The non-intake routes of interfaces.md §2.2 on a live server (SQLite and PostgreSQL): administration and
keys, principals and scope (404 outside, 403 for a missing role), agents, sessions, messages, the SSE stream,
handled, artifacts, Loops and their events, logs and transitions; the OpenAPI document and pagination."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_api import LiveApi, auth, make_loop, tenant

pytestmark = pytest.mark.integration

EXPECTED_ROUTES = {
    ("get", "/healthz"), ("get", "/v1/info"), ("post", "/v1/groups"), ("get", "/v1/groups"),
    ("post", "/v1/groups/{group_id}/keys"), ("get", "/v1/groups/{group_id}/keys"),
    ("delete", "/v1/groups/{group_id}/keys/{key_id}"),
    ("post", "/v1/agent-groups/{group_id}/agents"), ("get", "/v1/agent-groups/{group_id}/agents"),
    ("get", "/v1/agent-groups/{group_id}/agents/{agent_id}"),
    ("post", "/v1/agent-groups/{group_id}/agents/{agent_id}/archive"),
    ("post", "/v1/agent-groups/{group_id}/agents/{agent_id}/unarchive"),
    ("post", "/v1/agent-groups/{group_id}/agents/{agent_id}/sessions"),
    ("get", "/v1/agent-groups/{group_id}/agents/{agent_id}/sessions"),
    ("delete", "/v1/agent-groups/{group_id}/sessions/{session_id}"),
    ("get", "/v1/agent-groups/{group_id}/sessions/{session_id}/messages"),
    ("get", "/v1/agent-groups/{group_id}/sessions/{session_id}/stream"),
    ("post", "/v1/agent-groups/{group_id}/sessions/{session_id}/messages/handled"),
    ("post", "/v1/agent-groups/{group_id}/builds"), ("post", "/v1/agent-groups/{group_id}/artifacts"),
    ("get", "/v1/agent-groups/{group_id}/artifacts/{sha256}"),
    ("post", "/v1/agent-groups/{group_id}/loops"), ("get", "/v1/agent-groups/{group_id}/loops"),
    ("get", "/v1/agent-groups/{group_id}/loops/{loop_id}"),
    ("post", "/v1/agent-groups/{group_id}/loops/{loop_id}/pause"),
    ("post", "/v1/agent-groups/{group_id}/loops/{loop_id}/resume"),
    ("delete", "/v1/agent-groups/{group_id}/loops/{loop_id}"),
    ("post", "/v1/agent-groups/{group_id}/loops/{loop_id}/webhook"),
    ("get", "/v1/agent-groups/{group_id}/loops/{loop_id}/events"),
    ("post", "/v1/agent-groups/{group_id}/loops/{loop_id}/events"),
    ("post", "/v1/agent-groups/{group_id}/loops/{loop_id}/pending/retry"),
    ("post", "/v1/agent-groups/{group_id}/loops/{loop_id}/pending/discard"),
    ("get", "/v1/agent-groups/{group_id}/loops/{loop_id}/logs"),
    ("get", "/v1/agent-groups/{group_id}/loops/{loop_id}/transitions"),
    ("post", "/v1/loop-webhooks/{secret}"),
}


@pytest.fixture
def live(store_url: str, tmp_path: Path) -> Iterator[LiveApi]:
    with LiveApi(store_url, tmp_path / "data") as api:
        yield api


def test_openapi_lists_every_route_and_never_422(live: LiveApi) -> None:
    doc = live.client.get(f"{live.url}/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    listed = {(method, path) for path, item in doc["paths"].items() for method in item}
    assert listed >= EXPECTED_ROUTES, sorted(EXPECTED_ROUTES - listed)
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            assert "422" not in operation.get("responses", {}), (method, path)
    assert "HTTPValidationError" not in json.dumps(doc)
    assert live.client.get(f"{live.url}/docs").status_code == 200


def test_admin_keys_and_principals(live: LiveApi) -> None:
    t = live.call(tenant)
    c, u = live.client, live.url
    # groups: admin only (403 for a group key), 201 on create, pagination
    assert c.post(f"{u}/v1/groups", headers=auth(t["gkey"]), json={"name": "x"}).status_code == 403
    made = [c.post(f"{u}/v1/groups", headers=auth(t["admin"]), json={"name": f"g{i}"}) for i in range(3)]
    assert {r.status_code for r in made} == {201}
    first = c.get(f"{u}/v1/groups", params={"limit": 2}, headers=auth(t["admin"])).json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = c.get(f"{u}/v1/groups", params={"limit": 2, "cursor": first["next_cursor"]},
                 headers=auth(t["admin"])).json()
    ids = [g["id"] for g in first["items"] + rest["items"]]
    assert len(ids) == 4 == len(set(ids)) and rest["next_cursor"] is None
    assert c.get(f"{u}/v1/groups", params={"limit": 201}, headers=auth(t["admin"])).json()["field"] == "limit"
    # keys: the text appears only at creation; a revoked key is 401 at once on this node
    key = c.post(f"{u}/v1/groups/{t['group']}/keys", headers=auth(t["gkey"]),
                 json={"role": "agent", "agent_id": t["agent"], "label": "bot"})
    assert key.status_code == 201 and key.json()["key"].startswith("wk_")
    listed = c.get(f"{u}/v1/groups/{t['group']}/keys", headers=auth(t["gkey"])).json()["items"]
    assert key.json()["id"] in {k["id"] for k in listed} and all("key" not in k for k in listed)
    info = c.get(f"{u}/v1/info", headers=auth(key.json()["key"])).json()
    assert info["principal"] == {"role": "agent", "kind": "agent", "group_id": t["group"], "agent_id": t["agent"],
                                 "key_id": key.json()["id"]}
    assert c.delete(f"{u}/v1/groups/{t['group']}/keys/{key.json()['id']}", headers=auth(t["gkey"])).status_code == 204
    assert c.get(f"{u}/v1/info", headers=auth(key.json()["key"])).status_code == 401
    # an agent key may not manage keys (403); a key of another group sees 404
    assert c.get(f"{u}/v1/groups/{t['group']}/keys", headers=auth(t["akey"])).status_code == 403
    other = live.call(tenant)
    assert c.get(f"{u}/v1/groups/{t['group']}/keys", headers=auth(other["gkey"])).status_code == 404
    # X-Wakeful-Agent makes a group key an agent principal; another group's agent is 404; agent keys cannot switch
    info = c.get(f"{u}/v1/info", headers=auth(t["gkey"], **{"X-Wakeful-Agent": t["agent"]})).json()
    assert info["principal"]["kind"] == "agent" and info["principal"]["agent_id"] == t["agent"]
    assert c.get(f"{u}/v1/info", headers=auth(t["gkey"], **{"X-Wakeful-Agent": other["agent"]})).status_code == 404
    assert c.get(f"{u}/v1/info", headers=auth(t["akey"], **{"X-Wakeful-Agent": other["agent"]})).status_code == 403
    assert c.get(f"{u}/v1/info", headers=auth(t["gkey"])).json()["principal"]["kind"] == "person"


def test_agents_sessions_messages_stream(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    c, g = live.client, f"{live.url}/v1/agent-groups/{t['group']}"
    # agents: group key creates; an agent key sees only itself; another agent is 404 to it
    other = c.post(f"{g}/agents", headers=auth(t["gkey"]), json={"name": "a2", "metadata": {"team": "x"}})
    assert other.status_code == 201
    assert c.post(f"{g}/agents", headers=auth(t["akey"]), json={"name": "a3"}).status_code == 403
    assert [a["id"] for a in c.get(f"{g}/agents", headers=auth(t["akey"])).json()["items"]] == [t["agent"]]
    assert len(c.get(f"{g}/agents", headers=auth(t["gkey"])).json()["items"]) == 2
    assert c.get(f"{g}/agents/{other.json()['id']}", headers=auth(t["akey"])).status_code == 404
    r = c.post(f"{g}/agents", headers=auth(t["gkey"]), json={"name": ""})
    assert r.status_code == 400 and r.json()["error"] == "invalid_request" and r.json()["field"] == "name"
    # sessions
    s2 = c.post(f"{g}/agents/{t['agent']}/sessions", headers=auth(t["akey"]), json={"title": "second"})
    assert s2.status_code == 201
    assert len(c.get(f"{g}/agents/{t['agent']}/sessions", headers=auth(t["akey"])).json()["items"]) == 2
    assert c.delete(f"{g}/sessions/{s2.json()['id']}", headers=auth(t["akey"])).status_code == 204
    # a Loop wakes the agent: the message appears in the page and on the SSE stream
    loop_id = make_loop(live, t, compile_c)
    assert c.delete(f"{g}/sessions/{t['session']}", headers=auth(t["akey"])).json()["error"] == "session_in_use"
    with httpx.Client(timeout=httpx.Timeout(30, read=30)) as sse, sse.stream(
            "GET", f"{g}/sessions/{t['session']}/stream", headers=auth(t["akey"])) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        assert c.post(f"{g}/loops/{loop_id}/events", headers=auth(t["gkey"]),
                      json={"topic": "wake", "event_id": "e1"}).status_code == 202
        event: dict[str, str] = {}
        for line in stream.iter_lines():
            if line.startswith(("id:", "event:", "data:")):
                name, _, value = line.partition(":")
                event[name] = value.strip()
            if "data" in event:
                break
    assert event["event"] == "message" and json.loads(event["data"])["dedup_key"] == "ev:e1"
    page = c.get(f"{g}/sessions/{t['session']}/messages", headers=auth(t["akey"])).json()
    woke = c.get(f"{g}/loops", headers=auth(t["akey"])).json()["items"][0]
    assert woke["wakes"]["window_used"] == 1 and woke["wakes"]["last_ms"] == page["items"][0]["created_ms"]
    assert [m["id"] for m in page["items"]] == [json.loads(event["data"])["id"]]
    assert page["items"][0]["cursor"] == event["id"]
    # resume after the last seen id: nothing new yet
    assert c.get(f"{g}/sessions/{t['session']}/messages", params={"after": event["id"]},
                 headers=auth(t["akey"])).json()["items"] == []
    # SSE resume: Last-Event-ID = the last cursor seen; only later messages arrive
    assert c.post(f"{g}/loops/{loop_id}/events", headers=auth(t["gkey"]),
                  json={"topic": "wake", "event_id": "e2"}).status_code == 202
    with httpx.Client(timeout=httpx.Timeout(30, read=30)) as sse, sse.stream(
            "GET", f"{g}/sessions/{t['session']}/stream",
            headers=auth(t["akey"], **{"Last-Event-ID": event["id"]})) as stream:
        data = next(line for line in stream.iter_lines() if line.startswith("data:"))
    assert json.loads(data[5:])["dedup_key"] == "ev:e2"
    r = c.get(f"{g}/sessions/{t['session']}/stream", headers=auth(t["akey"], **{"Last-Event-ID": "nope!"}))
    assert r.status_code == 400 and r.json()["field"] == "last-event-id"
    c.post(f"{g}/sessions/{t['session']}/messages/handled", headers=auth(t["akey"]),
           json={"up_to": json.loads(data[5:])["cursor"]})
    page = c.get(f"{g}/sessions/{t['session']}/messages", headers=auth(t["akey"])).json()
    assert [m["handled"] for m in page["items"]] == [True, True]
    # handled: by id, then the unhandled filter is empty; up_to with a foreign cursor is 400
    done = c.post(f"{g}/sessions/{t['session']}/messages/handled", headers=auth(t["akey"]),
                  json={"message_ids": [page["items"][0]["id"]]}).json()
    assert done == {"handled": []}  # already handled by up_to: marking is idempotent
    assert c.get(f"{g}/sessions/{t['session']}/messages", params={"unhandled": "true"},
                 headers=auth(t["akey"])).json()["items"] == []
    huge = base64.urlsafe_b64encode(b"99999999999999999999999:m").decode().rstrip("=")  # over a 64-bit integer
    r = c.get(f"{g}/sessions/{t['session']}/messages", params={"after": huge}, headers=auth(t["akey"]))
    assert r.status_code == 400 and r.json()["field"] == "after"
    r = c.post(f"{g}/sessions/{t['session']}/messages/handled", headers=auth(t["akey"]), json={"up_to": huge})
    assert r.status_code == 400 and r.json()["field"] == "up_to"
    r = c.post(f"{g}/sessions/{t['session']}/messages/handled", headers=auth(t["akey"]), json={"up_to": "!!"})
    assert r.status_code == 400 and r.json()["field"] == "up_to"
    r = c.post(f"{g}/sessions/{t['session']}/messages/handled", headers=auth(t["akey"]), json={})
    assert r.status_code == 400


def test_loops_and_events_routes(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    c, g = live.client, f"{live.url}/v1/agent-groups/{t['group']}"
    loop_id = make_loop(live, t, compile_c)
    view = c.get(f"{g}/loops/{loop_id}", headers=auth(t["akey"])).json()
    assert view["id"] == loop_id and view["state"] == "active" and view["artifact"].startswith("sha256:")
    assert view["wakes"]["window_limit"] == 6 and view["wakes"]["window_used"] == 0
    assert view["reloads"] == {"count": 0, "window_start_ms": None}
    assert view["runtime"]["state"] == "resident" and view["runtime"]["object_state"] in ("running", "waiting", "ready")
    art = c.get(f"{g}/artifacts/{view['artifact']}", headers=auth(t["gkey"])).json()
    assert art["size"] > 0
    raw = c.get(f"{g}/artifacts/{view['artifact']}", params={"download": 1}, headers=auth(t["gkey"]))
    assert raw.content.startswith(b"\x7fELF") and len(raw.content) == art["size"]
    assert c.get(f"{g}/artifacts/sha256:{'0' * 64}", headers=auth(t["gkey"])).json()["error"] == "artifact_not_found"
    r = c.post(f"{g}/artifacts", content=b"not an elf", headers=auth(t["akey"], **{
        "Content-Type": "application/octet-stream"}))
    assert r.status_code == 400 and r.json()["error"] in ("invalid_artifact", "invalid_request")
    assert c.post(f"{g}/artifacts", content=b"\x7fELF" + b"\0" * 70_000, headers=auth(t["akey"], **{
        "Content-Type": "application/octet-stream"})).status_code == 413
    # create: 404 for a session of nobody, 400 for a bad config
    r = c.post(f"{g}/loops", headers=auth(t["akey"]), json={"agent_id": t["agent"], "session_id": "ses_nope",
                                                             "artifact": view["artifact"]})
    assert r.status_code == 404 and r.json()["error"] == "session_not_found", r.text
    r = c.post(f"{g}/loops", headers=auth(t["akey"]), json={"agent_id": t["agent"], "session_id": t["session"],
                                                             "artifact": view["artifact"], "config": [1]})
    assert r.status_code == 400
    # list with filters; another agent's key sees nothing of it
    assert [v["id"] for v in c.get(f"{g}/loops", params={"state": "active"}, headers=auth(t["akey"])).json()[
        "items"]] == [loop_id]
    assert c.get(f"{g}/loops", params={"state": "paused"}, headers=auth(t["akey"])).json()["items"] == []
    assert c.get(f"{g}/loops", params={"state": "bogus"}, headers=auth(t["akey"])).status_code == 400
    # events: hold two, list, discard one, retry the other, then pause/resume/transitions/logs
    for event_id in ("h1", "h2"):
        c.post(f"{g}/loops/{loop_id}/events", headers=auth(t["gkey"]), json={"topic": "hold", "event_id": event_id,
                                                                             "payload": {"k": event_id}})
    listed = c.get(f"{g}/loops/{loop_id}/events", params={"payloads": "true"}, headers=auth(t["akey"])).json()
    assert [e["event_id"] for e in listed["items"]] == ["h1", "h2"] and listed["items"][0]["payload"] == {"k": "h1"}
    detail = c.get(f"{g}/loops/{loop_id}", params={"include": "pending,logs,checkpoint"},
                   headers=auth(t["akey"])).json()
    assert [e["event_id"] for e in detail["pending"]] == ["h1", "h2"] and "logs" in detail
    assert c.get(f"{g}/loops/{loop_id}", params={"include": "secrets"}, headers=auth(t["akey"])).status_code == 400
    out = c.post(f"{g}/loops/{loop_id}/pending/discard", headers=auth(t["akey"]), json={"event_ids": ["h1"]}).json()
    assert out["discarded"] in (1, ["h1"])
    out = c.post(f"{g}/loops/{loop_id}/pending/retry", headers=auth(t["akey"]), json={"event_ids": ["h2"]}).json()
    assert "retried" in out
    assert c.post(f"{g}/loops/{loop_id}/pause", headers=auth(t["akey"])).json()["state"] == "paused"
    assert c.post(f"{g}/loops/{loop_id}/pause", headers=auth(t["akey"])).json()["state"] == "paused"
    assert c.post(f"{g}/loops/{loop_id}/resume", headers=auth(t["akey"])).json()["state"] == "active"
    r = c.post(f"{g}/loops/{loop_id}/resume", headers=auth(t["akey"]))
    assert r.status_code == 409 and r.json()["error"] == "already_active"
    moves = c.get(f"{g}/loops/{loop_id}/transitions", headers=auth(t["akey"])).json()["items"]
    assert {m["to_state"] for m in moves} >= {"active", "paused"}
    assert c.post(f"{g}/loops/{loop_id}/webhook", headers=auth(t["akey"]), json={"action": "enable"}).json()["enabled"]
    logs = c.get(f"{g}/loops/{loop_id}/logs", headers=auth(t["akey"])).json()
    assert any(line["text"] == f"agent:{t['agent']}: webhook enabled" for line in logs["items"]), logs
    later = c.get(f"{g}/loops/{loop_id}/logs", params={"after_seq": logs["next_after_seq"]}, headers=auth(t["akey"]))
    assert later.json()["items"] == []
    # archive pauses, unarchive resumes (group key only)
    assert c.post(f"{g}/agents/{t['agent']}/archive", headers=auth(t["akey"])).status_code == 403
    arch = c.post(f"{g}/agents/{t['agent']}/archive", headers=auth(t["gkey"])).json()
    assert arch["agent"]["status"] == "archived" and arch["paused_loops"] == [loop_id]
    r = c.post(f"{g}/loops/{loop_id}/resume", headers=auth(t["akey"]))
    assert r.status_code == 409 and r.json()["error"] == "agent_archived"
    un = c.post(f"{g}/agents/{t['agent']}/unarchive", headers=auth(t["gkey"])).json()
    assert un["resumed"] == [loop_id] and un["quota_paused"] == []
    # delete: 204, then 404 everywhere
    assert c.delete(f"{g}/loops/{loop_id}", headers=auth(t["akey"])).status_code == 204
    assert c.get(f"{g}/loops/{loop_id}", headers=auth(t["akey"])).status_code == 404
    assert c.delete(f"{g}/loops/{loop_id}", headers=auth(t["akey"])).status_code == 404


def test_build_route(live: LiveApi) -> None:
    t = live.call(tenant)
    c, g = live.client, f"{live.url}/v1/agent-groups/{t['group']}"
    src = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return 0; }\n"
    started = time.monotonic()
    ok = c.post(f"{g}/builds", headers=auth(t["akey"]), json={"source": src, "path": "/loops/x.elf"})
    assert ok.status_code == 200, ok.text
    body = ok.json()
    assert body["state"] == "succeeded" and body["artifact"].startswith("sha256:") and body["elf_bytes"] > 0
    assert body["path"] == "/loops/x.elf" and body["report"] is not None and time.monotonic() - started < 120
    sha = body["artifact"].removeprefix("sha256:")
    table = live.call(lambda h: _stored_table(h, t["group"], sha))  # issue 18: the line table beside the artifact
    assert table is not None and table.elf_sha256 == sha
    bad = c.post(f"{g}/builds", headers=auth(t["akey"]), json={"source": "int main( {"}).json()
    assert bad["state"] == "failed" and bad["kind"] == "build_failed" and bad["diagnostics"]
    r = c.post(f"{g}/builds", headers=auth(t["gkey"]), json={"source": src})
    assert r.status_code == 400 and r.json()["field"] == "agent_id"  # a person names the agent
    r = c.post(f"{g}/builds", headers=auth(t["akey"]), json={"files": {"../x.c": "int x;"}, "entry": "../x.c"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_bundle"


async def _stored_table(h: Any, group_id: str, sha256: str) -> Any:
    from wakeful.harness.source_lines import stored_table

    async with h.store.tx(readonly=True) as tx:
        return await stored_table(tx, group_id, sha256)


def test_public_base_url_prefixes_webhook_urls(tmp_path: Path, compile_c: Any) -> None:
    with LiveApi(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data", public_base_url="https://hooks.example/") as live:
        t = live.call(tenant)
        loop_id = make_loop(live, t, compile_c)
        hook = live.client.post(f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/webhook",
                                headers=auth(t["akey"]), json={"action": "enable"}).json()
        assert hook["url"].startswith("https://hooks.example/v1/loop-webhooks/") and len(hook["url"].rsplit("/", 1)[1]) == 43
        path = hook["url"][len("https://hooks.example"):]
        assert live.client.post(live.url + path, json={"ok": True}).status_code == 202


def test_nul_characters_are_refused_not_500(live: LiveApi, compile_c: Any) -> None:
    """U+0000 is valid JSON and UTF-8 but PostgreSQL text cannot hold it: a 400 (or 404 in a path), never a 5xx."""
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    c, g = live.client, f"{live.url}/v1/agent-groups/{t['group']}"
    a = auth(t["admin"])
    refused = [
        ("POST", f"{live.url}/v1/groups", {"name": "a\u0000b"}, "name"),
        ("POST", f"{g}/agents", {"name": "a\u0000b"}, "name"),
        ("POST", f"{g}/agents/{t['agent']}/sessions", {"title": "t\u0000"}, "title"),
        ("POST", f"{live.url}/v1/groups/{t['group']}/keys", {"role": "group", "label": "l\u0000"}, "label"),
        ("POST", f"{g}/loops/{loop_id}/events", {"topic": "t\u0000", "event_id": "e1"}, "topic"),
        ("POST", f"{g}/loops", {"agent_id": t["agent"], "session_id": t["session"],
                                "artifact": "/loops/counter.elf", "name": "n\u0000"}, "name"),
        ("POST", f"{g}/loops/{loop_id}/pending/discard", {"event_ids": ["a\u0000"]}, "event_ids"),
        ("POST", f"{g}/sessions/{t['session']}/messages/handled", {"message_ids": ["a\u0000"]}, "message_ids"),
    ]
    for method, url, body, field in refused:
        r = c.request(method, url, json=body, headers=a)
        assert r.status_code == 400 and r.json()["field"] == field, (url, r.text)
    for path in (f"{g}/loops/lp_%00", f"{g}/agents/agt_%00", f"{live.url}/v1/agent-groups/grp_%00/loops",
                 f"{g}/loops/lp_%00/events"):
        assert c.get(path, headers=a).status_code == 404
    assert c.post(f"{g}/loops/lp_%00/events", headers=a, json={"topic": "t"}).status_code == 404
    r = c.get(f"{g}/loops", params={"agent_id": "a\u0000"}, headers=a)
    assert r.status_code == 400 and r.json()["field"] == "query"
    # inside JSON values (payload, metadata) U+0000 is kept as an escape: accepted
    assert c.post(f"{g}/loops/{loop_id}/events", headers=a, json={"topic": "t", "payload": {"a\u0000": "\u0000"}}
                  ).status_code == 202
    assert c.post(f"{g}/agents", headers=a, json={"name": "ok", "metadata": {"k": "v\u0000"}}).status_code == 201
