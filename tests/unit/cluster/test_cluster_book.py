"""``LeaseBook`` (harness.md §19.2 self-fence) on an injected monotonic clock: a lease counts as held only while
the last renewal that succeeded was sent less than TTL − renew ago."""

from __future__ import annotations

import pytest

from wakeful.harness.placement import LeaseBook

S = 1_000_000_000


class Mono:
    def __init__(self) -> None:
        self.ns = 100 * S

    def __call__(self) -> int:
        return self.ns


def test_a_claimed_lease_is_held_until_the_fence_period_passes_without_renewal() -> None:
    mono = Mono()
    book = LeaseBook(mono, 20 * S)  # TTL 30 s − renew 10 s
    book.add("a", 3, mono())
    assert book.holds("a") and book.epoch("a") == 3 and book.snapshot() == {"a": 3}
    mono.ns += 20 * S - 1
    assert book.holds("a")
    mono.ns += 1
    assert not book.holds("a") and book.epoch("a") is None and book.snapshot() == {}
    assert book.expire() == ["a"] and len(book) == 0


def test_a_renewal_proves_the_lease_from_when_it_was_sent_not_when_it_returned() -> None:
    mono = Mono()
    book = LeaseBook(mono, 20 * S)
    book.add("a", 1, mono())
    sent = mono() + 15 * S
    mono.ns = sent + 4 * S  # the answer came back 4 s after the request left
    assert book.renewed({"a": 1}, ["a"], sent) == []
    mono.ns = sent + 20 * S - 1
    assert book.holds("a")
    mono.ns = sent + 20 * S
    assert not book.holds("a")


def test_a_renewal_that_finds_the_lease_taken_loses_it_at_once() -> None:
    mono = Mono()
    book = LeaseBook(mono, 20 * S)
    book.add("a", 1, mono())
    book.add("b", 1, mono())
    assert book.renewed({"a": 1, "b": 1}, ["b"], mono()) == ["a"]
    assert not book.holds("a") and book.holds("b")


def test_a_late_answer_for_an_older_epoch_changes_nothing() -> None:
    mono = Mono()
    book = LeaseBook(mono, 20 * S)
    book.add("a", 1, mono())
    book.add("a", 2, mono() + S)  # re-claimed meanwhile (after expiry) at a new epoch
    assert book.renewed({"a": 1}, [], mono()) == []  # the answer about epoch 1 does not drop epoch 2
    assert book.epoch("a") == 2
    mono.ns += 30 * S
    assert book.renewed({"a": 2}, ["a"], mono() - 30 * S) == []  # an old proof never moves it backwards
    assert not book.holds("a")


def test_drop_forgets_and_bad_periods_are_refused() -> None:
    mono = Mono()
    book = LeaseBook(mono, S)
    book.add("a", 1, mono())
    book.drop(["a", "unknown"])
    assert not book.holds("a")
    with pytest.raises(ValueError):
        LeaseBook(mono, 0)


def test_removals_count_every_lease_forgotten_and_expire_still_finds_the_oldest_proof() -> None:
    """issue 16: ``removals`` tells the fence when to look at its objects again; ``expire`` returns at once while no
    proof can be old enough, and still finds a lease whose renewals stopped while others went on."""
    mono = Mono()
    book = LeaseBook(mono, 20 * S)
    book.add("a", 1, mono())
    book.add("b", 1, mono())
    book.add("c", 1, mono())
    assert book.removals == 0
    mono.ns += 15 * S
    assert book.renewed({"a": 1, "b": 1}, ["a"], mono()) == ["b"]  # b was taken; c is not renewed at all
    assert book.removals == 1
    mono.ns += 5 * S - 1
    assert book.expire() == [] and book.removals == 1
    mono.ns += 1
    assert book.expire() == ["c"] and book.removals == 2  # c's proof is 20 s old; a's only 5 s
    book.drop(["a", "gone"])
    assert book.removals == 3 and len(book) == 0
    assert book.expire() == []
