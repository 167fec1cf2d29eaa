"""Handle tables (sdk.md §5): 128 live per object, one runtime counter never reused, the memory guards."""

from __future__ import annotations

from wakeful.runtime import jsonval
from wakeful.runtime.handles import MAX_HANDLE, MAX_LIVE, SF_INVALID, SF_LIMIT, HandleSpace, entry_size


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
    blob, text = b"x" * 60, jsonval.parse('"' + "y" * 38 + '"')
    space = HandleSpace(max_bytes=entry_size(blob) + entry_size(text))
    a, b = space.table(), space.table()
    assert a.add(blob) > 0
    assert b.add(b"y" * 61) == SF_LIMIT  # one byte more than the room left
    assert b.add(text) > 0  # exactly the guard
    assert space.live_bytes == space.max_bytes
    assert a.add(b"") == SF_LIMIT
    a.clear()
    assert space.live_bytes == entry_size(text) and space.live_handles == 1
    assert a.add(blob) > 0


def test_the_object_guard_caps_one_table_only() -> None:
    blob = b"x" * 1000
    space = HandleSpace(object_max_bytes=3 * entry_size(blob))
    a, b = space.table(), space.table()
    assert [a.add(blob) > 0 for _ in range(4)] == [True, True, True, False]
    assert b.add(blob) > 0  # another object has its own budget
    assert a.bytes == 3 * entry_size(blob) and space.live_bytes == 4 * entry_size(blob)


def test_replace_respects_the_guard_and_keeps_accounts() -> None:
    small, middle, big = jsonval.parse("[]"), jsonval.parse("[1,2,3]"), jsonval.parse("[1,2,3,4,5]")
    space = HandleSpace(max_bytes=entry_size(middle))
    table = space.table()
    h = table.add(small)
    assert table.replace(h, middle) == 0
    assert table.bytes == entry_size(middle) == space.live_bytes
    assert table.replace(h, big) == SF_LIMIT
    assert table.json(h) == middle
    assert table.replace(h, jsonval.parse("1")) == 0
    assert space.live_bytes == entry_size(jsonval.parse("1"))
    space.object_max_bytes = entry_size(middle) - 1  # the object guard applies too
    assert table.replace(h, middle) == SF_LIMIT


def test_json_lookup_refuses_bytes() -> None:
    table = HandleSpace().table()
    h = table.add(b"{}")
    assert table.json(h) is None and table.get(h) == b"{}"
