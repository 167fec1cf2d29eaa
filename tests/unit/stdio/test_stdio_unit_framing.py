"""Line splitting, the outgoing bound and error objects (runtime-protocol.md §3, §5), plus the session's
handling of an oversized notification and log (dropped and counted)."""

from __future__ import annotations

import asyncio

import pytest

from wakeful.runtime import jsonval
from wakeful.runtime.core import ObjectStatus, RuntimeOptions
from wakeful.runtime.framing import (
    MAX_FRAME_BYTES,
    FrameTooLong,
    LineSplitter,
    encode_frame,
    error_object,
    notification,
)
from wakeful.runtime.stdio import Session


def test_splitter_limits_include_the_newline() -> None:
    s = LineSplitter()
    exact = b"a" * (MAX_FRAME_BYTES - 1) + b"\n"
    assert s.feed(exact[:1000]) == [] and s.partial
    assert s.feed(exact[1000:]) == [b"a" * (MAX_FRAME_BYTES - 1)] and not s.partial
    with pytest.raises(FrameTooLong):
        LineSplitter().feed(b"a" * MAX_FRAME_BYTES + b"\n")
    with pytest.raises(FrameTooLong):  # detected before the newline arrives
        LineSplitter().feed(b"a" * MAX_FRAME_BYTES)
    assert LineSplitter().feed(b"x\ny\n\nz") == [b"x", b"y", b""]


def test_encode_frame_bound_and_message_cut() -> None:
    assert encode_frame({"a": "é"}) == '{"a":"é"}\n'.encode()
    assert encode_frame({"p": "x" * (MAX_FRAME_BYTES - 8)}) is None  # 262,144 bytes before the newline
    assert encode_frame({"p": "x" * (MAX_FRAME_BYTES - 9)}) is not None
    err = error_object("BUSY", "é" * 3000)
    assert err["code"] == -32001 and err["data"] == {"kind": "BUSY"}
    assert len(err["message"].encode()) <= 4096 and err["message"] == "é" * 2048
    assert error_object("PARSE_ERROR", "x\ud800")["message"] == "x?"


def test_session_drops_and_counts_oversized_data_and_notifications() -> None:
    asyncio.run(_oversized())


async def _oversized() -> None:
    session = Session(RuntimeOptions())
    assert session._on_log("o1", "x" * MAX_FRAME_BYTES) is False
    assert session.outbox.dropped == 1
    assert session._on_log("o1", "hello") is True and session.outbox.data_bytes > 0
    status = ObjectStatus("o1", "0" * 64, "failed", "none", 0, {"error": "e" * MAX_FRAME_BYTES,
                                                                  "kind": "PROGRAM_FAULT"})
    session._on_state(status)  # §3: a notification over the bound is dropped and counted
    assert session.outbox.dropped == 2 and session.outbox.control_frames == 0
    assert session.outbox.data_bytes == 0  # §7.1: the ended object's data frames were purged
    assert notification("sf.log", {})["method"] == "sf.log"


def test_room_never_lets_a_partial_line_pass_the_bound() -> None:
    s = LineSplitter()
    assert s.room == MAX_FRAME_BYTES
    s.feed(b"a" * (MAX_FRAME_BYTES - 1))
    assert s.room == 1
    assert s.feed(b"\n") == [b"a" * (MAX_FRAME_BYTES - 1)] and s.room == MAX_FRAME_BYTES


def test_stats_bytes_equal_the_encoded_value() -> None:
    """``sf.stats`` without detail is built from a byte template: the same bytes as encoding its value."""
    asyncio.run(_stats_bytes())


async def _stats_bytes() -> None:
    session = Session(RuntimeOptions())
    session.outbox.dropped, session.calls.ignored = 3, 2
    assert session._on_log("o1", "hello") is True  # a queued data frame: non-zero queued_object_bytes
    session.rt.hostcalls.ignored = 5
    fast = session.methods.stats({})
    value = session.methods.stats_value()
    assert isinstance(fast, bytes) and value["host"]["ignored_host_responses"] == 7
    parsed = jsonval.parse_document(fast)
    assert list(parsed) == list(value) and parsed["output"]["queued_object_bytes"] > 0
    value["uptime_ms"] = parsed["uptime_ms"]  # the clock may tick between the two calls
    assert fast == jsonval.encode(value)
    session.detail = True  # with detail the value path (and its ``wakeful`` member) answers
    assert isinstance(session.methods.stats({}), dict)
