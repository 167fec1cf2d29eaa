"""Exit 0 on every shutdown path spinfoam ends with 0, with a never-read stdout and a request flood (issue 21
item 3; runtime-protocol.md §2, §4, §12). Over real pipes against the current entry point (stdio_guests.ENTRY).

On main the path where the flood itself closes the session (an early error that cannot be queued, §4) exited 1.
The bound is §12's: at most 2 s for the writer to flush, plus a generous smoke margin (§16 item 10: wall-clock
checks only as smoke bounds).
"""

from __future__ import annotations

import base64
import signal
import subprocess
import time
from typing import Any

import pytest
import stdio_guests as g

from wakeful.runtime.stdio import FLUSH_SECONDS

SMOKE_SECONDS = FLUSH_SECONDS + 3.0
OBJECTS = 60  # each `sf.object.list` answer is then ~8 KB: 40 of them outgrow pipe, write and control queue
FLOOD = 40  # below the 48 request slots: these stay queued, nothing closes the session by itself
PATHS = ["flood_closes_the_session", "stdin_eof", "sigterm", "sigint", "shutdown_then_eof"]


def _stalled_child(compile_c: Any) -> g.RawChild:
    """A child with OBJECTS loaded and FLOOD big responses queued; its stdout is never read again."""
    child = g.RawChild()
    child.call("i", "sf.initialize", {"protocol_version": 1})
    elf = base64.b64encode(compile_c(g.SLEEPER)).decode()
    for n in range(OBJECTS):
        assert "result" in child.call(f"l{n}", "sf.object.load", {"elf": elf})
    for n in range(FLOOD):
        child.send(f"f{n}", "sf.object.list", {"limit": 256})
    return child


def _flood_until_closed(child: g.RawChild) -> int:
    """Keep sending until the runtime stops reading and exits (the write then fails)."""
    sent = 0
    try:
        for n in range(100_000):
            child.send(f"x{n}", "sf.stats", {})
            sent += 1
    except BrokenPipeError:
        pass
    return sent


@pytest.mark.integration
@pytest.mark.parametrize("path", PATHS)
def test_stalled_reader_and_flood_exit_0_within_the_bound(compile_c: Any, path: str) -> None:
    child = _stalled_child(compile_c)
    try:
        started = time.monotonic()
        if path == "flood_closes_the_session":
            assert _flood_until_closed(child) < 100_000  # the runtime closed the session
        elif path in ("sigterm", "sigint"):
            child.proc.send_signal(signal.SIGTERM if path == "sigterm" else signal.SIGINT)
        else:
            if path == "shutdown_then_eof":
                child.send("bye", "sf.shutdown", {})  # its response can never be written
            child.stdin.close()
        try:
            code = child.proc.wait(SMOKE_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{path}: still running {time.monotonic() - started:.1f} s later") from None
        assert code == 0, path
    finally:
        child.close()
