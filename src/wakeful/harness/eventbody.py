"""Event bodies and §10.1 normalisation: the strict body parse of both intake routes, topic / event id /
payload rules, the Idempotency-Key and delivery-id defaults, the payload hash and the envelope bound.

harness.md §10.1, §10.3 step 6, §10.4 steps 7–8, §21 (bad payloads). Pure functions: no store, no clock.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from wakeful.harness.errors import InvalidEvent, InvalidJson, JsonObjectRequired, PayloadTooLarge
from wakeful.runtime import jsonval
from wakeful.sdk.rules import AGENT_LIMITS

__all__ = [
    "MAX_ENVELOPE_BYTES",
    "MAX_ID_BYTES",
    "MAX_TOPIC_BYTES",
    "Flawed",
    "NormalEvent",
    "canonical_sha256",
    "check_event_id",
    "choose_event_id",
    "normalise",
    "parse_body",
    "parse_value",
]

MAX_ENVELOPE_BYTES = AGENT_LIMITS["event_envelope_bytes"]  # the runtime's envelope limit
MAX_TOPIC_BYTES = 128
MAX_ID_BYTES = 128
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1
_INT_TEXT_MAX = 21


class Flawed:
    """Stands in a parsed body for a value the strict rules refuse (duplicate key, NaN, an integer out of
    range, a lone surrogate key): parsing succeeds, and normalisation refuses the field that holds it, so the
    route's later checks (Loop lookup, per-Loop bucket) keep their order (§10.3 steps 7–9)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"<flawed: {self.reason}>"


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            value = Flawed(f"duplicate key {key[:40]!r}")
        elif _has_surrogate(key):
            value = Flawed("object key with a lone surrogate")
            key = key.encode("utf-8", "backslashreplace").decode("utf-8")  # safe to echo in an error
        out[key] = value
    return out


def _constant(name: str) -> Flawed:
    return Flawed(f"{name} is not a JSON value")


def _int(text: str) -> int | Flawed:
    if len(text) <= _INT_TEXT_MAX:
        number = int(text)
        if INT_MIN <= number <= INT_MAX:
            return number
    return Flawed("integer outside [-2^63, 2^64-1]")


def _float(text: str) -> float | Flawed:
    number = float(text)
    return number if math.isfinite(number) else Flawed(f"number {text[:32]} is out of range")


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_int=_int, parse_float=_float, strict=True,
)


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_body(raw: bytes, *, route: Literal["group", "webhook"]) -> dict[str, Any]:
    """Parse a request body that must be one JSON object.

    Not JSON at all, or not an object → ``InvalidJson`` (group route) / ``JsonObjectRequired`` (webhook route);
    nesting too deep for the parser is "not JSON" too (§21, a caught ``RecursionError``). Values the strict
    rules refuse (duplicate keys, ``NaN``/``Infinity``, integers outside [−2^63, 2^64−1], lone surrogates,
    invalid UTF-8 inside strings) are kept as ``Flawed`` markers; ``normalise`` refuses them with
    ``invalid_event`` and the field that holds them.
    """
    error = InvalidJson if route == "group" else JsonObjectRequired
    try:
        value = parse_value(raw)
    except InvalidJson as exc:
        raise error(exc.message) from None
    if type(value) is not dict:
        raise error("the body must be a JSON object")
    return value


def parse_value(raw: bytes) -> Any:
    """Any JSON text with the strict rules' violations kept as ``Flawed`` markers; ``InvalidJson`` when it is
    not JSON (or nested too deeply for the parser)."""
    # invalid UTF-8 inside a string becomes a lone surrogate (refused with its field); elsewhere a syntax error
    text = bytes(raw).decode("utf-8", errors="surrogateescape")
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise InvalidJson("the body is nested too deeply to be parsed") from None
    except ValueError as exc:
        raise InvalidJson(f"the body is not JSON: {str(exc)[:200]}") from None


@dataclass(frozen=True, slots=True)
class NormalEvent:
    """An event after §10.1: what admission stores and the runtime is given."""

    event_id: str
    topic: str
    payload: Any
    payload_text: str  # compact encoding (insertion order), as stored
    payload_sha256: str  # of the canonical encoding (sorted keys): equal payloads hash equal
    envelope_bytes: int


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_sha256(payload: Any, compact: bytes | None = None) -> str:
    """Hex SHA-256 of the canonical encoding: compact, keys sorted, UTF-8 (§10.1 default id). ``compact``, the
    payload's compact encoding in insertion order, is that encoding already when no object in it needs sorting
    (issue 16: the usual event, a flat object with its keys in order, is then encoded once, not twice)."""
    if compact is None or not _in_key_order(payload):
        compact = _CANONICAL.encode(payload).encode("utf-8")
    return hashlib.sha256(compact).hexdigest()


