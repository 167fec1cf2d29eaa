"""Handle tables (sdk.md §5): 128 live per object, one runtime counter never reused, the byte guard."""

from __future__ import annotations

from wakeful.runtime import jsonval
from wakeful.runtime.handles import MAX_HANDLE, MAX_LIVE, SF_INVALID, SF_LIMIT, HandleSpace


def test_numbers_come_from_one_counter_and_are_never_reused() -> None:
    space = HandleSpace()
    a, b = space.table(), space.table()
    h1 = a.add(b"x")
    h2 = b.add(b"y")
    assert (h1, h2) == (1, 2)
    assert a.drop(h1) == 0
    assert a.add(b"z") == 3
    assert a.drop(h1) == SF_INVALID  # dropped stays unknown
    assert a.get(h2) is None and b.get(h2) == b"y"  # foreign is unknown
    assert b.drop(h1) == SF_INVALID


def test_exactly_128_live_then_limit_and_drop_frees_a_slot() -> None:
    space = HandleSpace()
    table = space.table()
    handles = [table.add(b"") for _ in range(MAX_LIVE)]
    assert all(h > 0 for h in handles)
    before = space.next
    assert table.add(b"") == SF_LIMIT
    assert space.next == before  # a refused allocation consumes no number
    assert table.drop(handles[0]) == 0
    assert table.add(b"") > 0


def test_counter_exhaustion_is_a_limit() -> None:
    space = HandleSpace(first=MAX_HANDLE - 1)
    table = space.table()
    assert table.add(b"") == MAX_HANDLE - 1
    assert table.add(b"") == MAX_HANDLE
    assert table.add(b"") == SF_LIMIT
    assert HandleSpace().table().add(b"") == 1


def test_runtime_byte_guard_counts_every_table() -> None:
    space = HandleSpace(max_bytes=100)
    a, b = space.table(), space.table()
    assert a.add(b"x" * 60) > 0
    assert b.add(b"y" * 41) == SF_LIMIT
    assert b.add(jsonval.parse('"' + "y" * 38 + '"')) > 0  # 40 encoded bytes: exactly 100
    assert space.live_bytes == 100
    assert a.add(b"z") == SF_LIMIT
    a.clear()
    assert space.live_bytes == 40 and space.live_handles == 1
    assert a.add(b"z" * 60) > 0


def test_replace_respects_the_guard_and_keeps_accounts() -> None:
    space = HandleSpace(max_bytes=10)
    table = space.table()
    h = table.add(jsonval.parse("[]"))
    assert table.replace(h, jsonval.parse("[1,2,3]")) == 0
    assert table.bytes == 7 == space.live_bytes
    assert table.replace(h, jsonval.parse("[1,2,3,4,5]")) == SF_LIMIT
    assert table.json(h) == jsonval.parse("[1,2,3]")
    assert table.replace(h, jsonval.parse("1")) == 0
    assert space.live_bytes == 1


def test_json_lookup_refuses_bytes() -> None:
    table = HandleSpace().table()
    h = table.add(b"{}")
    assert table.json(h) is None and table.get(h) == b"{}"
