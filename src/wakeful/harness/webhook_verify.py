"""Webhook verifiers (issue 19): a Loop webhook may check a provider's signature before anything is stored, and
take the provider's delivery id as the event id and its event type as the topic. Pure functions: no store, no
clock (the caller passes the store clock's ``now_ms``).

Schemes, each as its provider documents it (docs/decisions-harness-ingress.md "Webhook verifiers"):

- ``github``: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>``; id ``X-GitHub-Delivery``, topic
  ``X-GitHub-Event``. GitHub signs no timestamp, so there is no tolerance.
- ``stripe``: ``Stripe-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>[,v1=…]``; id and topic are
  the body's ``id`` and ``type``.
- ``slack``: ``X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:<ts>:" + body)>`` with
  ``X-Slack-Request-Timestamp: <ts>``; id ``event_id``, topic ``event.type`` (else ``type``); a signed
  ``url_verification`` is answered with its challenge and not stored.
- ``standard-webhooks``: ``webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<ts>." + body)> …`` where key =
  base64-decode(secret without ``whsec_``), with ``webhook-id`` and ``webhook-timestamp``; id ``webhook-id``,
  topic the body's ``type``.
- ``hmac-sha256``: a configurable header holding ``<prefix><hex or base64 HMAC-SHA256(secret, body)>``; id and
  topic from optional configured headers (else the §10.1 defaults and ``webhook``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from wakeful.harness.errors import HarnessError, InvalidRequest

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "MAPPED_BODY_LIMIT",
    "SCHEMES",
    "Delivery",
    "Headers",
    "SignatureRefused",
    "Verifier",
    "describe",
    "project",
    "verifier_from",
    "verify",
]

SCHEMES = ("github", "stripe", "slack", "standard-webhooks", "hmac-sha256")
TIMESTAMPED = frozenset({"stripe", "slack", "standard-webhooks"})
DEFAULT_TOLERANCE_S = 300  # Stripe's default and Slack's "five minutes"; Standard Webhooks recommends the same
MAX_TOLERANCE_S = 3600
MAPPED_BODY_LIMIT = 1_048_576  # raw body bound when a field mapping shrinks the payload to the 16 KiB envelope
MAX_FIELDS, MAX_PATH_CHARS = 64, 256
SECRET_CHARS = (16, 1024)
_HEADER = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")  # an RFC 9110 token
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


class SignatureRefused(HarnessError):
    """``401 unauthorized``: the signature is missing or wrong, or its timestamp is outside the tolerance."""

    code = "unauthorized"


class Headers(Protocol):
    def getlist(self, key: str) -> list[str]: ...


@dataclass(frozen=True)
class Verifier:
    """One Loop webhook's check. ``secret`` is never part of ``public()``."""

    scheme: str
    secret: str = field(repr=False)
    tolerance_s: int = DEFAULT_TOLERANCE_S
    header: str | None = None
    encoding: str = "hex"
    prefix: str = ""
    id_header: str | None = None
    topic_header: str | None = None
    fields: tuple[str, ...] = ()

    def settings(self) -> dict[str, Any]:
        """What is stored beside the secret (and shown): only the keys that apply to the scheme."""
        out: dict[str, Any] = {}
        if self.scheme in TIMESTAMPED:
            out["tolerance_s"] = self.tolerance_s
        if self.scheme == "hmac-sha256":
            out.update(header=self.header, encoding=self.encoding, prefix=self.prefix, id_header=self.id_header,
                       topic_header=self.topic_header)
        if self.fields:
            out["fields"] = list(self.fields)
        return out

    def public(self) -> dict[str, Any]:
        """The answer of every face: scheme, settings and the secret's fingerprint (first 8 hex of its SHA-256)."""
        fingerprint = hashlib.sha256(self.secret.encode("utf-8")).hexdigest()[:8]
        return {"scheme": self.scheme, **self.settings(), "secret_fingerprint": fingerprint}

    def body_limit(self, default: int) -> int:
        return MAPPED_BODY_LIMIT if self.fields else default


# ---------------------------------------------------------------------- settings (set time)


def _bad(message: str, name: str) -> InvalidRequest:
    return InvalidRequest(message, field=name)


def _secret(scheme: str, secret: object) -> str:
    low, high = SECRET_CHARS
    if not isinstance(secret, str) or not low <= len(secret) <= high or not secret.isprintable():
        raise _bad(f"secret must be {low}-{high} printable characters", "secret")  # never echoed
    if scheme == "standard-webhooks":
        _standard_key(secret)
    return secret


def _standard_key(secret: str) -> bytes:
    text = secret.removeprefix("whsec_")
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise _bad("a standard-webhooks secret is whsec_ followed by base64", "secret") from None
    if len(key) < 16:
        raise _bad("a standard-webhooks secret must decode to at least 16 bytes", "secret")
    return key


