"""Webhook verifiers (issue 19) against a real uvicorn server on loopback, SQLite and PostgreSQL: requests signed
the way each provider documents it (the signing below is written from the providers' documentation, not from
wakeful's code), then forged, stale and replayed ones; a refusal is 401 and writes nothing.

The store clock is a ``TestClock``: "stale" means the clock moved past the tolerance, never a wait.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_api import LiveApi, auth, count_events, make_loop, tenant
from support.harness_fixtures import TestClock

pytestmark = pytest.mark.integration

GH_SECRET = "It's a Secret to Everybody, 2026"
STRIPE_SECRET = "whsec_" + "5WbX5kEWLlfzsGNjH64I8lOOqUB6e8FH"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
STD_KEY = bytes(range(1, 33))
STD_SECRET = "whsec_" + base64.b64encode(STD_KEY).decode()


# ---------------------------------------------------------------------- signing, from each provider's docs


def github_headers(secret: str, body: bytes, delivery: str, event: str) -> dict[str, str]:
    """GitHub: X-Hub-Signature-256 = "sha256=" + HMAC hex digest of the payload with the secret (SHA-256)."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": "sha256=" + digest, "X-GitHub-Delivery": delivery, "X-GitHub-Event": event,
            "Content-Type": "application/json"}


def stripe_headers(secret: str, body: bytes, t: int, *, extra_v1: str | None = None) -> dict[str, str]:
    """Stripe: signed_payload = "<t>.<payload>"; v1 = HMAC-SHA256 hex with the endpoint secret as the key."""
    v1 = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    header = f"t={t},v1={v1}" if extra_v1 is None else f"t={t},v1={extra_v1},v1={v1},v0=deadbeef"
    return {"Stripe-Signature": header, "Content-Type": "application/json"}


def slack_headers(secret: str, body: bytes, ts: int) -> dict[str, str]:
    """Slack: basestring "v0:<timestamp>:<body>", X-Slack-Signature "v0=" + HMAC-SHA256 hex (signing secret)."""
    sig = hmac.new(secret.encode(), b"v0:" + str(ts).encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Signature": "v0=" + sig, "X-Slack-Request-Timestamp": str(ts),
            "Content-Type": "application/json"}


def standard_headers(key: bytes, body: bytes, msg_id: str, ts: int) -> dict[str, str]:
    """Standard Webhooks: content "<id>.<timestamp>.<body>", signature "v1," + base64(HMAC-SHA256), the key being
    the base64-decoded part of the whsec_ secret; several signatures are space-separated."""
    sig = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": f"v1,bm9wZQ== v1,{sig}",
            "Content-Type": "application/json"}


# ---------------------------------------------------------------------- helpers


@pytest.fixture
def clock() -> TestClock:
    return TestClock(unix_ms=int(time.time()) * 1000)


@pytest.fixture
def live(store_url: str, tmp_path: Path, clock: TestClock) -> Iterator[LiveApi]:
    with LiveApi(store_url, tmp_path / "data", clock=clock) as api:
        yield api


class Hook:
    """A Loop with its webhook enabled and a verifier set over HTTP (the agent key)."""

    def __init__(self, live: LiveApi, compile_c: Any, verifier: dict[str, Any]) -> None:
        self.live, self.t = live, live.call(tenant)
        self.loop_id = make_loop(live, self.t, compile_c)
        self.base = f"{live.url}/v1/agent-groups/{self.t['group']}/loops/{self.loop_id}"
        made = live.client.post(f"{self.base}/webhook", headers=auth(self.t["akey"]), json={"action": "enable"})
        assert made.status_code == 200, made.text
        self.url = live.url + made.json()["url"]
        answer = live.client.put(f"{self.base}/webhook/verifier", headers=auth(self.t["akey"]), json=verifier)
        assert answer.status_code == 200, answer.text
        self.shown = answer.json()
        assert verifier["secret"] not in answer.text

    def post(self, body: bytes, headers: dict[str, Any]) -> Any:
        return self.live.client.post(self.url, content=body, headers=headers)

    def events(self) -> list[dict[str, Any]]:
        r = self.live.client.get(f"{self.base}/events", headers=auth(self.t["akey"]), params={"payloads": "true"})
        assert r.status_code == 200, r.text
        return list(r.json()["items"])

    def count(self) -> int:
        return count_events(self.live, self.loop_id)


def refused(r: Any) -> None:
    assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
    assert r.headers["cache-control"] == "no-store"


def accepted(r: Any, event_id: str, *, duplicate: bool = False) -> None:
    assert r.status_code == 202, r.text
    assert r.json()["event_id"] == event_id and r.json()["duplicate"] is duplicate, r.text


# ---------------------------------------------------------------------- per provider