def _in_key_order(value: Any) -> bool:
    """Whether the canonical encoding of a checked value is its compact one: a scalar, or a flat object or array
    whose object keys are already sorted (anything nested is left to the canonical encoder)."""
    kind = type(value)
    if kind is dict:
        keys = list(value)
        members = value.values()
        if keys != sorted(keys):
            return False
    elif kind is list:
        members = value
    else:
        return True
    return not any(type(member) is dict or type(member) is list for member in members)


def check_event_id(value: object, *, field: str = "event_id") -> str:
    """1–128 bytes of visible ASCII (0x21–0x7E)."""
    # visible ASCII is ASCII, printable (no control character, no DEL) and not a space: three C calls instead
    # of a generator step per character (issue 16)
    if (not isinstance(value, str) or not 1 <= len(value) <= MAX_ID_BYTES
            or not (value.isascii() and value.isprintable()) or " " in value):
        raise InvalidEvent(f"{field} must be 1-{MAX_ID_BYTES} bytes of visible ASCII", field=field)
    return value


def _topic(value: object) -> str:
    if isinstance(value, Flawed):
        raise InvalidEvent(f"topic: {value.reason}", field="topic")
    if not isinstance(value, str) or _has_surrogate(value) or not 1 <= len(value.encode()) <= MAX_TOPIC_BYTES:
        raise InvalidEvent(f"topic must be 1-{MAX_TOPIC_BYTES} bytes of UTF-8", field="topic")
    if "\x00" in value:  # valid UTF-8, but no store keeps it as text (every intake path, not only HTTP)
        raise InvalidEvent("topic must not contain U+0000", field="topic")
    return value


def _header_id(values: Sequence[str], field: str, *, once: bool) -> str | None:
    if not values:
        return None
    if once and len(values) > 1:
        raise InvalidEvent(f"{field} must appear at most once", field=field)
    return check_event_id(str(values[0]).strip(" \t"), field=field)


def choose_event_id(
    body_event_id: object, idempotency_keys: Sequence[str], delivery_ids: Sequence[str], payload_sha256: str,
) -> str:
    """§10.1 default id, first that applies: the body's id, ``Idempotency-Key``, a delivery id (webhook route),
    else ``sha256:`` + the payload hash. ``Idempotency-Key`` is checked even when the body names an id."""
    key = _header_id(idempotency_keys, "idempotency_key", once=True)
    if body_event_id is not None:
        if isinstance(body_event_id, Flawed):
            raise InvalidEvent(f"event_id: {body_event_id.reason}", field="event_id")
        return check_event_id(body_event_id)
    if key is not None:
        return key
    delivery = _header_id(list(delivery_ids)[:1], "event_id", once=False)
    return delivery if delivery is not None else f"sha256:{payload_sha256}"


def _payload(value: Any) -> tuple[Any, bytes, str]:
    """(the payload, its compact encoding, its canonical hash); ``InvalidEvent`` past sdk.md §6's checks."""
    if value is None:
        value = {}
    try:
        encoded = jsonval.encode_within(value, max_nodes=jsonval.MAX_NODES, max_depth=jsonval.MAX_DEPTH)
    except jsonval.JsonError as exc:
        raise InvalidEvent(f"payload: {_reason(value, exc)}", field="payload") from None
    return value, encoded, canonical_sha256(value, encoded)


def _reason(value: Any, exc: jsonval.JsonError) -> str:
    flaw = _first_flaw(value, 0)
    return flaw.reason if flaw is not None else exc.message


def _first_flaw(value: Any, depth: int) -> Flawed | None:
    if isinstance(value, Flawed):
        return value
    if depth > jsonval.MAX_DEPTH:
        return None
    members = value.values() if type(value) is dict else value if type(value) is list else ()
    for member in members:
        found = _first_flaw(member, depth + 1)
        if found is not None:
            return found
    return None


def normalise(
    *, topic: object, payload: Any, event_id: object = None, idempotency_keys: Sequence[str] = (),
    delivery_ids: Sequence[str] = (),
) -> NormalEvent:
    """§10.1 for every intake path: ``InvalidEvent`` (field topic / event_id / payload / idempotency_key),
    then ``PayloadTooLarge`` when the compact envelope ``{event_id, topic, payload}`` exceeds 16,384 bytes."""
    topic_text = _topic(topic)
    value, encoded, digest = _payload(payload)
    chosen = choose_event_id(event_id, idempotency_keys, delivery_ids, digest)
    envelope = (len(b'{"event_id":,"topic":,"payload":}') + jsonval.str_size(chosen)
                + jsonval.str_size(topic_text) + len(encoded))
    if envelope > MAX_ENVELOPE_BYTES:
        raise PayloadTooLarge(
            f"the event envelope is {envelope} bytes, over {MAX_ENVELOPE_BYTES}", bytes=envelope,
            limit=MAX_ENVELOPE_BYTES,
        )
    return NormalEvent(chosen, topic_text, value, encoded.decode("utf-8"), digest, envelope)
