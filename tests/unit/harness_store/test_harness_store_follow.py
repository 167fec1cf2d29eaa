"""A session's stream (``ops.messages.follow``) in store terms, on both backends: a message committed on this node
reaches the follower without a read transaction in between (the bell hands the committed message over), a commit
that lands while the follower reads the store is not lost, and no message is yielded twice — the read after a
handed-over message skips it, and a message written without a ring (another process) is still found by it.

The backup poll is stretched to 120 s: whatever arrives within a test came through the bell."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from wakeful.harness.ops import messages
from wakeful.harness.store import Store, agents, groups, schema, sessions

POLL_S = 120.0


class Reads:
    """Counts the store's read transactions; ``hold`` parks the next read right after it finished."""

    def __init__(self, store: Store) -> None:
        self.count = 0
        self.hold: asyncio.Event | None = None
        self.held = asyncio.Event()
        original = store.tx

        @contextlib.asynccontextmanager
        async def tx(*, readonly: bool = False) -> AsyncIterator[Any]:
            async with original(readonly=readonly) as t:
                yield t
            if readonly:
                self.count += 1
                hold, self.hold = self.hold, None
                if hold is not None:
                    self.held.set()
                    await hold.wait()

        store.tx = tx  # type: ignore[method-assign]


async def _session(store: Store) -> dict[str, str]:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        agent = await agents.create_agent(tx, group_id=group.id, name="bot")
        session = await sessions.create_session(tx, agent_id=agent.id)
    return {"session_id": session.id, "agent_id": agent.id, "group_id": group.id}


async def _write(store: Store, where: dict[str, str], content: str) -> None:
    store.clock.advance(ms=1)  # type: ignore[union-attr]  # (the test clock) each message a position of its own
    async with store.tx() as tx:
        await sessions.insert_message(tx, **where, kind="user", content=content)


class Follower:
    """``follow`` in a task; each message lands in ``got`` with the number of reads done when it was yielded."""

    def __init__(self, store: Store, session_id: str, reads: Reads) -> None:
        self.got: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        self.reads = reads
        self.task = asyncio.ensure_future(self._run(store, session_id))

    async def _run(self, store: Store, session_id: str) -> None:
        async with contextlib.aclosing(
            messages.follow(
                SimpleNamespace(store=store),
                session_id,
                None,  # type: ignore[arg-type]
                poll_s=POLL_S,
            )
        ) as found:
            async for item in found:
                if item is not None:
                    self.got.put_nowait((item[1]["content"], self.reads.count))

    async def next(self) -> tuple[str, int]:
        return await asyncio.wait_for(self.got.get(), 30)  # a guard against a hang only: the poll is 120 s

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def _parked(store: Store, reads: Reads, n: int) -> None:
    while store.bell.readers < 1 or reads.count < n:
        await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion


async def test_a_committed_message_reaches_the_follower_without_a_read(store: Store) -> None:
    where = await _session(store)
    reads = Reads(store)
    follower = Follower(store, where["session_id"], reads)
    try:
        await _parked(store, reads, 1)  # its first read found nothing
        for _ in range(10):
            await asyncio.sleep(0)
        before = reads.count
        await _write(store, where, "first")
        assert await follower.next() == ("first", before)  # yielded before any read after the commit
        await _write(store, where, "second")
        content, at = await follower.next()
        assert content == "second" and at <= before + 1  # at most the read that confirmed "first"
    finally:
        await follower.close()


async def test_a_commit_during_the_followers_read_is_not_lost(store: Store) -> None:
    where = await _session(store)
    reads = Reads(store)
    reads.hold = asyncio.Event()
    release = reads.hold
    follower = Follower(store, where["session_id"], reads)
    try:
        await (
            reads.held.wait()
        )  # the first read found nothing and the follower is not waiting on the bell yet
        await _write(store, where, "during the read")
        release.set()
        assert (await follower.next())[0] == "during the read"
    finally:
        release.set()
        await follower.close()


async def test_no_message_is_yielded_twice_and_an_unrung_one_is_still_read(store: Store) -> None:
    where = await _session(store)
    reads = Reads(store)
    follower = Follower(store, where["session_id"], reads)
    try:
        await _parked(store, reads, 1)
        await _write(store, where, "a")
        assert (await follower.next())[0] == "a"
        store.clock.advance(ms=1)  # type: ignore[union-attr]
        async with store.tx() as tx:  # as another process writes it: no ring on this node
            now = await tx.now_ms()
            await tx.execute(
                sa.insert(schema.message).values(
                    id="msg_unrung", **where, kind="user", role="user", content="unrung", created_ms=now
                )
            )
        await _write(store, where, "b")  # rings: handed over, then the read finds the unrung one
        got = {(await follower.next())[0], (await follower.next())[0]}
        assert got == {"b", "unrung"}
        await _write(store, where, "c")
        assert (await follower.next())[0] == "c"
        assert follower.got.empty()  # nothing came twice
    finally:
        await follower.close()
