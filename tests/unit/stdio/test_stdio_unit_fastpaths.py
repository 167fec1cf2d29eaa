"""The stdio fast paths give the same bytes and the same refusals as the checked paths they shortcut
(runtime-protocol.md §3 framing, §4 step 1 parsing, §9.2 host.call frames)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wakeful.runtime import jsonval
from wakeful.runtime.framing import (
    MAX_FRAME_BYTES,
    Encoded,
    encode_frame,
    encode_response,
    encode_value,
    parse_frame,
    response,
)
from wakeful.runtime.hostcall import HostCall
from wakeful.runtime.stdio_hostcalls import _fast_frame, _frame

_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.floats(allow_nan=False,
                                                                                   allow_infinity=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(request_id=_TEXT, result=_JSON)
def test_response_fast_path_is_byte_identical(request_id: str, result: Any) -> None:
    assert encode_response(request_id, result) == encode_frame(response(request_id, result))
    frame = encode_frame(response(request_id, result))
    assert frame is not None and parse_frame(frame[:-1]) == jsonval.parse_document(frame[:-1])


def test_pre_encoded_results_and_the_outgoing_bound() -> None:
    assert encode_response("a\u2028\"é", Encoded(b'{"accepted":true}')) == encode_frame(
        response("a\u2028\"é", {"accepted": True}))
    head = len(encode_response("x", "") or b"") - 1  # bytes around an empty string result, before the newline
    assert encode_response("x", "a" * (MAX_FRAME_BYTES - head - 1)) is not None  # strictly below the bound
    assert encode_response("x", "a" * (MAX_FRAME_BYTES - head)) is None
    assert encode_frame(response("x", "a" * (MAX_FRAME_BYTES - head))) is None
    with pytest.raises(jsonval.JsonTypeError):  # not a JSON value: refused like the checked path
        encode_response("x", {"bad": float("nan")})


@settings(max_examples=200, deadline=None)
@given(value=_JSON)
def test_plain_encoder_is_byte_identical(value: Any) -> None:
    assert encode_value(value) == jsonval.encode(value)
    assert encode_value(jsonval.measure(value)) == jsonval.encode(value)  # a box is encoded as its value


def test_plain_encoder_refuses_what_the_checked_encoder_refuses() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    bads: list[Any] = [float("nan"), float("inf"), "a\ud800", {"k": object()}, cycle]
    for bad in bads:
        with pytest.raises(jsonval.JsonError):
            jsonval.encode(bad)
        with pytest.raises(jsonval.JsonError):
            encode_value(bad)


@pytest.mark.parametrize("line", [
    b'{"a":"\\ud800"}',  # lone surrogate escape
    b'{"a":NaN}', b'[Infinity]', b'{"a":1e400}',
    b'{"a":"\xff"}',  # invalid UTF-8
    b"[" * 5000 + b"]" * 5000,  # deep enough to exhaust the parser
    b"[" * 150 + b"]" * 150 + b" x",
    b'{"a":1} {"b":2}', b"",
])
def test_parse_fast_path_refuses_what_the_strict_parse_refuses(line: bytes) -> None:
    with pytest.raises(jsonval.JsonSyntaxError):
        jsonval.parse_document(line)
    with pytest.raises(jsonval.JsonSyntaxError):
        parse_frame(line)


@pytest.mark.parametrize("line", [
    b'{"a":"\\ud83d\\ude00","b":[1,2.5,-3,18446744073709551616]}', b' {"a":"\\u00e9"} ', b"[" * 180 + b"]" * 180,
])
def test_parse_fast_path_accepts_what_the_strict_parse_accepts(line: bytes) -> None:
    assert parse_frame(line) == jsonval.parse_document(line)


def _same_parse(line: bytes) -> None:
    """``parse_frame`` returns what ``parse_document`` returns, or refuses it the same way."""
    try:
        expected = jsonval.parse_document(line)
    except jsonval.JsonSyntaxError:
        with pytest.raises(jsonval.JsonSyntaxError):
            parse_frame(line)
        return
    got = parse_frame(line)
    assert got == expected and jsonval.encode(got) == jsonval.encode(expected)  # -0.0, int vs float kept


@settings(max_examples=300, deadline=None)
@given(value=_JSON, pad=st.sampled_from(["", " ", "\t", "\r", "\n "]), tail=st.sampled_from(["", "x", ",1", "}"]))
def test_parse_fast_path_equals_the_strict_parse(value: Any, pad: str, tail: str) -> None:
    text = jsonval.encode(value).decode("utf-8")
    _same_parse(text.encode("utf-8"))
    _same_parse((pad + text + pad).encode("utf-8"))
    _same_parse((text + tail).encode("utf-8"))


@settings(max_examples=300, deadline=None)
@given(line=st.binary(max_size=40) | st.sampled_from([b"tru", b"nul", b"-", b"01", b"1.", b'"\\x"', b"[1,]", b"{,}"]))
def test_parse_fast_path_on_arbitrary_bytes(line: bytes) -> None:
    _same_parse(line)


def _call(arguments: Any, *, capability: str = "benchmark.ack", label: str | None = None) -> HostCall:
    return HostCall(id="sf:0123:7", object_id="o-\u00e9\"1", label=label, capability=capability,
                    arguments=arguments, timeout_ms=5000, deadline_unix_ms=1_790_000_000_123)


@settings(max_examples=200, deadline=None)
@given(arguments=_JSON, label=st.none() | _TEXT)
def test_host_call_template_is_byte_identical(arguments: Any, label: str | None) -> None:
    call = _call(arguments, label=label)
    assert _fast_frame(call, label) == _frame(call, label)


def test_host_call_template_defers_odd_values_to_the_checked_path() -> None:
    assert _fast_frame(_call(None, capability="a\ud800"), None) == b""  # the checked path refuses it
    with pytest.raises(jsonval.JsonTypeError):
        _frame(_call(None, capability="a\ud800"), None)
    assert _fast_frame(_call((1, 2)), None) == _frame(_call((1, 2)), None)  # whatever the encoder makes of it
    big = _call("a" * MAX_FRAME_BYTES)
    assert _fast_frame(big, None) is None and _frame(big, None) is None
