"""The two intake routes against a real uvicorn server (SQLite and PostgreSQL): every status code of
harness.md §10.5, the check order of §10.3/§10.4, bounded reads, and that refusals write nothing."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_api import LiveApi, auth, count_events, make_loop, seen, tenant, wait_for
from support.harness_fixtures import TestClock

from wakeful.harness.config import Limits
from wakeful.harness.store import events, groups

pytestmark = pytest.mark.integration
@pytest.fixture
def live(store_url: str, tmp_path: Path) -> Iterator[LiveApi]:
    with LiveApi(store_url, tmp_path / "data") as api:
        yield api


def test_group_route_status_codes(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    url = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
    c = live.client
    # 202, then the same id again: duplicate, the stored payload kept, a different payload flagged
    ok = c.post(url, headers=auth(t["gkey"]), json={"event_id": "e1", "topic": "t", "payload": {"a": 1}})
    assert ok.status_code == 202 and ok.json() == {"status": "accepted", "event_id": "e1", "duplicate": False}
    assert ok.headers["x-request-id"]
    dup = c.post(url, headers=auth(t["akey"]), json={"event_id": "e1", "topic": "t", "payload": {"a": 2}})
    assert dup.status_code == 202 and dup.json()["duplicate"] is True and dup.json()["payload_mismatch"] is True
    # payload-hash default id, Idempotency-Key over the hash
    h1 = c.post(url, headers=auth(t["gkey"]), json={"topic": "t", "payload": {"x": 1}}).json()
    assert h1["event_id"].startswith("sha256:")
    k1 = c.post(url, headers=auth(t["gkey"], **{"Idempotency-Key": "order-7"}), json={"topic": "t"}).json()
    assert k1["event_id"] == "order-7"
    before = count_events(live, loop_id)
    # 401: missing, malformed, unknown key
    for headers in ({}, {"Authorization": "Bearer nope"}, auth("wk_key_aaaaaaaaaaaa_" + "A" * 43)):
        r = c.post(url, headers=headers, json={"topic": "t"})
        assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
    # 404: Loop unknown, other group, scope mismatch
    other = live.call(tenant)
    assert c.post(f"{live.url}/v1/agent-groups/{t['group']}/loops/lp_nope/events", headers=auth(t["gkey"]),
                  json={"topic": "t"}).status_code == 404
    r = c.post(url, headers=auth(other["gkey"]), json={"topic": "t"})
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = c.post(f"{live.url}/v1/agent-groups/{other['group']}/loops/{loop_id}/events", headers=auth(other["gkey"]),
               json={"topic": "t"})
    assert r.status_code == 404
    # an agent key of another agent in the same group: the Loop is outside its scope
    second = live.call(lambda h: h.create_agent(t["group"], "a2"))
    _, second_key = live.call(lambda h: h.create_key("agent", group_id=t["group"], agent_id=second.id))
    r = c.post(url, headers=auth(second_key), json={"topic": "t"})
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    # 415 before parsing, 400 invalid_json, 400 invalid_event with field
    r = c.post(url, headers=auth(t["gkey"], **{"Content-Type": "text/plain"}), content=b'{"topic":"t"}')
    assert r.status_code == 415 and r.json()["error"] == "json_required"
    r = c.post(url, headers=auth(t["gkey"], **{"Content-Type": "Application/JSON; charset=utf-8"}),
               content=b'{"topic":"ok-type"}')
    assert r.status_code == 202
    before += 1
    for body in (b"{", b"[1]", b'"x"', b"\xff"):
        r = c.post(url, headers=auth(t["gkey"], **{"Content-Type": "application/json"}), content=body)
        assert r.status_code == 400 and r.json()["error"] == "invalid_json", (body, r.text)
    for body, field in (({}, "topic"), ({"topic": ""}, "topic"), ({"topic": "t", "event_id": "a b"}, "event_id"),
                        ({"topic": "t", "event_id": "x" * 129}, "event_id"), ({"topic": "t", "bogus": 1}, "bogus")):
        r = c.post(url, headers=auth(t["gkey"]), json=body)
        assert r.status_code == 400 and r.json()["error"] == "invalid_event" and r.json()["field"] == field, r.text
    r = c.post(url, headers=[("Authorization", f"Bearer {t['gkey']}"), ("Idempotency-Key", "a"),
                             ("Idempotency-Key", "b")], json={"topic": "t"})
    assert r.status_code == 400 and r.json()["field"] == "idempotency_key"
    # 400 for strict-JSON violations in the payload (harness.md §21 "bad payloads")
    for raw in (b'{"topic":"t","payload":{"a":1,"a":2}}', b'{"topic":"t","payload":NaN}',
                b'{"topic":"t","payload":"\\ud800"}', b'{"topic":"t","payload":18446744073709551616}',
                b'{"topic":"t","payload":' + b"[" * 33 + b"1" + b"]" * 33 + b"}",
                b'{"topic":"t","payload":"\xff"}'):
        r = c.post(url, headers=auth(t["gkey"], **{"Content-Type": "application/json"}), content=raw)
        assert r.status_code == 400 and r.json()["error"] == "invalid_event" and r.json()["field"] == "payload", raw
    deep = b'{"topic":"t","payload":' + b"[" * 60_000
    r = c.post(url, headers=auth(t["gkey"], **{"Content-Type": "application/json"}), content=deep)
    assert r.status_code == 400 and r.json()["error"] == "invalid_json"
    # 413: the envelope over 16,384 bytes, and a raw body over 64 KiB
    r = c.post(url, headers=auth(t["gkey"]), json={"topic": "t", "payload": "x" * 16_400})
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    r = c.post(url, headers=auth(t["gkey"], **{"Content-Type": "application/json"}), content=b" " * 65_537)
    assert r.status_code == 413
    assert count_events(live, loop_id) == before  # no refusal wrote anything
    # 409 on a paused Loop, with state and pause_reason
    assert c.post(f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/pause",
                  headers=auth(t["akey"])).status_code == 200
    r = c.post(url, headers=auth(t["gkey"]), json={"topic": "t", "event_id": "late"})
    assert r.status_code == 409 and r.json() | {"message": ""} == {
        "error": "loop_not_active", "message": "", "state": "paused", "pause_reason": "manual"}
    assert count_events(live, loop_id) == before


def test_a_revoked_key_is_refused_by_the_intake_at_once(live: LiveApi, compile_c: Any) -> None:
    """The key cache serves the intake's authentication (issue 16: no store read per request), and a revocation on
    this node still takes effect on the very next request; the agent key of the same group keeps working."""
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    url = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
    c = live.client
    for n in range(3):  # the key is cached after the first request
        assert c.post(url, headers=auth(t["gkey"]), json={"topic": "t", "event_id": f"r{n}"}).status_code == 202
    before = count_events(live, loop_id)
    parts = groups.split_key_text(t["gkey"])
    assert parts is not None
    gone = c.delete(f"{live.url}/v1/groups/{t['group']}/keys/{parts[0]}", headers=auth(t["admin"]))
    assert gone.status_code == 204, gone.text
    r = c.post(url, headers=auth(t["gkey"]), json={"topic": "t", "event_id": "after"})
    assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
    assert c.post(url, headers=auth(t["akey"]), json={"topic": "t", "event_id": "agent"}).status_code == 202
    assert count_events(live, loop_id) == before + 1  # the refused event was not stored


def test_body_over_64k_refused_without_reading(live: LiveApi, compile_c: Any) -> None:
    """Content-Length over the bound: 413 is answered while the client has sent only the headers."""
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    path = f"/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
    for length in (65_537, 50_000_000):
        with socket.create_connection(("127.0.0.1", live.port), timeout=10) as s:
            s.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t['gkey']}\r\n"
                       f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode() + b"{")
            answer = read_response(s)
        assert answer.startswith("HTTP/1.1 413"), answer
        assert "payload_too_large" in answer
    # a chunked body with no Content-Length stops at the bound too
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as s:
        s.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t['gkey']}\r\n"
                   f"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode())
        chunk = b" " * 32_768
        for _ in range(3):  # 96 KiB, never the terminating chunk
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        answer = read_response(s)
    assert answer.startswith("HTTP/1.1 413"), answer


def read_response(s: socket.socket) -> str:
    """One HTTP response (headers and a Content-Length body) read from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = s.recv(65536)
        if not part:
            break
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        part = s.recv(65536)
        if not part:
            break
        body += part
    return (head + b"\r\n\r\n" + body).decode()


