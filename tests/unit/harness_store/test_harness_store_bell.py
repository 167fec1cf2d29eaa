"""The message bell (harness/store/bell.py): a reader that times out or is cancelled (client gone) leaves nothing
behind, a ring with no reader leaves nothing, a ring from another thread wakes a reader on its own loop, and a
ring landing while a reader cleans up never fails that reader."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from wakeful.harness.store.bell import MessageBell


def test_timeouts_and_cancellations_leave_no_reader() -> None:
    async def go() -> None:
        bell = MessageBell()
        assert await bell.wait("s1", 0.001) is False
        readers = [asyncio.ensure_future(bell.wait("s1", 30)) for _ in range(5)]
        await asyncio.sleep(0)
        assert bell.readers == 5
        for task in readers:
            task.cancel()  # the SSE client went away
        await asyncio.gather(*readers, return_exceptions=True)
        assert bell.readers == 0 and not bell._waiting
        bell.ring("s1")  # no reader: nothing kept
        bell.ring("never-read")
        assert not bell._waiting

    asyncio.run(go())


def test_a_ring_from_another_thread_wakes_the_reader_on_its_loop() -> None:
    async def go() -> None:
        bell = MessageBell()
        reader = asyncio.ensure_future(bell.wait("s1", 30))
        await asyncio.sleep(0)
        ringer = threading.Thread(target=bell.ring, args=("s1",))
        ringer.start()
        assert await reader is True
        ringer.join()
        assert bell.readers == 0

    asyncio.run(go())


def test_a_ring_between_a_readers_remove_and_its_cleanup_does_not_fail_it() -> None:
    """Another thread's ring can pop the session's list after the reader took it out of the list and before it
    deletes the emptied entry: the reader must still return (it raised KeyError out of its finally)."""

    async def go() -> bool:
        bell = MessageBell()

        class RingingList(list[Any]):
            def remove(self, value: Any) -> None:
                super().remove(value)
                bell.ring("s1")  # the other thread runs here

        bell._waiting["s1"] = RingingList()
        return await bell.wait("s1", 0.001)

    assert asyncio.run(go()) is False