def test_github_signed_forged_and_redelivered(live: LiveApi, compile_c: Any) -> None:
    hook = Hook(live, compile_c, {"scheme": "github", "secret": GH_SECRET})
    assert hook.shown["verifier"]["scheme"] == "github" and len(hook.shown["verifier"]["secret_fingerprint"]) == 8
    body = json.dumps({"action": "opened", "number": 7, "repository": {"full_name": "o/r"}}).encode()
    delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    accepted(hook.post(body, github_headers(GH_SECRET, body, delivery, "pull_request")), delivery)
    # GitHub's redelivery repeats the delivery id: deduplicated, whatever its other headers
    accepted(hook.post(body, github_headers(GH_SECRET, body, delivery, "pull_request")), delivery, duplicate=True)
    [event] = hook.events()
    assert (event["topic"], event["payload"]["number"], event["source"]) == ("pull_request", 7, "webhook")
    # forged: wrong secret, tampered body, signature missing, sent twice, the unsigned SHA-1 header only
    before = hook.count()
    refused(hook.post(body, github_headers("not the secret at all", body, "d2", "push")))
    tampered = body.replace(b"7", b"8")
    refused(hook.post(tampered, github_headers(GH_SECRET, body, "d3", "push")))
    refused(hook.post(body, {"Content-Type": "application/json", "X-GitHub-Delivery": "d4"}))
    headers = github_headers(GH_SECRET, body, "d5", "push")
    twice = [*headers.items(), ("X-Hub-Signature-256", headers["X-Hub-Signature-256"])]
    refused(live.client.post(hook.url, content=body, headers=twice))
    sha1 = hmac.new(GH_SECRET.encode(), body, hashlib.sha1).hexdigest()
    refused(hook.post(body, {"Content-Type": "application/json", "X-Hub-Signature": "sha1=" + sha1}))
    assert hook.count() == before  # nothing stored by any refusal
    # the verifier is shown without its secret, and cleared: unsigned JSON is taken again (harness.md §10.4)
    shown = live.client.get(f"{hook.base}/webhook/verifier", headers=auth(hook.t["akey"]))
    assert shown.status_code == 200 and GH_SECRET not in shown.text and shown.json()["verifier"]["scheme"] == "github"
    assert live.client.delete(f"{hook.base}/webhook/verifier", headers=auth(hook.t["akey"])).status_code == 204
    assert live.client.get(f"{hook.base}/webhook/verifier", headers=auth(hook.t["akey"])).json()["verifier"] is None
    plain = hook.post(b'{"x": 1}', {"Content-Type": "application/json"})
    assert plain.status_code == 202 and plain.json()["event_id"].startswith("sha256:")


def test_stripe_tolerance_and_replay(live: LiveApi, compile_c: Any, clock: TestClock) -> None:
    hook = Hook(live, compile_c, {"scheme": "stripe", "secret": STRIPE_SECRET})
    assert hook.shown["verifier"]["tolerance_s"] == 300
    body = json.dumps({"id": "evt_1NG8Du2eZvKYlo2CUI79vXWy", "object": "event",
                       "type": "payment_intent.succeeded", "data": {"object": {"id": "pi_1", "amount": 2000}}}).encode()
    now = clock.unix_ms() // 1000
    signed = stripe_headers(STRIPE_SECRET, body, now, extra_v1="0" * 64)  # one v1 of a rolled secret, one good
    accepted(hook.post(body, signed), "evt_1NG8Du2eZvKYlo2CUI79vXWy")
    [event] = hook.events()
    assert event["topic"] == "payment_intent.succeeded" and event["payload"]["data"]["object"]["amount"] == 2000
    # replayed within the tolerance: the same event id, deduplicated
    accepted(hook.post(body, signed), "evt_1NG8Du2eZvKYlo2CUI79vXWy", duplicate=True)
    before = hook.count()
    # stale: a timestamp 301 s old or ahead, correctly signed for it
    refused(hook.post(body, stripe_headers(STRIPE_SECRET, body, now - 301)))
    refused(hook.post(body, stripe_headers(STRIPE_SECRET, body, now + 301)))
    # forged: another secret; a good signature moved onto another timestamp; no t=; garbage
    refused(hook.post(body, stripe_headers("whsec_someoneelse000000000000000", body, now)))
    v1 = signed["Stripe-Signature"].split(",v1=")[-1].split(",")[0]
    refused(hook.post(body, {"Stripe-Signature": f"t={now + 1},v1={v1}", "Content-Type": "application/json"}))
    refused(hook.post(body, {"Stripe-Signature": f"v1={v1}", "Content-Type": "application/json"}))
    refused(hook.post(body, {"Stripe-Signature": b"t=x,v1=\xe9", "Content-Type": "application/json"}))
    other = body.replace(b"evt_1NG8", b"evt_2NG8")
    refused(hook.post(other, signed))
    # the captured request replayed after the tolerance has passed on the store clock
    clock.advance(s=301)
    refused(hook.post(body, signed))
    assert hook.count() == before


