"""Properties of §10.1 normalisation (hypothesis): what intake admits the runtime accepts, with the same envelope
size; the default id is stable under key order; a body's text round-trips through the strict parse."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wakeful.harness.errors import InvalidEvent, PayloadTooLarge
from wakeful.harness.eventbody import normalise, parse_body
from wakeful.runtime import jsonval

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40),
)
values = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=6),
                                                       st.dictionaries(st.text(max_size=8), kids, max_size=6)),
                      max_leaves=60)
ids = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=128)
topics = st.text(min_size=1, max_size=32)


def _runtime_accepts(event_id: str, topic: str, payload: Any) -> int | None:
    """The runtime's own rule (runtime-protocol.md §6.9): the payload within the JSON limits and the compact
    envelope within 16,384 bytes; returns the envelope size, or None when refused."""
    try:
        box = jsonval.from_python(payload)
    except jsonval.JsonError:
        return None
    size = len(jsonval.encode({"event_id": event_id, "topic": topic, "payload": box.value}))
    return size if size <= 16_384 else None


@settings(max_examples=300, deadline=None)
@given(topic=topics, payload=values, event_id=st.one_of(st.none(), ids))
def test_admitted_events_are_exactly_what_the_runtime_accepts(topic: str, payload: Any, event_id: str | None) -> None:
    try:
        topic.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates in generated text: refused as topic, covered by the table tests
    if "\x00" in topic:  # stricter than the runtime: no store keeps U+0000 in text (decisions-harness-ingress)
        with pytest.raises(InvalidEvent) as refused_topic:
            normalise(topic=topic, payload=payload, event_id=event_id)
        assert refused_topic.value.details["field"] == "topic"
        return
    try:
        event = normalise(topic=topic, payload=payload, event_id=event_id)
    except (InvalidEvent, PayloadTooLarge) as refused:
        if isinstance(refused, InvalidEvent):
            assert refused.details["field"] == "payload"
        chosen = event_id or "sha256:" + "0" * 64
        assert _runtime_accepts(chosen, topic, {} if payload is None else payload) is None
        return
    assert _runtime_accepts(event.event_id, event.topic, event.payload) == event.envelope_bytes
    assert json.loads(event.payload_text) == ({} if payload is None else payload)


@settings(max_examples=200, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=8), scalars, min_size=2, max_size=8))
def test_default_id_ignores_key_order(payload: dict[str, Any]) -> None:
    reordered = dict(reversed(list(payload.items())))
    try:
        one, two = normalise(topic="t", payload=payload), normalise(topic="t", payload=reordered)
    except InvalidEvent:
        return  # a generated lone surrogate
    assert one.event_id == two.event_id and one.payload_sha256 == two.payload_sha256


@settings(max_examples=200, deadline=None)
@given(payload=values)
def test_a_body_round_trips_through_the_strict_parse(payload: Any) -> None:
    try:
        raw = json.dumps({"topic": "t", "payload": payload}, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return
    body = parse_body(raw, route="group")
    assert body["payload"] == payload
