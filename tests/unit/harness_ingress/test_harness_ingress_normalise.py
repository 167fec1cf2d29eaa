"""harness.md §10.1 normalisation and the strict body parse, row by row (pure functions, no store)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from wakeful.harness.errors import InvalidEvent, InvalidJson, JsonObjectRequired, PayloadTooLarge
from wakeful.harness.eventbody import Flawed, canonical_sha256, check_event_id, normalise, parse_body


def _field(exc: pytest.ExceptionInfo[InvalidEvent]) -> str:
    assert exc.value.code == "invalid_event"
    return str(exc.value.details["field"])


def _event(body: bytes, **kw: Any) -> Any:
    parsed = parse_body(body, route="group")
    return normalise(topic=parsed.get("topic"), payload=parsed.get("payload"), event_id=parsed.get("event_id"),
                     **kw)


# ---------------------------------------------------------------- topic


@pytest.mark.parametrize("topic", ["t", "x" * 128, "é" * 64, "a b\tc"])
def test_topic_of_1_to_128_utf8_bytes_is_accepted(topic: str) -> None:
    assert normalise(topic=topic, payload={}).topic == topic


@pytest.mark.parametrize("topic", ["", "x" * 129, "é" * 65, None, 5, ["t"], "\ud800"])
def test_topic_outside_bounds_or_not_a_string_is_invalid_topic(topic: Any) -> None:
    with pytest.raises(InvalidEvent) as exc:
        normalise(topic=topic, payload={})
    assert _field(exc) == "topic"


# ---------------------------------------------------------------- event_id


@pytest.mark.parametrize("event_id", ["e", "!" * 128, "~a~", "sha256:abc"])
def test_event_id_of_visible_ascii_is_kept(event_id: str) -> None:
    assert normalise(topic="t", payload={}, event_id=event_id).event_id == event_id


@pytest.mark.parametrize("event_id", ["", "x" * 129, "a b", "tab\t", "é", "\x7f", 12, ["e"], True])
def test_event_id_out_of_bounds_is_invalid_event_id(event_id: Any) -> None:
    with pytest.raises(InvalidEvent) as exc:
        normalise(topic="t", payload={}, event_id=event_id)
    assert _field(exc) == "event_id"


# ---------------------------------------------------------------- default id order


def test_default_id_is_body_then_idempotency_key_then_delivery_id_then_payload_hash() -> None:
    payload = {"b": 1, "a": [1.5, "é"]}
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"),
                                       ensure_ascii=False).encode()).hexdigest()
    assert normalise(topic="t", payload=payload).event_id == f"sha256:{digest}"
    assert normalise(topic="t", payload=payload, delivery_ids=["gh-1"]).event_id == "gh-1"
    assert normalise(topic="t", payload=payload, delivery_ids=["wh-1", "gh-1"]).event_id == "wh-1"
    assert normalise(topic="t", payload=payload, idempotency_keys=["k1"], delivery_ids=["wh-1"]).event_id == "k1"
    assert normalise(topic="t", payload=payload, event_id="body", idempotency_keys=["k1"]).event_id == "body"


def test_payload_hash_is_canonical_keys_sorted_compact_utf8() -> None:
    one = normalise(topic="t", payload={"a": 1, "b": {"d": "é", "c": 2}})
    two = normalise(topic="t", payload={"b": {"c": 2, "d": "é"}, "a": 1})
    assert one.event_id == two.event_id == f"sha256:{one.payload_sha256}"
    canonical = '{"a":1,"b":{"c":2,"d":"é"}}'.encode()
    assert one.payload_sha256 == hashlib.sha256(canonical).hexdigest()
    assert one.payload_text == '{"a":1,"b":{"d":"é","c":2}}'  # stored as sent (insertion order, compact)
    assert canonical_sha256({}) == hashlib.sha256(b"{}").hexdigest()


@pytest.mark.parametrize("payload", [None, {}])
def test_absent_or_null_payload_is_an_empty_object(payload: Any) -> None:
    event = normalise(topic="t", payload=payload)
    assert event.payload == {} and event.payload_text == "{}"
    assert event.event_id == "sha256:" + hashlib.sha256(b"{}").hexdigest()


@pytest.mark.parametrize("payload", [[1, 2], "text", 0, False, 1.5, {"nested": {"x": None}}])
def test_any_json_value_is_a_payload(payload: Any) -> None:
    assert normalise(topic="t", payload=payload).payload == payload


# ---------------------------------------------------------------- Idempotency-Key


@pytest.mark.parametrize(("keys", "expected"), [(["  k-1\t"], "k-1"), (["x" * 128], "x" * 128)])
def test_idempotency_key_is_trimmed_and_used(keys: list[str], expected: str) -> None:
    assert normalise(topic="t", payload={}, idempotency_keys=keys).event_id == expected


@pytest.mark.parametrize("keys", [["a", "b"], ["a", "a"], ["x" * 129], ["   "], [""], ["é"], ["a b"]])
def test_bad_idempotency_key_is_invalid_even_with_a_body_id(keys: list[str]) -> None:
    for event_id in (None, "body-id"):
        with pytest.raises(InvalidEvent) as exc:
            normalise(topic="t", payload={}, event_id=event_id, idempotency_keys=keys)
        assert _field(exc) == "idempotency_key"


def test_bad_delivery_id_is_invalid_event_id() -> None:
    with pytest.raises(InvalidEvent) as exc:
        normalise(topic="webhook", payload={}, delivery_ids=["x" * 129])
    assert _field(exc) == "event_id"


# ---------------------------------------------------------------- envelope


def _sized(total: int) -> dict[str, str]:
    frame = len('{"event_id":"e","topic":"t","payload":{"p":""}}')
    return {"p": "x" * (total - frame)}


def test_envelope_of_16384_bytes_is_accepted_and_16385_is_payload_too_large() -> None:
    ok = normalise(topic="t", payload=_sized(16_384), event_id="e")
    assert ok.envelope_bytes == 16_384
    assert len(json.dumps({"event_id": "e", "topic": "t", "payload": ok.payload},
                          separators=(",", ":")).encode()) == 16_384
    with pytest.raises(PayloadTooLarge) as exc:
        normalise(topic="t", payload=_sized(16_385), event_id="e")
    assert exc.value.code == "payload_too_large" and exc.value.details["bytes"] == 16_385


def test_envelope_counts_the_default_id_and_escapes() -> None:
    event = normalise(topic="t", payload={"s": "\n\"é"})
    expected = {"event_id": event.event_id, "topic": "t", "payload": {"s": "\n\"é"}}
    assert event.envelope_bytes == len(json.dumps(expected, separators=(",", ":"), ensure_ascii=False).encode())


# ---------------------------------------------------------------- strict parse (§21 bad payloads)


@pytest.mark.parametrize(
    "payload_text",
    [
        '{"a": 1, "a": 2}',
        "NaN",
        "[Infinity]",
        '{"x": -Infinity}',
        '"\\ud800"',
        '{"\\udc00": 1}',
        "18446744073709551616",
        "-9223372036854775809",
        "1" * 5000,
        "1e400",
        "[" * 33 + "1" + "]" * 33,
        "[" + ",".join(["0"] * 4096) + "]",
    ],
)
def test_strict_rule_violations_in_the_payload_are_invalid_event_payload(payload_text: str) -> None:
    body = ('{"topic": "t", "payload": ' + payload_text + "}").encode()
    with pytest.raises(InvalidEvent) as exc:
        _event(body)
    assert _field(exc) == "payload"


def test_invalid_utf8_in_a_payload_string_is_invalid_event_payload() -> None:
    with pytest.raises(InvalidEvent) as exc:
        _event(b'{"topic": "t", "payload": {"s": "\xff\xfe"}}')
    assert _field(exc) == "payload"


@pytest.mark.parametrize(
    "payload_text",
    ["[" * 33 + "]" * 33, "[" * 32 + "1" + "]" * 32, "18446744073709551615", "-9223372036854775808",
     "[" + ",".join(["0"] * 4095) + "]"],
)
def test_values_at_the_limits_are_accepted(payload_text: str) -> None:
    event = _event(('{"topic": "t", "payload": ' + payload_text + "}").encode())
    assert event.payload == json.loads(payload_text)


def test_strict_violation_in_topic_or_event_id_names_that_field() -> None:
    with pytest.raises(InvalidEvent) as exc:
        _event(b'{"topic": "t", "topic": "u"}')
    assert _field(exc) == "topic"
    with pytest.raises(InvalidEvent) as exc:
        _event(b'{"topic": "t", "event_id": "\\ud800"}')
    assert _field(exc) == "event_id"
    with pytest.raises(InvalidEvent) as exc:
        _event(b'{"topic": "t", "event_id": NaN}')
    assert _field(exc) == "event_id"


def test_parse_body_keeps_flaws_as_markers_without_raising() -> None:
    body = parse_body(b'{"topic": "t", "payload": {"a": NaN, "b": 1, "b": 2}}', route="group")
    assert isinstance(body["payload"]["a"], Flawed) and isinstance(body["payload"]["b"], Flawed)


def test_a_lone_surrogate_key_is_escaped_so_it_can_be_echoed_in_an_error() -> None:
    body = parse_body(b'{"topic": "t", "\\ud800x": 1, "k\xff": 2}', route="group")
    keys = [k for k in body if k != "topic"]
    assert all(k.encode("utf-8") for k in keys)  # no lone surrogate left in any key
    assert all(isinstance(body[k], Flawed) for k in keys)


@pytest.mark.parametrize(
    "raw", [b"", b"not json", b"[1, 2]", b'"text"', b"1", b"null", b"{", b"{}x", b"\xff{}", b"[" * 60_000]
)
def test_group_route_non_json_or_non_object_is_invalid_json(raw: bytes) -> None:
    with pytest.raises(InvalidJson) as exc:
        parse_body(raw, route="group")
    assert exc.value.code == "invalid_json"


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'"text"', b"null", b"", b"{" * 20_000])
def test_webhook_route_non_json_or_non_object_is_json_object_required(raw: bytes) -> None:
    with pytest.raises(JsonObjectRequired) as exc:
        parse_body(raw, route="webhook")
    assert exc.value.code == "json_object_required"


def test_webhook_body_is_the_payload_with_topic_webhook() -> None:
    body = parse_body(b'{"action": "opened", "n": 1}', route="webhook")
    event = normalise(topic="webhook", payload=body, delivery_ids=["abc-123"])
    assert (event.topic, event.event_id, event.payload) == ("webhook", "abc-123", {"action": "opened", "n": 1})


def test_python_values_that_are_not_json_are_invalid_payload() -> None:
    for payload in ({"t": (1, 2)}, {1: "int key"}, float("nan"), {"x": object()}, [2**64]):
        with pytest.raises(InvalidEvent) as exc:
            normalise(topic="t", payload=payload)
        assert _field(exc) == "payload"


def _encodings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts ``json.JSONEncoder.encode`` calls (the stdlib encoder every JSON text here is made by)."""
    calls: list[int] = []
    encode = json.JSONEncoder.encode

    def counting(self: json.JSONEncoder, o: Any) -> str:
        calls.append(1)
        return encode(self, o)

    monkeypatch.setattr(json.JSONEncoder, "encode", counting)
    return calls