def _header_name(value: object, name: str, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not _HEADER.fullmatch(value):
        raise _bad(f"{name} must be an HTTP header name (1-64 token characters)", name)
    return value.lower()


def _fields(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_FIELDS:
        raise _bad(f"fields must be a list of 1-{MAX_FIELDS} dotted paths", "fields")
    for path in value:
        if (not isinstance(path, str) or not 1 <= len(path) <= MAX_PATH_CHARS or "" in path.split(".")
                or not path.isprintable()):
            raise _bad(f"each field is a dotted path of non-empty keys, at most {MAX_PATH_CHARS} characters",
                       "fields")
    paths = sorted(set(value))
    if len(paths) != len(value):
        raise _bad("fields must not repeat a path", "fields")
    for shorter, longer in zip(paths, paths[1:], strict=False):
        if longer.startswith(shorter + "."):
            raise _bad(f"field {shorter!r} already keeps {longer!r}", "fields")
    return tuple(value)


def _tolerance(value: object) -> int:
    if value is None:
        return DEFAULT_TOLERANCE_S
    if type(value) is not int or not 1 <= value <= MAX_TOLERANCE_S:
        raise _bad(f"tolerance_s must be an integer of 1-{MAX_TOLERANCE_S} seconds", "tolerance_s")
    return value


def _generic(spec: dict[str, Any]) -> dict[str, Any]:
    encoding = spec.get("encoding", "hex") or "hex"
    if encoding not in ("hex", "base64"):
        raise _bad("encoding must be hex or base64", "encoding")
    prefix = spec.get("prefix") or ""
    if not isinstance(prefix, str) or len(prefix) > 32 or not prefix.isprintable() or not prefix.isascii():
        raise _bad("prefix must be at most 32 printable ASCII characters", "prefix")
    return {"header": _header_name(spec.get("header"), "header", required=True), "encoding": encoding,
            "prefix": prefix, "id_header": _header_name(spec.get("id_header"), "id_header"),
            "topic_header": _header_name(spec.get("topic_header"), "topic_header")}


_KEYS = {"scheme", "secret", "tolerance_s", "fields", "header", "encoding", "prefix", "id_header", "topic_header"}
_GENERIC_KEYS = {"header", "encoding", "prefix", "id_header", "topic_header"}


def verifier_from(spec: dict[str, Any]) -> Verifier:
    """Check a verifier as a face hands it over (``{scheme, secret, tolerance_s?, fields?, header?, …}``);
    ``InvalidRequest`` with the field otherwise. Messages never hold the secret."""
    scheme = spec.get("scheme")
    if scheme not in SCHEMES:
        raise _bad(f"scheme must be one of {', '.join(SCHEMES)}", "scheme")
    given = {key for key, value in spec.items() if value is not None}
    allowed = {"scheme", "secret", "fields"} | ({"tolerance_s"} if scheme in TIMESTAMPED else set()) | (
        _GENERIC_KEYS if scheme == "hmac-sha256" else set())
    for key in sorted(given - allowed):
        name = key if key in _KEYS else "verifier"
        raise _bad(f"{key[:40]!r} does not apply to the {scheme} scheme", name)
    extra = _generic(spec) if scheme == "hmac-sha256" else {}
    return Verifier(scheme=scheme, secret=_secret(scheme, spec.get("secret")),
                    tolerance_s=_tolerance(spec.get("tolerance_s")), fields=_fields(spec.get("fields")), **extra)


# ---------------------------------------------------------------------- verification (every request)


def _one(headers: Headers, name: str) -> bytes:
    values = headers.getlist(name)
    if len(values) != 1:
        raise SignatureRefused(f"the {name} header must appear exactly once")
    return values[0].strip().encode("latin-1")  # the bytes as sent (HTTP header values are latin-1)


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def _fresh(timestamp: bytes, now_ms: int, tolerance_s: int) -> bytes:
    if not _TIMESTAMP.fullmatch(timestamp.decode("latin-1")):
        raise SignatureRefused("the signature timestamp is not a Unix time in seconds")
    if abs(now_ms // 1000 - int(timestamp)) > tolerance_s:
        raise SignatureRefused(f"the signature timestamp is more than {tolerance_s} s from the server's clock")
    return timestamp


def _matches(expected: bytes, candidates: Sequence[bytes]) -> None:
    found = False
    for candidate in candidates:
        found |= hmac.compare_digest(expected, candidate)
    if not found:
        raise SignatureRefused("the webhook signature does not match")


def _github(v: Verifier, headers: Headers, raw: bytes, now_ms: int) -> None:
    expected = b"sha256=" + _mac(v.secret.encode("utf-8"), raw).hex().encode("ascii")
    _matches(expected, [_one(headers, "x-hub-signature-256")])


def _stripe(v: Verifier, headers: Headers, raw: bytes, now_ms: int) -> None:
    items = [part.strip().partition(b"=") for part in _one(headers, "stripe-signature").split(b",")]
    stamps = [value for key, _, value in items if key == b"t"]
    if len(stamps) != 1:
        raise SignatureRefused("the Stripe-Signature header must hold one t= timestamp")
    stamp = _fresh(stamps[0], now_ms, v.tolerance_s)
    expected = _mac(v.secret.encode("utf-8"), stamp, b".", raw).hex().encode("ascii")
    _matches(expected, [value for key, _, value in items if key == b"v1"])


def _slack(v: Verifier, headers: Headers, raw: bytes, now_ms: int) -> None:
    stamp = _fresh(_one(headers, "x-slack-request-timestamp"), now_ms, v.tolerance_s)
    expected = b"v0=" + _mac(v.secret.encode("utf-8"), b"v0:", stamp, b":", raw).hex().encode("ascii")
    _matches(expected, [_one(headers, "x-slack-signature")])


def _standard(v: Verifier, headers: Headers, raw: bytes, now_ms: int) -> None:
    msg_id = _one(headers, "webhook-id")
    stamp = _fresh(_one(headers, "webhook-timestamp"), now_ms, v.tolerance_s)
    digest = _mac(_standard_key(v.secret), msg_id, b".", stamp, b".", raw)
    expected = b"v1," + base64.b64encode(digest)
    _matches(expected, _one(headers, "webhook-signature").split())


def _generic_check(v: Verifier, headers: Headers, raw: bytes, now_ms: int) -> None:
    assert v.header is not None
    digest = _mac(v.secret.encode("utf-8"), raw)
    value, prefix = _one(headers, v.header), v.prefix.encode("ascii")
    if not value.startswith(prefix):
        raise SignatureRefused(f"the {v.header} header must start with {v.prefix!r}")
    value = value[len(prefix):]
    if v.encoding == "hex":  # hex digits in either case
        _matches(digest.hex().encode("ascii"), [value.lower()])
    else:
        _matches(base64.b64encode(digest), [value])


_CHECKS = {"github": _github, "stripe": _stripe, "slack": _slack, "standard-webhooks": _standard,
           "hmac-sha256": _generic_check}


def verify(v: Verifier, headers: Headers, raw: bytes, now_ms: int) -> None:
    """Raise ``SignatureRefused`` unless ``raw`` carries the scheme's valid signature (and, for the timestamped
    schemes, a timestamp within ``tolerance_s`` of ``now_ms``, either way). Constant-time comparisons."""
    _CHECKS[v.scheme](v, headers, raw, now_ms)


# ---------------------------------------------------------------------- the event of a verified body


@dataclass(frozen=True)
class Delivery:
    """What a verified body becomes: ``challenge`` set means answer it and store nothing (Slack)."""

    event_id: str | None
    topic: str
    payload: Any
    challenge: str | None = None


def _header_text(headers: Headers, name: str | None) -> str | None:
    values = headers.getlist(name) if name else []
    return values[0].strip(" \t") if values else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _ids(v: Verifier, headers: Headers, body: dict[str, Any]) -> tuple[str | None, str | None]:
    if v.scheme == "github":
        return _header_text(headers, "x-github-delivery"), _header_text(headers, "x-github-event")
    if v.scheme == "stripe":
        return _text(body.get("id")), _text(body.get("type"))
    if v.scheme == "slack":
        event = body.get("event")
        inner = _text(event.get("type")) if type(event) is dict and body.get("type") == "event_callback" else None
        return _text(body.get("event_id")), inner or _text(body.get("type"))
    if v.scheme == "standard-webhooks":
        return _header_text(headers, "webhook-id"), _text(body.get("type"))
    return _header_text(headers, v.id_header), _header_text(headers, v.topic_header)


def describe(v: Verifier, headers: Headers, body: dict[str, Any]) -> Delivery:
    """The provider's delivery id (None: the §10.1 defaults apply), its event type as the topic (``webhook``
    when it names none) and the payload, cut down to ``fields`` when the verifier names some."""
    if v.scheme == "slack" and body.get("type") == "url_verification":
        challenge = body.get("challenge")
        if not isinstance(challenge, str) or not 1 <= len(challenge) <= 256:
            raise InvalidRequest("url_verification needs a challenge string of 1-256 characters", field="challenge")
        return Delivery(None, "url_verification", None, challenge)
    event_id, topic = _ids(v, headers, body)
    payload = project(body, v.fields) if v.fields else body
    return Delivery(event_id or None, topic or "webhook", payload)


def project(value: dict[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    """Only the named dotted paths of ``value``, nested as they were; a path that is absent (or meets a non-object
    before its end) is left out. Paths never overlap (checked when the verifier is set)."""
    out: dict[str, Any] = {}
    for path in paths:
        keys = path.split(".")
        node: Any = value
        for key in keys:
            if type(node) is not dict or key not in node:
                break
            node = node[key]
        else:
            target = out
            for key in keys[:-1]:
                target = target.setdefault(key, {})
            target[keys[-1]] = node
    return out
