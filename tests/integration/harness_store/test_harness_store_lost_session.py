"""A PostgreSQL session that the server ends in the middle of a transaction (harness.md §3; issue 16's session
timeouts): a node starved of CPU for longer than ``idle_in_transaction_session_timeout`` between two statements
of a live transaction has that session terminated. asyncpg reads the server's FATAL while idle and, until it has
also read the socket's close, answers the next statement with ``cannot switch to state 11; another operation (2)
is in progress`` — the 503 a surviving node gave in the kill -9 failover test. Nothing was committed, so the store
says so (``StoreUnavailable.lost_uncommitted``), the dead connection never goes back to the pool, and work that
may run twice (a group-commit unit, ``Store.run_rerunnable``) is run once more on a fresh session instead of
answering 503. A session lost after its COMMIT was sent may have committed: that is never run again.

The server's timeout is real (50 ms here); the test waits for the backend to be gone (a store condition), and a
proxy holds the socket's close until the client writes again, so the client sees exactly the state of the bug.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa
from support.harness_fixtures import PG_URL

from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.store import Store, Tx, groups
from wakeful.harness.store.engine import SessionTimeouts

pytestmark = pytest.mark.integration

IDLE_MS = 50  # the server ends a session idle in a transaction this long (real PostgreSQL timeout)
TERMINATE = b"X\x00\x00\x00\x04"  # the client's Terminate message (PostgreSQL protocol 3)


class EndingProxy:
    """A TCP proxy in front of PostgreSQL. When the server closes a session, its last bytes (the FATAL) reach the
    client but the close is held until the client writes again, which then meets a closed socket — the moment
    between the two, which a starved node sees, made to last. ``cut_after_commit()``: the next ``COMMIT`` is
    forwarded, and the connection is cut as its answer arrives (committed, the client never told)."""

    def __init__(self) -> None:
        self.port = 0
        self.upstream_closed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.BaseTransport] = set()
        self._cut_commit = False

    async def __aenter__(self) -> EndingProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for transport in list(self._transports):
            transport.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def url(self, schema_name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/test?search_path={schema_name}"

    def cut_after_commit(self) -> None:
        self._cut_commit = True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", 5432)
        self._transports.update((writer.transport, up_writer.transport))
        closed = asyncio.Event()  # the server closed this session
        committing = asyncio.Event()  # a COMMIT to cut after was forwarded
        terminated = asyncio.Event()  # the client ended the session itself (Terminate): its close is not held

        async def to_server() -> None:
            while data := await reader.read(65536):
                if closed.is_set():  # the client writes into a session the server ended: its socket is closed
                    break
                if data.endswith(TERMINATE):
                    terminated.set()
                if self._cut_commit and b"COMMIT" in data:
                    self._cut_commit = False
                    committing.set()
                up_writer.write(data)
            writer.transport.abort()
            up_writer.transport.abort()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                if committing.is_set():  # the COMMIT's answer: the server committed; the client never hears it
                    writer.transport.abort()
                    up_writer.transport.abort()
                    return
                writer.write(data)
            if terminated.is_set():
                writer.transport.abort()
                return
            closed.set()
            self.upstream_closed.set()

        await asyncio.gather(to_server(), to_client(), return_exceptions=True)


async def _pid(tx: Tx) -> int:
    return int((await tx.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())


async def _names(store: Store) -> list[str]:
    async with store.tx(readonly=True) as tx:
        return [g.name for g in await groups.list_groups(tx)]


async def _ended_by_server(proxy: EndingProxy, pid: int) -> None:
    """Wait, idle in the transaction, until the server has ended session ``pid`` and its FATAL reached us."""
    monitor = await asyncpg.connect(PG_URL)
    try:
        while await monitor.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid):
            await asyncio.sleep(0.005)  # polling for the server's state, not a timing assertion
    finally:
        await monitor.close()
    await proxy.upstream_closed.wait()
    for _ in range(3):  # a few loop turns: asyncpg reads the bytes already in its socket
        await asyncio.sleep(0)


class Ending:
    """A unit that creates group ``name``; on its first run the server ends its session before the insert."""

    def __init__(self, proxy: EndingProxy, name: str) -> None:
        self.proxy, self.name = proxy, name
        self.pids: list[int] = []

    async def __call__(self, tx: Tx) -> str:
        self.pids.append(await _pid(tx))
        if len(self.pids) == 1:
            await _ended_by_server(self.proxy, self.pids[0])
        return (await groups.create_group(tx, name=self.name)).name


async def _with_store(pg_schema: str, body: Callable[[EndingProxy, Store], Awaitable[None]]) -> None:
    async with EndingProxy() as proxy:
        store = await Store.open(proxy.url(pg_schema),
                                 timeouts=SessionTimeouts(statement_ms=5000, idle_in_transaction_ms=IDLE_MS))
        try:
            await body(proxy, store)
        finally:
            await store.close()


async def _fresh_pids(store: Store, n: int) -> set[int]:
    pids = set()
    for _ in range(n):
        async with store.tx() as tx:
            pids.add(await _pid(tx))
    return pids


async def test_a_transaction_whose_session_the_server_ended_says_nothing_was_committed(
        harness_runner: Any, pg_schema: str) -> None:
    async def body(proxy: EndingProxy, store: Store) -> None:
        with pytest.raises(StoreUnavailable) as info:
            async with store.tx() as tx:
                pid = await _pid(tx)
                await _ended_by_server(proxy, pid)
                await groups.create_group(tx, name="lost")
        assert "cannot switch to state" in str(info.value)  # the driver's words for "the server ended it"
        assert info.value.lost_uncommitted
        assert await _names(store) == []
        assert pid not in await _fresh_pids(store, 12)  # the dead connection never came back from the pool

    await _with_store(pg_schema, body)


async def test_a_group_commit_unit_whose_session_the_server_ended_runs_again_on_a_fresh_session(
        harness_runner: Any, pg_schema: str) -> None:
    async def body(proxy: EndingProxy, store: Store) -> None:
        unit = Ending(proxy, "again")
        assert await store.grouped(unit) == "again"  # answered after the rerun's commit, not 503
        assert len(unit.pids) == 2 and unit.pids[1] != unit.pids[0]
        assert await _names(store) == ["again"]

    await _with_store(pg_schema, body)


async def test_a_rerunnable_transaction_whose_session_the_server_ended_runs_again(
        harness_runner: Any, pg_schema: str) -> None:
    async def body(proxy: EndingProxy, store: Store) -> None:
        unit = Ending(proxy, "once-more")
        assert await store.run_rerunnable(unit) == "once-more"
        assert len(unit.pids) == 2 and await _names(store) == ["once-more"]

    await _with_store(pg_schema, body)


async def test_a_session_lost_after_its_commit_was_sent_is_not_run_again(
        harness_runner: Any, pg_schema: str) -> None:
    async def body(proxy: EndingProxy, store: Store) -> None:
        runs = 0

        async def unit(tx: Tx) -> str:
            nonlocal runs
            runs += 1
            group = await groups.create_group(tx, name=f"committed-{runs}")
            proxy.cut_after_commit()
            return group.name

        for run in (store.grouped, store.run_rerunnable):
            with pytest.raises(StoreUnavailable) as info:
                await run(unit)
            assert not info.value.lost_uncommitted  # the COMMIT went out: it may have committed (it did)
        assert runs == 2  # each ran once: a rerun would have made a second group
        assert await _names(store) == ["committed-1", "committed-2"]

    await _with_store(pg_schema, body)
