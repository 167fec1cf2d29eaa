"""jsonval: strict RFC 8259 parsing, the number rule, compact encoding, limits and sdk equality (sdk.md §6)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.calls import record_calls

from wakeful.runtime import jsonval
from wakeful.runtime.jsonval import (
    MAX_BYTES,
    MAX_NODES,
    Json,
    JsonLimitError,
    JsonSyntaxError,
    JsonTypeError,
)


# sdk.md §6 depth table, row by row
@pytest.mark.parametrize(
    ("text", "deepest", "valid"),
    [
        ("1", 0, True),
        ("[]", 0, True),
        ("{}", 0, True),
        ("[1]", 1, True),
        ('{"a": 1}', 1, True),
        ('{"a": [1]}', 2, True),
        ("[" * 32 + "1" + "]" * 32, 32, True),
        ("[" * 33 + "]" * 33, 32, True),
        ("[" * 33 + "1" + "]" * 33, 33, False),
        ("[" * 34 + "]" * 34, 33, False),
    ],
)
def test_depth_table(text: str, deepest: int, valid: bool) -> None:
    box = jsonval.parse(text, limits=False)
    assert box.depth == deepest
    assert box.within_limits() is valid
    if valid:
        assert jsonval.parse(text) == box
    else:
        with pytest.raises(JsonLimitError, match="nested 33 deep"):
            jsonval.parse(text)


def test_nodes_count_every_value_but_not_keys() -> None:
    assert jsonval.parse('{"a":1,"b":[true,null,"x"],"c":{}}').nodes == 1 + 1 + 1 + 3 + 1
    assert jsonval.parse("[" + ",".join(["0"] * (MAX_NODES - 1)) + "]").nodes == MAX_NODES
    with pytest.raises(JsonLimitError, match="4097 nodes"):
        jsonval.parse("[" + ",".join(["0"] * MAX_NODES) + "]")


def test_size_is_the_compact_encoding() -> None:
    box = jsonval.parse('{ "a" : [ 1 , 2 ] ,\n "é": "\\u00e9" }')
    assert jsonval.encode(box) == '{"a":[1,2],"é":"é"}'.encode()
    assert box.size == len('{"a":[1,2],"é":"é"}'.encode())
    exact = '"' + "x" * (MAX_BYTES - 2) + '"'
    assert jsonval.parse(exact).size == MAX_BYTES
    with pytest.raises(JsonLimitError, match="16385 bytes"):
        jsonval.parse('"' + "x" * (MAX_BYTES - 1) + '"')


def test_encoding_can_grow_past_the_text() -> None:
    # 1e5 is a float: written back as 100000.0, so 16 KiB of text can encode over the limit
    text = "[" + ",".join(["1e5"] * 3000) + "]"
    assert len(text) < MAX_BYTES
    with pytest.raises(JsonLimitError):
        jsonval.parse(text)


def test_encoding_escapes_controls_and_keeps_non_ascii() -> None:
    assert jsonval.encode("a\nb\x01é😀") == b'"a\\nb\\u0001\xc3\xa9\xf0\x9f\x98\x80"'
    assert jsonval.dumps({"b": 1, "a": 2}) == '{"b":1,"a":2}'  # insertion order


@pytest.mark.parametrize(
    "text",
    ["NaN", "[Infinity]", "-Infinity", '"\\ud800"', '{"\\udc00":1}', '["a\\udfff"]', "1e400", "-1e400",
     "1" * 5000, "[1,]", '{"a":1,}', "01", "1.", ".5", "+1", "'a'", "[1 2]", "", " ", "\ufeff1",
     '"\x01"', "tru", "[", "{\"a\"}", "1 2", "/*c*/1", "0x10"],
)
def test_syntax_traps_are_refused(text: str) -> None:
    with pytest.raises(JsonSyntaxError):
        jsonval.parse(text)


def test_invalid_utf8_bytes_are_syntax_errors() -> None:
    for raw in (b'"\xc0\xaf"', b'"\xed\xa0\x80"', b'"\xe2\x82"', b"\xff"):
        with pytest.raises(JsonSyntaxError, match="UTF-8"):
            jsonval.parse(raw)


def test_recursion_error_is_a_limit_never_a_traceback() -> None:
    for text in ("[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        with pytest.raises(JsonLimitError):
            jsonval.parse(text)


def test_surrogate_pairs_are_fine() -> None:
    assert jsonval.parse('"\\ud83d\\ude00"').value == "😀"


# sdk.md §6 number rule
@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("0", 0, int),
        ("-0", 0, int),
        ("-9223372036854775808", -(2**63), int),
        ("18446744073709551615", 2**64 - 1, int),
        ("18446744073709551616", 18446744073709551616.0, float),
        ("-9223372036854775809", -9223372036854775809.0, float),
        ("1" * 300, float("1" * 300), float),
        ("1.0", 1.0, float),
        ("1e2", 100.0, float),
        ("-0.0", -0.0, float),
    ],
)
def test_number_rule(text: str, value: float, kind: type) -> None:
    got = jsonval.parse(text).value
    assert type(got) is kind
    assert got == value


def test_floats_are_written_in_shortest_round_trip_form() -> None:
    assert jsonval.dumps(jsonval.parse("1e30")) == "1e+30"
    assert jsonval.dumps(jsonval.parse("0.1")) == "0.1"
    assert jsonval.dumps(jsonval.parse("18446744073709551616")) == "1.8446744073709552e+19"
    for f in (0.1, 1 / 3, 1e-300, 2.5e16):
        assert float(jsonval.dumps(f)) == f


def test_duplicate_keys_last_wins() -> None:
    assert jsonval.parse('{"a":1,"b":2,"a":3}').value == {"a": 3, "b": 2}


# sdk.md §6 equality
@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1, 1, True),
        (1, 1.0, False),
        (1, True, False),
        (0, False, False),
        (1.0, True, False),
        (None, False, False),
        ("1", 1, False),
        ([1, 2], [1, 2], True),
        ([1, 2], [2, 1], False),
        ([1], [1.0], False),
        ({"a": 1, "b": [True]}, {"b": [True], "a": 1}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": 1}, {"b": 1}, False),
        ({"a": {"x": 1}}, {"a": {"x": True}}, False),
        ([], {}, False),
    ],
)
def test_equality(a: object, b: object, same: bool) -> None:
    assert jsonval.equal(a, b) is same  # type: ignore[arg-type]
    assert jsonval.equal(b, a) is same  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [(1, 2), {1: "a"}, float("nan"), float("inf"), 2**64, -(2**63) - 1, {"a": {1, 2}}, b"x", "\ud800",
     {"k": object()}],
)
def test_from_python_refuses_non_json(value: object) -> None:
    with pytest.raises(JsonTypeError):
        jsonval.from_python(value)


def test_from_python_copies_and_checks() -> None:
    source = {"a": [1, {"b": "c"}]}
    box = jsonval.from_python(source)
    source["a"][1]["b"] = "changed"  # type: ignore[index]
    assert box.value == {"a": [1, {"b": "c"}]}
    assert (box.size, box.nodes, box.depth) == (len('{"a":[1,{"b":"c"}]}'), 5, 3)
    with pytest.raises(JsonLimitError):
        jsonval.from_python([[[]]] * 3000)
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(JsonLimitError):
        jsonval.from_python(deep)
    with pytest.raises(JsonLimitError):
        jsonval.from_python(deep, limits=False)


def test_from_python_without_limits_boxes_an_envelope() -> None:
    payload = jsonval.parse("[" * 32 + "1" + "]" * 32)
    box = jsonval.from_python({"event_id": "e", "topic": "t", "payload": payload.value}, limits=False)
    assert box.depth == 33 and not box.within_limits()


def test_cyclic_python_value_is_refused() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(jsonval.JsonError):
        jsonval.from_python(cyclic, limits=False)


def test_errors_are_typed_for_the_protocol() -> None:
    assert (JsonSyntaxError("x").code, JsonSyntaxError("x").wire_code) == ("invalid_json", "PARSE_ERROR")
    assert (JsonLimitError("x").code, JsonLimitError("x").wire_code) == ("invalid_request", "INVALID_PARAMS")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_round_trip_and_measure_agree(value: object) -> None:
    try:
        box = jsonval.from_python(value)
    except JsonTypeError:  # lone surrogates from st.text()
        return
    again = jsonval.parse(jsonval.encode(box))
    assert jsonval.equal(again.value, box.value)
    assert (again.size, again.nodes, again.depth) == (box.size, box.nodes, box.depth)
    assert again.size == len(json.dumps(box.value, ensure_ascii=False, separators=(",", ":")).encode())


def test_box_is_immutable() -> None:
    box = Json(1, 1, 1, 0, 0)
    with pytest.raises(AttributeError):
        box.value = 2  # type: ignore[misc]
    assert math.isfinite(jsonval.parse("1.5").value)  # type: ignore[arg-type]


def test_parse_document_for_protocol_frames() -> None:
    frame = '{"jsonrpc":"2.0","id":"1","method":"m","params":{"a":[' + ",".join(["1"] * 20000) + "]}}"
    assert len(jsonval.parse_document(frame)["params"]["a"]) == 20000  # type: ignore[index, call-overload]
    for bad in ("[" * 262143, '{"a":"\\ud800"}', "NaN", b"\xff", "1e400", "{} x"):
        with pytest.raises(JsonSyntaxError):
            jsonval.parse_document(bad)


@settings(max_examples=300, deadline=None)
@given(json_values, json_values, st.text(max_size=4))
def test_built_values_measure_exactly(base: object, item: object, key: str) -> None:
    try:
        item_box = jsonval.from_python(item, limits=False)
        obj = jsonval.from_python({"a": base, key: 1} if key != "a" else {"a": base}, limits=False)
        arr = jsonval.from_python([base], limits=False)
    except JsonTypeError:
        return
    for built in (jsonval.appended(arr, item_box), jsonval.appended(jsonval.parse("[]"), item_box),
                  jsonval.with_member(obj, key, item_box), jsonval.with_member(obj, "new!", item_box),
                  jsonval.with_member(jsonval.parse("{}"), key, item_box)):
        again = jsonval.measure(built.value)
        assert (built.size, built.nodes, built.depth) == (again.size, again.nodes, again.depth)
    assert "new!" not in obj.value  # type: ignore[operator]
    assert len(arr.value) == 1  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [{'a":': '":', "\\": "\\\\", '\\"': ['"', "\\", ":", "[", "]{"]}, ["\\\":x", {"[": {"}": []}}], "\\",
     {"": ""}, [[], {}, [[]], {"a": {}}], '{"a":1}', [1e300, -0.0, True, None, 18446744073709551615]],
)
def test_shape_from_encoding_matches_the_walk(value: object) -> None:
    walked = jsonval.from_python(value)
    shaped = jsonval.part_of(walked.value)
    assert (shaped.size, shaped.nodes, shaped.depth) == (walked.size, walked.nodes, walked.depth)


_SCALARS = (st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(st.characters(codec="utf-8"), max_size=6))
flat_values = _SCALARS | st.lists(_SCALARS, max_size=6) | st.dictionaries(st.text(max_size=4), _SCALARS, max_size=6)


@settings(max_examples=300, deadline=None)
@given(value=flat_values | json_values)
def test_part_of_and_from_python_size_flat_values_exactly(value: object) -> None:
    """The one-pass sizes of flat values (event payloads, replies) equal the encoder's and the walk's."""
    try:
        box = jsonval.from_python(value)
    except JsonTypeError:  # lone surrogates from st.text()
        return
    encoded = jsonval.encode(box)
    walked = jsonval.measure(box.value)
    assert (box.size, box.nodes, box.depth) == (len(encoded), walked.nodes, walked.depth)
    part = jsonval.part_of(box.value)
    assert (part.size, part.nodes, part.depth) == (box.size, box.nodes, box.depth)


def test_a_constant_part_is_boxed_without_the_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16: every guest of a restart reads its config's ``"state": null`` at its start; null, true and false
    are boxed as the encoder would box them (size, nodes, depth, cost) without running it."""
    expected = {value: jsonval._box(value, jsonval._encode_checked(value)) for value in (None, True, False)}
    encoded = record_calls(monkeypatch, jsonval, "_encode_checked")
    assert {value: jsonval.part_of(value) for value in (None, True, False)} == expected
    assert encoded == []


@pytest.mark.parametrize("text", ["", "hello", "a b~!{}[]:,", "x" * 300])
def test_a_plain_string_part_is_boxed_without_the_encoder(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """issue 16: a guest reads an event's topic and string members with ``sf_json_get_raw``; a printable ASCII
    string without quote or backslash is boxed as the encoder would box it (size, nodes, depth, cost) without it."""
    expected = jsonval._box(text, jsonval._encode_checked(text))
    encoded = record_calls(monkeypatch, jsonval, "_encode_checked")
    assert jsonval.part_of(text) == expected
    assert encoded == []


@pytest.mark.parametrize("text", ['a"b', "a\\b", "tab\there", "\x7f", "é", "\x00", "line\n"])
def test_other_string_parts_are_boxed_as_the_encoder_boxes_them(text: str) -> None:
    assert jsonval.part_of(text) == jsonval._box(text, jsonval._encode_checked(text))


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=40))
def test_every_ascii_string_part_is_the_encoders_box(text: str) -> None:
    assert jsonval.part_of(text) == jsonval._box(text, jsonval._encode_checked(text))
