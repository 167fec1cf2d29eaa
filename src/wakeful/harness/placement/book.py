"""What a node believes it holds: agent → lease epoch and the last proof of it on the node's monotonic clock.

harness.md §19.2 self-fence: a lease counts as held only while the last renewal that succeeded was *sent* less
than ``TTL − renew`` ago (monotonic), so the node stops acting before the store clock lets anyone else claim.
Thread-safe: the renewer thread writes proofs, the event loop reads them on every host call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

__all__ = ["LeaseBook"]


@dataclass(slots=True)
class _Held:
    epoch: int
    proof_ns: int  # monotonic reading taken before the last successful claim/renewal was sent


class LeaseBook:
    """``holds(agent)`` is the node's answer to "may I act for this agent now?".

    ``removals`` counts the leases forgotten (expired, lost, dropped): a fence that found nothing to unload need
    not look again until it rises or a new object is loaded (issue 16: an idle node's fence is O(1), not per Loop).
    """

    def __init__(self, monotonic_ns: Callable[[], int], fence_after_ns: int) -> None:
        if fence_after_ns <= 0:
            raise ValueError("fence_after_ns must be positive")
        self._mono = monotonic_ns
        self.fence_after_ns = fence_after_ns
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self.removals = 0
        # a lower bound of every held proof (None: nothing held): ``expire`` has nothing to do while it is younger
        # than the fence period, so the fence's every-2.5 s call does not walk the agents
        self._oldest_ns: int | None = None

    def add(self, agent_id: str, epoch: int, sent_ns: int) -> None:
        """A claim at ``epoch`` succeeded; ``sent_ns`` was read before it was sent."""
        with self._lock:
            self._held[agent_id] = _Held(epoch, sent_ns)
            self._oldest_ns = sent_ns if self._oldest_ns is None else min(self._oldest_ns, sent_ns)

    def renewed(self, sent: Mapping[str, int], kept: Iterable[str], sent_ns: int) -> list[str]:
        """Apply a renewal of ``sent`` ({agent: epoch}) of which ``kept`` came back; returns the agents lost
        (the store answered and the lease was not ours at that epoch any more)."""
        kept_set = set(kept)
        lost = []
        with self._lock:
            for agent_id, epoch in sent.items():
                held = self._held.get(agent_id)
                if held is None or held.epoch != epoch:
                    continue  # released or re-claimed meanwhile
                if agent_id in kept_set:
                    held.proof_ns = max(held.proof_ns, sent_ns)
                else:
                    del self._held[agent_id]
                    lost.append(agent_id)
            self.removals += len(lost)
            self._oldest_ns = min((h.proof_ns for h in self._held.values()), default=None)
        return lost

    def holds(self, agent_id: str) -> bool:
        with self._lock:
            held = self._held.get(agent_id)
            return held is not None and self._mono() - held.proof_ns < self.fence_after_ns

    def epoch(self, agent_id: str) -> int | None:
        """The epoch this node believes, while it still holds the lease."""
        with self._lock:
            held = self._held.get(agent_id)
            if held is None or self._mono() - held.proof_ns >= self.fence_after_ns:
                return None
            return held.epoch

    def expire(self) -> list[str]:
        """Forget (and return) every agent whose proof is too old: the node must have stopped acting for it."""
        now = self._mono()
        with self._lock:
            if self._oldest_ns is None or now - self._oldest_ns < self.fence_after_ns:
                return []
            gone = [a for a, h in self._held.items() if now - h.proof_ns >= self.fence_after_ns]
            for agent_id in gone:
                del self._held[agent_id]
            self.removals += len(gone)
            self._oldest_ns = min((h.proof_ns for h in self._held.values()), default=None)
        return gone

    def snapshot(self) -> dict[str, int]:
        """``{agent: epoch}`` of every lease still held (what to renew or release)."""
        now = self._mono()
        with self._lock:
            return {a: h.epoch for a, h in self._held.items() if now - h.proof_ns < self.fence_after_ns}

    def drop(self, agents: Iterable[str]) -> None:
        with self._lock:
            for agent_id in agents:
                if self._held.pop(agent_id, None) is not None:
                    self.removals += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)
