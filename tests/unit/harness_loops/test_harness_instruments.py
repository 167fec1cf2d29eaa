"""The node's one subscription list (issue 15, in the manner of trio's instruments): hooks are called in the order
instruments were added, each guarded; an instrument may define only some hooks."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from wakeful.harness import Instrument
from wakeful.harness.instruments import HOOKS, Instruments


class Recorder(Instrument):
    def __init__(self, name: str, seen: list[tuple[str, str, str]]) -> None:
        self.name, self.seen = name, seen

    def message(self, message_id: str) -> None:
        self.seen.append((self.name, "message", message_id))

    def transition(self, loop_id: str) -> None:
        self.seen.append((self.name, "transition", loop_id))

    def admitted(self, loop_id: str) -> None:
        self.seen.append((self.name, "admitted", loop_id))

    def claimed(self, agent_id: str) -> None:
        self.seen.append((self.name, "claimed", agent_id))


class Raises(Instrument):
    def transition(self, loop_id: str) -> None:
        raise RuntimeError(f"broken observer of {loop_id}")


def test_every_hook_reaches_every_instrument_in_the_order_added() -> None:
    seen: list[tuple[str, str, str]] = []
    fan = Instruments()
    fan.add(Recorder("a", seen))
    fan.add(Recorder("b", seen))
    for hook in HOOKS:
        getattr(fan, hook)("x1")
    assert seen == [(name, hook, "x1") for hook in HOOKS for name in ("a", "b")]


def test_a_raising_instrument_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple[str, str, str]] = []
    fan = Instruments()
    fan.add(Raises())
    fan.add(Recorder("after", seen))
    with caplog.at_level(logging.ERROR, logger="wakeful.harness"):
        fan.transition("lp1")
    assert seen == [("after", "transition", "lp1")]
    assert any("Raises failed in transition(lp1)" in r.getMessage() and r.exc_info for r in caplog.records)


def test_hooks_are_optional_adding_twice_is_once_and_removing_ends_it() -> None:
    admitted: list[str] = []
    only_admitted = SimpleNamespace(admitted=admitted.append)  # any object with some of the hooks
    fan = Instruments()
    fan.add(only_admitted)
    fan.add(only_admitted)
    fan.message("m1")
    fan.admitted("lp1")
    assert admitted == ["lp1"] and only_admitted in fan
    fan.remove(only_admitted)
    fan.remove(only_admitted)  # not subscribed any more: ignored
    fan.admitted("lp2")
    assert admitted == ["lp1"] and only_admitted not in fan


def test_the_base_class_hooks_do_nothing() -> None:
    base = Instrument()
    for hook in HOOKS:
        assert getattr(base, hook)("x") is None
