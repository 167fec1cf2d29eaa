"""Handle memory is charged by estimated Python size (issue 14, reproduction 6; sdk.md §5 guards;
decisions-runtime-helpers.md "Handle memory").

A clang-built guest (tests/support/guests/handle_filler.c) parses a maximal JSON object (16 KB, about 2,000
keys) into each of its 128 handles. Counting encoded bytes, that was 2 MiB per object while the process held
20-odd MiB; now the accounting reports the Python size, the per-object guard stops the guest with SF_LIMIT,
the runtime-wide guard stops a second object, and the runtime keeps running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import rtcore_guests as g

from wakeful.runtime import ManualClock, Runtime, RuntimeOptions
from wakeful.runtime.handles import MAX_OBJECT_HANDLE_BYTES, SF_LIMIT

FILLER = Path(__file__).resolve().parents[2] / "support" / "guests" / "handle_filler.c"
MAXIMAL = 16_384  # the encoded size of each parsed object (within a few bytes)
MIB = 1 << 20


@pytest.fixture(scope="module")
def filler(compile_c: Any) -> bytes:
    return bytes(compile_c(FILLER.read_text(), name="handle_filler.c"))


class _Node:
    def __init__(self, **options: Any) -> None:
        self.clock = ManualClock()
        self.logs: dict[str, list[str]] = {}
        self.rt = Runtime(RuntimeOptions(**options), host_handler=g.refuse, clock=self.clock,
                          on_log=lambda oid, text: self.logs.setdefault(oid, []).append(text) and None)

    def fill(self, elf: bytes, count: int = 128) -> tuple[str, int, int]:
        """Start a filler; return (object id, handles filled, first failure status or 0)."""
        oid = g.load_started(self.rt, elf, config={"count": count})
        g.settle(self.rt, self.clock, until=lambda: bool(self.logs.get(oid)))
        words = self.logs[oid][0].split()
        assert words[0] == "filled", self.logs[oid]
        return oid, int(words[1]), int(words[3])

    def handle_bytes(self, oid: str) -> int:
        return int(self.rt.inspect_nowait(oid)["memory"]["handle_bytes"])

    def live_bytes(self) -> int:
        return int(self.rt.stats_nowait()["wakeful"]["memory"]["handle_bytes"])

    def drop_all(self, oid: str) -> str:
        self.rt.deliver_nowait(oid, "e-drop", "drop", {})
        g.settle(self.rt, self.clock, until=lambda: self.rt.get_nowait(oid).state == "exited")
        return self.logs[oid][-1]


def test_a_maximal_object_is_charged_its_python_size(filler: bytes) -> None:
    """Ten handles: the charge per handle is about 11x the encoded size (RSS says 186 KB), not 16 KB."""
    node = _Node()
    oid, filled, status = node.fill(filler, count=10)
    assert (filled, status) == (10, 0)
    per_handle = node.handle_bytes(oid) / 10
    assert 8 * MAXIMAL < per_handle < 16 * MAXIMAL, per_handle
    assert node.live_bytes() == node.handle_bytes(oid)


def test_128_maximal_objects_hit_the_object_guard_with_sf_limit(filler: bytes) -> None:
    """The object guard (16 MiB) refuses the guest's parse with SF_LIMIT long before 128 such handles
    (about 21 MiB); the guest runs on, and after dropping its handles it can parse again."""
    node = _Node()
    oid, filled, status = node.fill(filler)
    assert status == SF_LIMIT and 60 <= filled < 128, (filled, status)
    charged = node.handle_bytes(oid)
    assert MAX_OBJECT_HANDLE_BYTES - 2 * MIB < charged <= MAX_OBJECT_HANDLE_BYTES
    assert node.drop_all(oid) == "after drop 0 parsed 1"
    assert node.rt.get_nowait(oid).outcome == {"exit_code": filled}
    assert node.live_bytes() == 0


def test_the_runtime_guard_stops_the_next_object(filler: bytes) -> None:
    """With a 40 MiB runtime guard, two objects fill their 16 MiB; a third gets SF_LIMIT once the runtime is
    full, and a fourth, loaded after the first one ended, parses again: the runtime never stopped."""
    node = _Node(max_handle_bytes=40 * MIB)
    first, a, sa = node.fill(filler)
    _, b, sb = node.fill(filler)
    third, c, sc = node.fill(filler)
    assert sa == sb == sc == SF_LIMIT and a == b and 0 < c < a, (a, b, c)
    assert 38 * MIB < node.live_bytes() <= 40 * MIB
    assert node.handle_bytes(third) < MAX_OBJECT_HANDLE_BYTES - 2 * MIB
    node.drop_all(first)
    _, d, sd = node.fill(filler, count=5)
    assert (d, sd) == (5, 0)
