"""Observers of a node, in the manner of trio's instruments: one subscription list, named hooks, fixed points.

An observer subclasses ``Instrument`` (or is any object with some of its methods) and subscribes with
``node.add_instrument(x)``; ``node.remove_instrument(x)`` ends it. Each hook is called on the event loop right
after the commit it reports (harness.md §2.7: best effort, after commit): it must not block or await — it spawns
its own work. A hook that raises is logged; the node and the other instruments carry on.
"""

from __future__ import annotations

import logging

__all__ = ["HOOKS", "Instrument", "Instruments"]

log = logging.getLogger("wakeful.harness")

HOOKS = ("message", "transition", "admitted", "claimed")


class Instrument:
    """Base class of a node observer; override the hooks you need (the others do nothing)."""

    def message(self, message_id: str) -> None:
        """A message for an agent committed (a wake, interfaces.md §5): hand it to the wake handlers."""

    def transition(self, loop_id: str) -> None:
        """A Loop's state changed and committed (§2.7): re-read the Loop."""

    def admitted(self, loop_id: str) -> None:
        """A new event for the Loop committed (§10.2); duplicates are not reported."""

    def claimed(self, agent_id: str) -> None:
        """This node claimed the agent's lease (§19.2, cluster only)."""


class Instruments(Instrument):
    """The node's subscription list; calling one of its hooks calls that hook of every instrument, in the order
    they were added, each guarded."""

    def __init__(self) -> None:
        self._instruments: list[object] = []

    def add(self, instrument: object) -> None:
        """Subscribe ``instrument``; adding one that is subscribed already does nothing."""
        if not any(x is instrument for x in self._instruments):
            self._instruments.append(instrument)

    def remove(self, instrument: object) -> None:
        """Unsubscribe ``instrument``; removing one that is not subscribed does nothing."""
        self._instruments = [x for x in self._instruments if x is not instrument]

    def __contains__(self, instrument: object) -> bool:
        return any(x is instrument for x in self._instruments)

    def message(self, message_id: str) -> None:
        self._call("message", message_id)

    def transition(self, loop_id: str) -> None:
        self._call("transition", loop_id)

    def admitted(self, loop_id: str) -> None:
        self._call("admitted", loop_id)

    def claimed(self, agent_id: str) -> None:
        self._call("claimed", agent_id)

    def _call(self, hook: str, arg: str) -> None:
        for instrument in list(self._instruments):
            method = getattr(instrument, hook, None)
            if method is None:
                continue
            try:
                method(arg)
            except Exception:
                log.exception("instrument %s failed in %s(%s)", type(instrument).__name__, hook, arg)
