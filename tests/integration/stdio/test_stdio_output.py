"""Output queues with an embedder that stops reading stdout (runtime-protocol.md §10; §16 item 11):
logs beyond the per-object bound are dropped and counted, control frames keep priority, data frames
alternate across objects, and the runtime's memory stays bounded (the session closes instead)."""

from __future__ import annotations

import base64
import time
from typing import Any

import stdio_guests as g

LOGGERS = 4


def test_stalled_reader_drops_logs_keeps_control_priority_and_alternates(compile_c: Any) -> None:
    logger = base64.b64encode(compile_c(g.LOGGER)).decode()
    child = g.RawChild()
    try:
        assert "result" in child.call("i", "sf.initialize", {"protocol_version": 1})
        for n in range(LOGGERS):
            child.call(f"l{n}", "sf.object.load", {"elf": logger, "config": {"count": 90, "letter": n, "linger_ms": 3000}})
            child.call(f"s{n}", "sf.object.start", {"object_id": f"o{n + 1}"})
        rss_early = 0
        time.sleep(2.0)  # the embedder stops reading; the loggers keep logging (10 per second each)
        rss_early = child.rss_kib()
        time.sleep(7.0)
        rss_late = child.rss_kib()
        for n in range(20):
            child.send(f"q{n}", "sf.stats", {})
        time.sleep(0.3)
        frames = child.frames(timeout=3.0, until_id="q19")
        frames += child.frames(timeout=0.5)
        responses = [i for i, f in enumerate(frames) if str(f.get("id", "")).startswith("q")]
        assert len(responses) == 20
        # §10 writer order: once control frames are queued, at most one data frame per 8 control frames
        first, last = responses[0], responses[-1]
        between = [f for f in frames[first:last] if f.get("method") == "sf.log"]
        assert len(between) <= 20 // 8 + 1, len(between)
        stats = frames[responses[0]]["result"]
        assert stats["output"]["dropped_data_notifications"] > 0
        assert stats["output"]["queued_object_bytes"] <= LOGGERS * 65_536
        # round robin: consecutive queued log frames come from different objects
        logs = [f["params"]["object_id"] for f in frames[last:] if f.get("method") == "sf.log"]
        tail = logs[: 2 * LOGGERS]
        assert len(tail) == 2 * LOGGERS and all(a != b for a, b in zip(tail, tail[1:], strict=False)), tail
        assert rss_late - rss_early < 8_192, (rss_early, rss_late)  # KiB: no growth while stalled
        dropped = child.call("d", "sf.stats", {})["result"]["output"]["dropped_data_notifications"]
        assert dropped >= stats["output"]["dropped_data_notifications"]
        # the guests saw SF_LIMIT for every dropped log: each exits with its count of refusals
        refused = 0
        deadline = time.monotonic() + 10
        for n in range(LOGGERS):
            while True:
                status = child.call(f"g{n}", "sf.object.get", {"object_id": f"o{n + 1}"})["result"]
                if status["state"] == "exited" or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert status["state"] == "exited", status
            refused += status["outcome"]["exit_code"]
        assert refused == child.call("e", "sf.stats", {})["result"]["output"]["dropped_data_notifications"] > 0
    finally:
        child.close()


def test_requests_while_stalled_close_the_session_with_bounded_memory() -> None:
    # §4: when an early error (here BUSY) cannot be queued because the control queue is full, the session
    # closes — so an embedder that sends but never reads cannot make the runtime buffer without bound
    child = g.RawChild()
    try:
        child.call("i", "sf.initialize", {"protocol_version": 1})
        rss_before = child.rss_kib()
        pad = "x" * 3000
        sent = 0
        try:
            for n in range(5000):
                child.send(f"r{n}-{pad}"[:120], "sf.object.list", {"limit": 256})
                sent += 1
                if n % 200 == 0:
                    assert child.rss_kib() - rss_before < 32_768
        except BrokenPipeError:
            pass
        assert sent < 5000  # the runtime stopped reading: it closed the session
        assert child.proc.wait(10) == 0  # issue 21: the session closes with exit 0, as spinfoam
    finally:
        child.close()