def test_slack_challenge_events_retries_and_stale(live: LiveApi, compile_c: Any, clock: TestClock) -> None:
    hook = Hook(live, compile_c, {"scheme": "slack", "secret": SLACK_SECRET})
    now = clock.unix_ms() // 1000
    challenge = json.dumps({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "type": "url_verification",
                            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}).encode()
    r = hook.post(challenge, slack_headers(SLACK_SECRET, challenge, now))
    assert r.status_code == 200 and r.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    refused(hook.post(challenge, slack_headers("0" * 32, challenge, now)))  # an unsigned challenge is not answered
    assert hook.count() == 0
    body = json.dumps({"type": "event_callback", "event_id": "Ev0PV52K21", "team_id": "T1",
                       "event": {"type": "app_mention", "text": "<@U1> deploy", "ts": "1.2"}}).encode()
    accepted(hook.post(body, slack_headers(SLACK_SECRET, body, now)), "Ev0PV52K21")
    # Slack's retry: signed anew with a later timestamp, the same event_id, X-Slack-Retry-Num
    clock.advance(s=60)
    retry = {**slack_headers(SLACK_SECRET, body, now + 60), "X-Slack-Retry-Num": "1",
             "X-Slack-Retry-Reason": "http_timeout"}
    accepted(hook.post(body, retry), "Ev0PV52K21", duplicate=True)
    [event] = hook.events()
    assert event["topic"] == "app_mention" and event["payload"]["event"]["text"] == "<@U1> deploy"
    # stale: a timestamp over five minutes old; the first request replayed once five minutes have passed
    refused(hook.post(body, slack_headers(SLACK_SECRET, body, now - 301)))
    clock.advance(s=250)
    refused(hook.post(body, slack_headers(SLACK_SECRET, body, now)))
    refused(hook.post(body, {**slack_headers(SLACK_SECRET, body, now + 310), "X-Slack-Request-Timestamp": "soon"}))
    assert hook.count() == 1


def test_standard_webhooks(live: LiveApi, compile_c: Any, clock: TestClock) -> None:
    hook = Hook(live, compile_c, {"scheme": "standard-webhooks", "secret": STD_SECRET, "tolerance_s": 120})
    now = clock.unix_ms() // 1000
    body = json.dumps({"type": "invoice.paid", "timestamp": "2026-12-01T20:00:00Z", "data": {"id": "in_1"}}).encode()
    signed = standard_headers(STD_KEY, body, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now)
    accepted(hook.post(body, signed), "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W")
    accepted(hook.post(body, signed), "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", duplicate=True)  # replay: dedup
    assert hook.events()[0]["topic"] == "invoice.paid"
    before = hook.count()
    # the id is signed: a replay under a new id is refused, as are another key, a stale and a future timestamp
    refused(hook.post(body, {**signed, "webhook-id": "msg_other"}))
    refused(hook.post(body, standard_headers(bytes(32), body, "msg_x", now)))
    refused(hook.post(body, standard_headers(STD_KEY, body, "msg_y", now - 121)))
    refused(hook.post(body, standard_headers(STD_KEY, body, "msg_z", now + 121)))
    missing = {k: v for k, v in signed.items() if k != "webhook-timestamp"}
    refused(hook.post(body, missing))
    clock.advance(s=121)
    refused(hook.post(body, signed))
    assert hook.count() == before


def test_generic_hmac_with_header_encoding_prefix(live: LiveApi, compile_c: Any) -> None:
    secret = "generic-signing-secret-0001"
    hook = Hook(live, compile_c, {"scheme": "hmac-sha256", "secret": secret, "header": "X-Signature",
                                  "encoding": "base64", "prefix": "sha256=", "id_header": "X-Delivery",
                                  "topic_header": "X-Event"})
    body = b'{"build": 12, "status": "green"}'
    sig = "sha256=" + base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
    headers = {"X-Signature": sig, "X-Delivery": "b-12", "X-Event": "ci.build", "Content-Type": "application/json"}
    accepted(hook.post(body, headers), "b-12")
    accepted(hook.post(body, headers), "b-12", duplicate=True)
    assert hook.events()[0]["topic"] == "ci.build"
    refused(hook.post(body, {**headers, "X-Signature": sig.removeprefix("sha256=")}))  # prefix required
    refused(hook.post(body + b" ", headers))
    hexsig = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    refused(hook.post(body, {**headers, "X-Signature": "sha256=" + hexsig}))  # hex where base64 is configured
    assert hook.count() == 1
    # without an id header the §10.1 defaults apply (here the payload hash), the topic falls back to "webhook"
    hook2 = Hook(live, compile_c, {"scheme": "hmac-sha256", "secret": secret, "header": "X-Signature"})
    r = hook2.post(body, {"X-Signature": hexsig.upper(), "Content-Type": "application/json"})
    assert r.status_code == 202 and r.json()["event_id"].startswith("sha256:")
    assert hook2.events()[0]["topic"] == "webhook"


