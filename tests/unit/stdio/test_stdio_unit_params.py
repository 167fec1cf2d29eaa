"""Strict params decoding of every stdio method (runtime-protocol.md §4 step 12)."""

from __future__ import annotations

import pytest

from wakeful.errors import InvalidParams
from wakeful.runtime.stdio_params import SCHEMAS, decode


def test_every_method_has_a_schema() -> None:
    assert set(SCHEMAS) == {
        "sf.initialize", "sf.object.load", "sf.object.start", "sf.object.stop", "sf.object.unload",
        "sf.object.get", "sf.object.list", "sf.event.deliver", "sf.build.compile", "sf.stats", "sf.shutdown",
        "wakeful.object.inspect", "wakeful.stats", "wakeful.elf.verify",
    }


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("sf.stats", {"a": 1}, "unknown field params.a"),
        ("sf.object.get", {}, "missing field params.object_id"),
        ("sf.object.get", {"object_id": None}, "params.object_id must be a string"),
        ("sf.initialize", {"protocol_version": 1.0}, "params.protocol_version must be an integer"),
        ("sf.initialize", {"protocol_version": True}, "params.protocol_version must be an integer"),
        ("sf.object.list", {"after": 3}, "params.after must be a string"),
        ("sf.event.deliver", {"object_id": "o1", "event_id": "e", "topic": "t"}, "missing field params.payload"),
        ("sf.stats", [], "params must be an object"),
    ],
)
def test_refusals_name_the_field(method: str, params: object, message: str) -> None:
    with pytest.raises(InvalidParams) as info:
        decode(params, SCHEMAS[method])
    assert info.value.message == message


def test_accepted_params_come_back_unchanged() -> None:
    params = {"object_id": "o1", "event_id": "e", "topic": "t", "payload": None}
    assert decode(params, SCHEMAS["sf.event.deliver"]) is params
    assert decode({"after": None}, SCHEMAS["sf.object.list"]) == {"after": None}
