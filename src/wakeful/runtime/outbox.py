"""The stdio runtime's bounded output queues and the order in which the writer drains them.

runtime-protocol.md §10: control queue (64 frames), per-object data queues (65,536 B) under a global
4 MiB bound, a control burst of 8 before one data frame, round-robin across objects, writes ≤ 64 KiB.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

__all__ = [
    "CONTROL_BURST",
    "CONTROL_FRAMES",
    "OBJECT_BYTES",
    "TOTAL_BYTES",
    "WRITE_BYTES",
    "DataFrame",
    "Outbox",
]

CONTROL_FRAMES = 64
OBJECT_BYTES = 65_536
TOTAL_BYTES = 4 << 20
CONTROL_BURST = 8
WRITE_BYTES = 65_536


class DataFrame:
    """One frame of an object's data queue; ``accepted`` once it entered the queue (§9.3)."""

    __slots__ = ("accepted", "data", "object_id", "state")

    def __init__(self, object_id: str, data: bytes) -> None:
        self.object_id = object_id
        self.data = data
        self.accepted = False
        self.state = "new"  # new → waiting → queued → taken | removed


class Outbox:
    """Bounded queues of encoded frames (each ending in a newline); ``on_ready()`` when one is added."""

    def __init__(self, on_ready: Callable[[], None]) -> None:
        self._on_ready = on_ready
        self._control: deque[bytes] = deque()
        self._control_waiters: deque[asyncio.Future[None]] = deque()
        self._data: dict[str, deque[DataFrame]] = {}
        self._object_bytes: dict[str, int] = {}
        self._ring: deque[str] = deque()  # objects with queued data, in round-robin order
        self._waiting: dict[str, deque[DataFrame]] = {}  # host-call frames waiting for space
        self._burst = 0
        self._reserved = 0  # control places handed to woken responses not yet appended
        self.data_bytes = 0
        self.dropped = 0  # dropped_data_notifications (§3, §10)
        self.closed = False

    # ------------------------------------------------------------------ control queue

    @property
    def control_frames(self) -> int:
        return len(self._control)

    def _control_full(self) -> bool:
        return len(self._control) + self._reserved >= CONTROL_FRAMES or bool(self._control_waiters)

    # §10: notifications are dropped when the control queue is full
    def offer_control(self, frame: bytes) -> bool:
        """Queue a control frame now if there is room (waiting responses go first); ``False`` if not."""
        if self.closed or self._control_full():
            return False
        self._append_control(frame)
        return True

    def force_control(self, frame: bytes) -> None:
        """Queue past the bound (only the shutdown's last responses, §12)."""
        self._append_control(frame)

    # §10: responses wait for control-queue space
    async def put_control(self, frame: bytes) -> None:
        """Queue a response, waiting for space in FIFO order with the other waiting responses."""
        if self._control_full():
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._control_waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._control_waiters:
                    self._control_waiters.remove(waiter)
                elif not waiter.cancelled():  # woken, then cancelled: hand the place on
                    self._reserved = max(0, self._reserved - 1)
                    self._wake_control()
                raise
            self._reserved = max(0, self._reserved - 1)
        if not self.closed:
            self._append_control(frame)

    def _append_control(self, frame: bytes) -> None:
        self._control.append(frame)
        self._on_ready()

    def _wake_control(self) -> None:
        while self._control_waiters and len(self._control) + self._reserved < CONTROL_FRAMES:
            waiter = self._control_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._reserved += 1

    # ------------------------------------------------------------------ data queues

    def object_bytes(self, object_id: str) -> int:
        return self._object_bytes.get(object_id, 0)

    def _has_room(self, object_id: str, size: int) -> bool:
        return (self._object_bytes.get(object_id, 0) + size <= OBJECT_BYTES
                and self.data_bytes + size <= TOTAL_BYTES)

    # §10: logs are dropped and counted when the object's or the global data bound is reached
    def offer_data(self, frame: DataFrame) -> bool:
        if self.closed or not self._has_room(frame.object_id, len(frame.data)):
            self.dropped += 1
            return False
        self._enqueue(frame)
        return True

    # §9.2: a host-call frame waits for space (the caller cancels it at its deadline)
    def submit_waiting(self, frame: DataFrame) -> None:
        waiting = self._waiting.get(frame.object_id)
        if not waiting and not self.closed and self._has_room(frame.object_id, len(frame.data)):
            self._enqueue(frame)
            return
        frame.state = "waiting"
        self._waiting.setdefault(frame.object_id, deque()).append(frame)

    def _enqueue(self, frame: DataFrame) -> None:
        oid = frame.object_id
        queue = self._data.get(oid)
        if queue is None:
            queue = self._data[oid] = deque()
            self._ring.append(oid)
        queue.append(frame)
        size = len(frame.data)
        self._object_bytes[oid] = self._object_bytes.get(oid, 0) + size
        self.data_bytes += size
        frame.accepted = True
        frame.state = "queued"
        self._on_ready()

    def remove(self, frame: DataFrame) -> None:
        """Withdraw a frame that was not written yet (a timed-out or cancelled host call, §9.3)."""
        if frame.state == "waiting":
            waiting = self._waiting.get(frame.object_id)
            if waiting is not None and frame in waiting:
                waiting.remove(frame)
                if not waiting:
                    del self._waiting[frame.object_id]
        elif frame.state == "queued":
            queue = self._data.get(frame.object_id)
            if queue is not None and frame in queue:
                queue.remove(frame)
                self._release(frame)
                if not queue:
                    self._forget(frame.object_id)
                self._admit_waiting()
        frame.state = "removed"

    # §7.1: the object's queued data frames (logs, unsent host calls) are purged
    def purge(self, object_id: str) -> None:
        for frame in self._waiting.pop(object_id, ()):
            frame.state = "removed"
        queue = self._data.get(object_id)
        if queue is None:
            return
        for frame in queue:
            self._release(frame)
            frame.state = "removed"
        self._forget(object_id)
        self._admit_waiting()

    def _release(self, frame: DataFrame) -> None:
        size = len(frame.data)
        self._object_bytes[frame.object_id] -= size
        self.data_bytes -= size

    def _forget(self, object_id: str) -> None:
        self._data.pop(object_id, None)
        self._object_bytes.pop(object_id, None)
        if object_id in self._ring:
            self._ring.remove(object_id)

    def _admit_waiting(self) -> None:
        """Move waiting host-call frames into their queues while there is room (oldest first per object)."""
        for oid in list(self._waiting):
            waiting = self._waiting[oid]
            while waiting and self._has_room(oid, len(waiting[0].data)):
                self._enqueue(waiting.popleft())
            if not waiting:
                del self._waiting[oid]

    # ------------------------------------------------------------------ the writer's side

    def has_frames(self) -> bool:
        return bool(self._control) or bool(self._ring)

    # §10 writer order: control first; after 8 control frames in a row, one data frame if ready;
    # data round-robin across objects, one per object per turn; coalesced up to 64 KiB
    def take(self, limit: int = WRITE_BYTES) -> bytes:
        """The next frames in writer order, concatenated (at least one frame if any is queued)."""
        parts: list[bytes] = []
        size = 0
        took_data = False
        control, ring, data = self._control, self._ring, self._data
        while True:
            if ring and (not control or self._burst >= CONTROL_BURST):  # a data frame's turn
                oid = ring[0]
                queue = data[oid]
                frame = queue[0]
                n = len(frame.data)
                if parts and size + n > limit:
                    break
                ring.popleft()
                queue.popleft()
                self._release(frame)
                frame.state = "taken"
                if queue:
                    ring.append(oid)
                else:
                    del data[oid]
                    self._object_bytes.pop(oid, None)
                self._burst = 0
                took_data = True
                parts.append(frame.data)
            elif control:
                head = control[0]
                n = len(head)
                if parts and size + n > limit:
                    break
                control.popleft()
                self._burst += 1
                if self._control_waiters:
                    self._wake_control()
                parts.append(head)
            else:
                break
            size += n
        if took_data and self._waiting:
            self._admit_waiting()
        return b"".join(parts)

    def close(self) -> None:
        """§12: no more frames are accepted; waiting responses are released (and dropped)."""
        self.closed = True
        for waiter in self._control_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._control_waiters.clear()
        self._reserved = 0
        for oid in list(self._waiting):
            self.purge(oid)