def test_a_flat_payload_in_key_order_is_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16: the payload's compact encoding is the stored text and, when no object in it needs sorting, the
    canonical text it is hashed by; the previous code encoded it three times (measure, dumps, the hash)."""
    calls = _encodings(monkeypatch)
    event = normalise(topic="metric", payload={"name": "cpu", "value": 40}, event_id="e1")
    assert len(calls) == 1
    assert event.payload_text == '{"name":"cpu","value":40}'
    assert event.payload_sha256 == hashlib.sha256(b'{"name":"cpu","value":40}').hexdigest()
    calls.clear()
    normalise(topic="metric", payload={"value": 40, "name": "cpu"}, event_id="e1")
    assert len(calls) == 2  # keys out of order: the canonical text is encoded on its own


@pytest.mark.parametrize("payload", [
    {}, [], 0, "é", None, 1.5, {"a": 1, "b": "x"}, {"b": 1, "a": 2}, [3, "z", None], [{"b": 1, "a": 2}],
    {"a": {"d": 1, "c": 2}}, {"a": [1, {"z": 0, "y": 1}]}, {"é": 1, "e": 2, "E": 3}, {"a\u0000": 1, "a": 0},
])
def test_the_payload_hash_is_always_that_of_the_sorted_encoding(payload: Any) -> None:
    value = {} if payload is None else payload
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert normalise(topic="t", payload=payload).payload_sha256 == hashlib.sha256(canonical).hexdigest()
    assert canonical_sha256(value) == hashlib.sha256(canonical).hexdigest()


def test_an_event_id_is_visible_ascii_exactly_whatever_the_check() -> None:
    """The id check reads the string with C calls (issue 16); it accepts exactly 0x21–0x7E, as the per-character
    check it replaced."""
    for code in [*range(0x00, 0x100), 0x2028, 0xFEFF, 0x1F600]:
        for text in (chr(code), f"a{chr(code)}b"):
            visible = all(0x21 <= ord(ch) <= 0x7E for ch in text)
            if visible:
                assert check_event_id(text) == text
            else:
                with pytest.raises(InvalidEvent):
                    check_event_id(text)
