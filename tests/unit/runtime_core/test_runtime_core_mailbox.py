"""Mailbox rules of runtime-protocol.md §8 and §6.9, on the Mailbox alone."""

from __future__ import annotations

import pytest

from wakeful.errors import MailboxFull
from wakeful.runtime.mailbox import DEDUP_WINDOW, MAILBOX_BYTES, MAILBOX_ENTRIES, Mailbox


def test_fifo_order_and_byte_accounting() -> None:
    box = Mailbox()
    for i in range(5):
        assert box.offer(f"e{i}", {"n": i}, 10 + i) is False
    assert len(box) == 5 and box.bytes == sum(10 + i for i in range(5))
    assert [box.pop()["n"] for _ in range(5)] == [0, 1, 2, 3, 4]
    assert box.pop() is None and box.bytes == 0


def test_entry_bound() -> None:
    box = Mailbox()
    for i in range(MAILBOX_ENTRIES):
        box.offer(f"e{i}", i, 1)
    with pytest.raises(MailboxFull):
        box.offer("one-more", 0, 1)
    assert len(box) == MAILBOX_ENTRIES


def test_byte_bound_counts_the_new_envelope() -> None:
    box = Mailbox()
    box.offer("a", 0, MAILBOX_BYTES - 100)
    box.offer("b", 0, 100)  # exactly at the bound: accepted
    with pytest.raises(MailboxFull):
        box.offer("c", 0, 1)
    box.pop()
    box.offer("c", 0, 1)


def test_duplicate_is_checked_before_fullness_and_after_consumption() -> None:
    box = Mailbox()
    for i in range(MAILBOX_ENTRIES):
        box.offer(f"e{i}", i, 1)
    assert box.offer("e3", 0, 10**9) is True  # full and oversized, still a duplicate
    while box.pop() is not None:
        pass
    assert box.offer("e0", 0, 1) is True  # consumed ids stay in the window
    assert len(box) == 0


def test_window_keeps_the_last_128_ids() -> None:
    box = Mailbox()
    for i in range(DEDUP_WINDOW + 1):
        box.offer(f"e{i}", i, 1)
        box.pop()
    assert box.is_duplicate("e0") is False  # evicted: the oldest of 129
    assert box.is_duplicate("e1") is True
    assert box.is_duplicate(f"e{DEDUP_WINDOW}") is True


def test_clear_forgets_entries_and_window() -> None:
    box = Mailbox()
    box.offer("x", 0, 5)
    box.clear()
    assert len(box) == 0 and box.bytes == 0 and not box.is_duplicate("x")