def test_field_mapping_fits_a_large_payload(live: LiveApi, compile_c: Any) -> None:
    hook = Hook(live, compile_c, {"scheme": "github", "secret": GH_SECRET,
                                  "fields": ["action", "pull_request.number", "repository.full_name", "absent.key"]})
    big = {"action": "synchronize", "pull_request": {"number": 42, "body": "x" * 100_000, "head": {"sha": "a"}},
           "repository": {"full_name": "o/r", "description": "y" * 20_000}, "sender": {"login": "me"}}
    body = json.dumps(big).encode()
    accepted(hook.post(body, github_headers(GH_SECRET, body, "big-1", "pull_request")), "big-1")
    [event] = hook.events()
    assert event["payload"] == {"action": "synchronize", "pull_request": {"number": 42},
                                "repository": {"full_name": "o/r"}}
    assert event["envelope_bytes"] < 200
    # a forged large body is refused before it is parsed or stored
    refused(hook.post(body, github_headers("wrong", body, "big-2", "pull_request")))
    # without a mapping the 16 KiB bounds hold: the raw body is refused unread (harness.md §10.4 step 5)
    plain = Hook(live, compile_c, {"scheme": "github", "secret": GH_SECRET})
    r = plain.post(body, github_headers(GH_SECRET, body, "big-3", "pull_request"))
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert hook.count() == 1 and plain.count() == 0


def test_setting_a_verifier_is_checked_and_scoped(live: LiveApi, compile_c: Any) -> None:
    hook = Hook(live, compile_c, {"scheme": "github", "secret": GH_SECRET})
    put = f"{hook.base}/webhook/verifier"
    for spec, field in (({"scheme": "github", "secret": "short"}, "secret"),
                        ({"scheme": "gitlab", "secret": GH_SECRET}, "scheme"),
                        ({"scheme": "github", "secret": GH_SECRET, "tolerance_s": 60}, "tolerance_s"),
                        ({"scheme": "stripe", "secret": STRIPE_SECRET, "tolerance_s": 0}, "tolerance_s"),
                        ({"scheme": "hmac-sha256", "secret": GH_SECRET}, "header"),
                        ({"scheme": "hmac-sha256", "secret": GH_SECRET, "header": "bad header"}, "header"),
                        ({"scheme": "standard-webhooks", "secret": "whsec_not*base64*at*all"}, "secret"),
                        ({"scheme": "github", "secret": GH_SECRET, "fields": ["a", "a.b"]}, "fields"),
                        ({"scheme": "github", "secret": GH_SECRET, "fields": ["a..b"]}, "fields")):
        r = live.client.put(put, headers=auth(hook.t["akey"]), json=spec)
        assert r.status_code == 400 and r.json()["field"] == field, (spec, r.text)
        assert spec["secret"] not in r.text
    # another tenant's key sees no such Loop; the verifier set before still holds
    other = live.call(tenant)
    r = live.client.put(put.replace(hook.t["group"], other["group"]), headers=auth(other["akey"]),
                        json={"scheme": "github", "secret": "x" * 20})
    assert r.status_code == 404
    assert live.client.get(put, headers=auth(hook.t["akey"])).json()["verifier"]["scheme"] == "github"
    # rotating the URL keeps the verifier; deleting the Loop removes it with the Loop
    rotated = live.client.post(f"{hook.base}/webhook", headers=auth(hook.t["akey"]), json={"action": "rotate"})
    url = live.url + rotated.json()["url"]
    body = b'{"zen": "Keep it logically awesome."}'
    refused(live.client.post(url, content=body, headers={"Content-Type": "application/json"}))
    accepted(live.client.post(url, content=body, headers=github_headers(GH_SECRET, body, "ping-1", "ping")), "ping-1")
    assert live.client.delete(hook.base, headers=auth(hook.t["akey"])).status_code == 204

    async def left(h: Any) -> int:
        import sqlalchemy as sa

        from wakeful.harness.store import schema
        async with h.store.tx(readonly=True) as tx:
            V = schema.loop_webhook_verifier
            return int((await tx.execute(sa.select(sa.func.count()).select_from(V))).scalar_one())
    assert live.call(left) == 0