def test_webhook_route(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    g = f"{live.url}/v1/agent-groups/{t['group']}"
    c = live.client
    hook = c.post(f"{g}/loops/{loop_id}/webhook", headers=auth(t["akey"]), json={"action": "enable"}).json()
    assert hook["enabled"] is True and hook["url"].startswith("/v1/loop-webhooks/")
    again = c.post(f"{g}/loops/{loop_id}/webhook", headers=auth(t["akey"]), json={"action": "enable"}).json()
    assert again["url"] is None and again["hint"] == hook["hint"]
    url = live.url + hook["url"]
    r = c.post(url, json={"n": 1})
    assert r.status_code == 202 and r.headers["cache-control"] == "no-store"
    assert c.post(url, json={"n": 1}).json()["duplicate"] is True  # the payload hash is the id
    assert c.post(url, json={"n": 1}, headers={"Webhook-Id": "d-1"}).json()["event_id"] == "d-1"
    assert c.post(url, json={"n": 1}, headers={"X-GitHub-Delivery": "gh-1"}).json()["event_id"] == "gh-1"
    assert c.post(url, json={"n": 1}, headers={"Idempotency-Key": "ik", "Webhook-Id": "d-2"}).json()[
        "event_id"] == "ik"
    before = count_events(live, loop_id)
    # 16 KiB exactly passes the raw bound; 16 KiB + 1 byte is 413 before parsing
    body = b'{"n": 7}' + b" " * (16_384 - 8)
    assert len(body) == 16_384
    r = c.post(url, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 202, r.text
    before += 1
    r = c.post(url, content=body + b" ", headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["limit"] == 16_384 and r.headers["cache-control"] == "no-store"
    big = json.dumps({"p": "x" * 16_360}).encode()  # under the raw bound, over the 16,384-byte envelope
    r = c.post(url, content=big, headers={"Content-Type": "application/json"})
    assert len(big) <= 16_384 and r.status_code == 413 and r.json()["bytes"] > 16_384
    r = c.post(url, content=b'{"a":1}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and r.headers["cache-control"] == "no-store"
    for raw in (b"[1]", b"nope", b"1"):
        r = c.post(url, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["error"] == "json_object_required"
    r = c.post(url, json={"n": 2}, headers={"Idempotency-Key": "a\x7fb"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_event"
    # forged secrets: right shape, wrong shape; nothing is written
    for secret in ("A" * 43, "short", "A" * 44, "A" * 42 + "!"):
        r = c.post(f"{live.url}/v1/loop-webhooks/{secret}", json={"n": 3})
        assert r.status_code == 404 and r.json()["error"] == "not_found" and r.headers["cache-control"] == "no-store"
    # §10.4 order: an unknown secret is 404 before the body bound is looked at (never read)
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as s:
        s.sendall((f"POST /v1/loop-webhooks/{'B' * 43} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: 50000000\r\n\r\n").encode())
        answer = read_response(s)
    assert answer.startswith("HTTP/1.1 404") and "no-store" in answer
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as s:  # a live secret: 413 unread
        s.sendall((f"POST {hook['url']} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: 50000000\r\n\r\n").encode())
        answer = read_response(s)
    assert answer.startswith("HTTP/1.1 413") and "no-store" in answer
    assert count_events(live, loop_id) == before
    # rotate: the old URL stops at once; revoke: the new one too
    rotated = c.post(f"{g}/loops/{loop_id}/webhook", headers=auth(t["akey"]), json={"action": "rotate"}).json()
    # paused and archived Loops keep their secret and answer 409 with state and reason
    c.post(f"{g}/loops/{loop_id}/pause", headers=auth(t["akey"]))
    r = c.post(live.url + rotated["url"], json={"n": 9})
    assert r.status_code == 409 and r.json()["pause_reason"] == "manual" and r.headers["cache-control"] == "no-store"
    c.post(f"{g}/loops/{loop_id}/resume", headers=auth(t["akey"]))
    c.post(f"{g}/agents/{t['agent']}/archive", headers=auth(t["gkey"]))
    r = c.post(live.url + rotated["url"], json={"n": 9})
    assert r.status_code == 409 and r.json()["pause_reason"] == "archive"
    c.post(f"{g}/agents/{t['agent']}/unarchive", headers=auth(t["gkey"]))
    assert c.post(url, json={"n": 4}).status_code == 404
    new_url = live.url + rotated["url"]
    assert c.post(new_url, json={"n": 5}).status_code == 202
    assert c.post(f"{g}/loops/{loop_id}/webhook", headers=auth(t["akey"]),
                  json={"action": "revoke"}).json() == {"loop_id": loop_id, "enabled": False}
    after = count_events(live, loop_id)
    assert c.post(new_url, json={"n": 6}).status_code == 404
    assert count_events(live, loop_id) == after == before + 1


def test_rate_limits_and_mailbox(store_url: str, tmp_path: Path, compile_c: Any) -> None:
    limits = Limits(pending_events=3, ingress_per_loop_per_min=8, ingress_global_per_min=12)
    clock = TestClock()  # buckets refill on this clock only: no refill while the test runs, however slow
    with LiveApi(store_url, tmp_path / "data", limits=limits, clock=clock) as live:
        t = live.call(tenant)
        loop_id = make_loop(live, t, compile_c)
        url = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
        c = live.client
        codes = []
        for i in range(5):  # "hold" events are never acked: the fourth finds the mailbox full
            r = c.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": f"h{i}"})
            codes.append(r.status_code)
            if r.status_code == 429:
                assert r.json()["error"] == "mailbox_full" and r.headers["retry-after"] == "5"
        assert codes == [202, 202, 202, 429, 429]
        # the per-Loop bucket (8) is spent after 3 more, duplicates count
        codes = [c.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "h0"}).status_code
                 for _ in range(4)]
        assert codes == [202, 202, 202, 429]
        r = c.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "h0"})
        assert r.json()["error"] == "rate_limited" and int(r.headers["retry-after"]) >= 1
        # the global bucket (12) is checked before the Loop lookup: an unknown Loop gets 429 once it is spent
        other = f"{live.url}/v1/agent-groups/{t['group']}/loops/lp_unknown/events"
        codes = [c.post(other, headers=auth(t["gkey"]), json={"topic": "x"}).status_code for _ in range(4)]
        assert codes[-1] == 429 and set(codes) <= {404, 429}
        r = c.post(f"{live.url}/v1/loop-webhooks/{'A' * 43}", json={})
        assert r.status_code == 429 and r.json()["error"] == "rate_limited" and r.headers["retry-after"]
        # §10.3 order: authentication and scope come before the global bucket
        assert c.post(other, json={"topic": "x"}).status_code == 401
        foreign = live.call(tenant)
        assert c.post(url, headers=auth(foreign["gkey"]), json={"topic": "x"}).status_code == 404
        r = c.post(f"{live.url}/v1/loop-webhooks/short", json={})  # no shape check before the bucket either
        assert r.status_code == 429
        clock.advance(s=60)  # a minute later both buckets are full again
        r = c.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "h0"})
        assert r.status_code == 202 and r.json()["duplicate"] is True
        assert count_events(live, loop_id) == 3
        recent = c.get(f"{live.url}/v1/info", headers=auth(t["admin"])).json()["recent_refusals"]
        assert recent["429"] >= 7 and recent["window_s"] == 3600  # every 429 answered above


def test_order_of_delivery_across_restart(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    url = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
    ids = [f"o{i:02d}" for i in range(12)]
    for i, event_id in enumerate(ids):
        topic = "hold" if i in (3, 7) else "go"
        assert live.client.post(url, headers=auth(t["gkey"]), json={"topic": topic, "event_id": event_id}).status_code == 202
    wait_for(lambda: len(seen(live, loop_id)) >= len(ids))
    assert seen(live, loop_id) == ids
    live.restart()  # the two held events come back, in admission order, after the first incarnation's list
    wait_for(lambda: len(seen(live, loop_id)) >= len(ids) + 2)
    assert seen(live, loop_id) == ids + ["o03", "o07"]
    pending = live.call(lambda h: _pending_ids(h, loop_id))
    assert pending == ["o03", "o07"]


async def _pending_ids(h: Any, loop_id: str) -> list[str]:
    async with h.store.tx(readonly=True) as tx:
        return [e.event_id for e in await events.pending_events(tx, loop_id)]


def test_group_backlog_and_quota(store_url: str, tmp_path: Path, compile_c: Any) -> None:
    limits = Limits(group_backlog_bytes=400, loops_per_agent=1)
    with LiveApi(store_url, tmp_path / "data", limits=limits) as live:
        t = live.call(tenant)
        loop_id = make_loop(live, t, compile_c)
        url = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
        c = live.client
        r = c.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "b1", "payload": "x" * 200})
        assert r.status_code == 202
        r = c.post(url, headers=auth(t["gkey"]), json={"topic": "hold", "event_id": "b2", "payload": "x" * 200})
        assert r.status_code == 429 and r.json()["error"] == "group_backlog_full" and r.headers["retry-after"] == "30"
        assert count_events(live, loop_id) == 1
        # a second active Loop for the agent is over its quota: 409 with scope and limit, nothing created
        view = c.get(f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}", headers=auth(t["akey"])).json()
        r = c.post(f"{live.url}/v1/agent-groups/{t['group']}/loops", headers=auth(t["akey"]), json={
            "agent_id": t["agent"], "session_id": t["session"], "artifact": view["artifact"]})
        assert r.status_code == 409 and r.json() | {"message": ""} == {
            "error": "quota_exceeded", "message": "", "scope": "agent", "limit": 1}
        assert len(c.get(f"{live.url}/v1/agent-groups/{t['group']}/loops", headers=auth(t["akey"])).json()["items"]) == 1


def test_concurrent_posts_keep_admission_order(live: LiveApi, compile_c: Any) -> None:
    """30 concurrent senders: every 202 is stored once, and the Loop pops them in admission order."""
    from concurrent.futures import ThreadPoolExecutor

    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    url = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events"

    def post(i: int) -> int:
        with httpx.Client(timeout=30) as client:
            return client.post(url, headers=auth(t["gkey"]), json={"topic": "go", "event_id": f"c{i:02d}"}).status_code

    with ThreadPoolExecutor(max_workers=10) as pool:
        assert set(pool.map(post, range(30))) == {202}
    listed = live.client.get(f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}/events",
                             params={"limit": 200}, headers=auth(t["akey"])).json()["items"]
    admitted = [e["event_id"] for e in listed]  # (received_ms, event_id) order: admission order
    assert sorted(admitted) == [f"c{i:02d}" for i in range(30)]
    wait_for(lambda: len(seen(live, loop_id)) >= 30)
    assert seen(live, loop_id) == admitted
