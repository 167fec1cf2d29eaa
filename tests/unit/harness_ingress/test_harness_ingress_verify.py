"""``webhook_verify`` without a server (issue 19): the set-time checks of a verifier, the field mapping, and the
signature checks' hostile inputs (each answered by ``SignatureRefused``, never another exception)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from wakeful.harness.errors import InvalidRequest
from wakeful.harness.webhook_verify import (
    SignatureRefused,
    Verifier,
    describe,
    project,
    verifier_from,
    verify,
)

SECRET = "a-signing-secret-of-some-length"
NOW_MS = 1_767_225_600_000


class H:
    """Request headers as Starlette gives them: lowercase names, latin-1 text, repeats kept."""

    def __init__(self, *pairs: tuple[str, str]) -> None:
        self.pairs = [(k.lower(), v) for k, v in pairs]

    def getlist(self, key: str) -> list[str]:
        return [v for k, v in self.pairs if k == key.lower()]


def test_public_view_and_repr_never_hold_the_secret() -> None:
    v = verifier_from({"scheme": "stripe", "secret": SECRET, "fields": ["id", "data.object.id"]})
    shown = v.public()
    assert shown == {"scheme": "stripe", "tolerance_s": 300, "fields": ["id", "data.object.id"],
                     "secret_fingerprint": hashlib.sha256(SECRET.encode()).hexdigest()[:8]}
    assert SECRET not in repr(v) and SECRET not in str(shown)


@pytest.mark.parametrize(("spec", "field"), [
    ({"scheme": "github", "secret": 12345678901234567}, "secret"),
    ({"scheme": "github", "secret": "tab\tinside-a-secret"}, "secret"),
    ({"scheme": "github", "secret": SECRET, "header": "X-Sig"}, "header"),
    ({"scheme": "github", "secret": SECRET, "bogus": 1}, "verifier"),
    ({"scheme": "hmac-sha256", "secret": SECRET, "header": "X-Sig", "encoding": "base32"}, "encoding"),
    ({"scheme": "hmac-sha256", "secret": SECRET, "header": "X-Sig", "prefix": "é"}, "prefix"),
    ({"scheme": "slack", "secret": SECRET, "tolerance_s": True}, "tolerance_s"),
    ({"scheme": "slack", "secret": SECRET, "tolerance_s": 3601}, "tolerance_s"),
    ({"scheme": "standard-webhooks", "secret": "whsec_" + "QUJD"}, "secret"),  # 3 bytes
    ({"scheme": "github", "secret": SECRET, "fields": []}, "fields"),
    ({"scheme": "github", "secret": SECRET, "fields": ["a", "a"]}, "fields"),
    ({"scheme": "github", "secret": SECRET, "fields": ["x.y", "x.y.z"]}, "fields"),
    ({"scheme": "github", "secret": SECRET, "fields": [".a"]}, "fields"),
    ({"scheme": "github", "secret": SECRET, "fields": ["k"] * 65}, "fields"),
])
def test_bad_verifiers_are_refused_with_their_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        verifier_from(spec)
    assert caught.value.details["field"] == field
    assert str(spec["secret"]) not in caught.value.message


def test_project_keeps_named_paths_nested() -> None:
    body = {"a": {"b": 1, "c": 2}, "d": [1, 2], "e": "s", "f": {"g": {"h": None}}}
    assert project(body, ["a.b", "d", "f.g.h", "e.x", "missing", "a.z"]) == {"a": {"b": 1}, "d": [1, 2],
                                                                             "f": {"g": {"h": None}}}
    assert body["a"] == {"b": 1, "c": 2}  # the body is not changed


def _gh(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


@pytest.mark.parametrize("headers", [
    H(),
    H(("x-hub-signature-256", "sha256=\xe9\xff")),  # latin-1 bytes that are no hex
    H(("x-hub-signature-256", _gh(b"{}").upper())),  # GitHub sends lowercase; the prefix differs in case
    H(("x-hub-signature-256", _gh(b"{}")), ("x-hub-signature-256", _gh(b"{}"))),
])
def test_github_hostile_headers(headers: H) -> None:
    with pytest.raises(SignatureRefused):
        verify(Verifier("github", SECRET), headers, b"{}", NOW_MS)


@pytest.mark.parametrize("header", ["", "t=", "t=1,t=2,v1=00", "t=-5,v1=00", "t=99999999999999,v1=00",
                                    "t=\xe9,v1=\xe9", ",,,", "v1"])
def test_stripe_hostile_headers(header: str) -> None:
    with pytest.raises(SignatureRefused):
        verify(Verifier("stripe", SECRET), H(("stripe-signature", header)), b"{}", NOW_MS)


def test_standard_webhooks_hostile_headers() -> None:
    v = verifier_from({"scheme": "standard-webhooks", "secret": "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
    ts = str(NOW_MS // 1000)
    for sig in ("", "v1,", "v1,***", "v2,abc", "v1 , x", "\xe9"):
        with pytest.raises(SignatureRefused):
            verify(v, H(("webhook-id", "m"), ("webhook-timestamp", ts), ("webhook-signature", sig)), b"{}", NOW_MS)


def test_describe_falls_back_to_webhook_and_the_defaults() -> None:
    slack = Verifier("slack", SECRET)
    assert describe(slack, H(), {"type": "app_rate_limited"}).topic == "app_rate_limited"
    assert describe(slack, H(), {"type": 7}).topic == "webhook"
    stripe = describe(Verifier("stripe", SECRET), H(), {"id": None})
    assert (stripe.event_id, stripe.topic) == (None, "webhook")
    with pytest.raises(InvalidRequest):
        describe(slack, H(), {"type": "url_verification", "challenge": 5})
