"""Shared fixtures for store-backed harness tests: every such test runs on SQLite and on PostgreSQL.

``store`` (ids ``sqlite``/``postgresql``) is an opened, migrated ``Store`` in a fresh SQLite file or a fresh PG
schema ``wk_<random>`` (dropped afterwards); ``store_url`` is its URL (reopen it to simulate a restart);
``store_clock`` is a ``TestClock`` driving the store clock and a node's monotonic clock together. ``async def``
tests that use ``harness_runner`` (``store`` does) run on that fixture's event loop; those using only
``store_url`` run on a fresh loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PG_URL = os.environ.get("WAKEFUL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI") == "true"
_pg_state: dict[str, str | None] = {}


class TestClock:
    """One controllable clock: ``unix_ms()`` is the store clock, ``monotonic_ns()`` the node's.

    ``advance`` moves both; ``jump_wall`` moves only the wall clock (either way), as a clock jump does.
    Fits ``wakeful.runtime.clock.Clock`` and ``wakeful.harness.store.WallClock``.
    """

    __test__ = False

    def __init__(self, unix_ms: int = 1_767_225_600_000, monotonic_ns: int = 1_000_000_000) -> None:
        self._mono_ns = monotonic_ns
        self._wall_offset_ms = unix_ms - monotonic_ns // 1_000_000

    def monotonic_ns(self) -> int:
        return self._mono_ns

    def unix_ms(self) -> int:
        return self._mono_ns // 1_000_000 + self._wall_offset_ms

    def advance(self, *, ms: float = 0, s: float = 0) -> None:
        step = int((ms + s * 1000) * 1_000_000)
        if step < 0:
            raise ValueError("advance moves forward; use jump_wall for a wall-clock jump back")
        self._mono_ns += step

    def jump_wall(self, *, ms: float = 0, s: float = 0) -> None:
        self._wall_offset_ms += int(ms + s * 1000)


def _pg_unavailable_reason() -> str | None:
    """None when PostgreSQL answers at WAKEFUL_TEST_PG_URL, else why not (checked once per session)."""
    if "reason" not in _pg_state:
        _pg_state["reason"] = asyncio.run(_probe_pg())
    return _pg_state["reason"]


async def _probe_pg() -> str | None:
    import asyncpg

    try:
        conn = await asyncpg.connect(PG_URL, timeout=5)
    except Exception as exc:  # any failure to connect means "no PostgreSQL here"
        return f"PostgreSQL at {PG_URL} is not reachable: {type(exc).__name__}: {exc}"
    await conn.close()
    return None


def require_pg() -> None:
    """Skip visibly without PostgreSQL; with CI=true a missing PostgreSQL fails the test."""
    reason = _pg_unavailable_reason()
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


DROP_LOCK_TIMEOUT = "5s"  # a drop that waits longer is blocked by a backend the test left behind
_HOLDERS = """
SELECT DISTINCT l.pid, a.state, left(coalesce(a.query, ''), 200) AS query
FROM pg_locks l JOIN pg_namespace n ON n.nspname = $1
LEFT JOIN pg_class c ON l.locktype = 'relation' AND c.oid = l.relation
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.pid <> pg_backend_pid() AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND (c.relnamespace = n.oid OR (l.locktype = 'object' AND l.objid = n.oid)
       OR l.pid = ANY(pg_blocking_pids(pg_backend_pid())))
"""


async def _pg_schema(action: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_URL, timeout=10)
    try:
        if action == "create":
            await conn.execute(f'CREATE SCHEMA "{name}"')
        else:
            await _drop_schema(conn, name)
    finally:
        await conn.close()


async def _drop_schema(conn: Any, name: str) -> None:
    """``DROP SCHEMA … CASCADE`` under a lock timeout. A backend the test left holding locks in the schema (an
    open transaction of a store never closed, a node process not stopped) would block the drop — and the whole
    run — forever: it is terminated and the drop retried, and the teardown then fails naming what was left, so
    the leak is reported rather than hidden."""
    import asyncpg

    await conn.execute(f"SET lock_timeout = '{DROP_LOCK_TIMEOUT}'")
    terminated: list[str] = []
    for _ in range(5):
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            break
        except asyncpg.exceptions.LockNotAvailableError:
            for row in await conn.fetch(_HOLDERS, name):
                if await conn.fetchval("SELECT pg_terminate_backend($1)", row["pid"]):
                    terminated.append(f"pid {row['pid']} ({row['state']}): {row['query']!r}")
    else:
        raise RuntimeError(f"schema {name} could not be dropped; still blocked after terminating {terminated}")
    if terminated:
        raise RuntimeError(f"the test left backends holding locks in schema {name} (terminated so the run goes "
                           f"on): {'; '.join(terminated)}")


def pg_url_with_schema(schema_name: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}search_path={schema_name}"


@pytest.fixture
def harness_runner() -> Iterator[asyncio.Runner]:
    """The event loop async harness tests and fixtures run on."""
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty store: a fresh SQLite file, or a fresh PostgreSQL schema dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'wakeful.db'}"
        return
    require_pg()
    name = "wk_" + secrets.token_hex(6)
    asyncio.run(_pg_schema("create", name))
    try:
        yield pg_url_with_schema(name)
    finally:
        asyncio.run(_pg_schema("drop", name))


@pytest.fixture
def store_clock() -> TestClock:
    return TestClock()


@pytest.fixture
def store(harness_runner: asyncio.Runner, store_url: str, store_clock: TestClock) -> Iterator[Any]:
    """An opened, migrated store on the test clock (both backends)."""
    from wakeful.harness.store import Store

    opened = harness_runner.run(Store.open(store_url, clock=store_clock))
    try:
        yield opened
    finally:
        harness_runner.run(opened.close())


class PgProxy:
    """A real TCP proxy in front of PostgreSQL that a test can cut and restore ("stop PostgreSQL" for one
    store only, since the server is shared): ``cut()`` drops every connection and refuses new ones.

    Use inside the test's event loop: ``async with PgProxy() as proxy: url = proxy.url(schema)``.
    """

    def __init__(self, target_url: str = PG_URL) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._base = target_url
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.down = False
        self.port = 0

    async def __aenter__(self) -> PgProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def url(self, schema_name: str) -> str:
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self._base)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        netloc_text = f"{netloc[0]}@{host}" if len(netloc) == 2 else host
        query = "&".join(q for q in (parts.query, f"search_path={schema_name}") if q)
        return urlunsplit((parts.scheme, netloc_text, parts.path, query, ""))

    def cut(self) -> None:
        self.down = True
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def restore(self) -> None:
        self.down = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            writer.transport.abort()


@contextlib.contextmanager
def sqlite_read_only(db_path: Path) -> Iterator[None]:
    """Make a live SQLite store's files unwritable, even for root ("make the SQLite file read-only",
    harness.md §21): the database and its WAL get the immutable attribute (never ``-shm``: SQLite maps it, and
    an immutable mapping would SIGBUS the process). Writes then fail with a disk I/O error; reads still work.
    Skips when the file system has no immutable attribute."""
    files = [str(db_path), f"{db_path}-wal"]
    done = subprocess.run(["chattr", "+i", *files], capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run(["chattr", "-i", *files], capture_output=True)
        pytest.skip(f"chattr +i is not available here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)


@pytest.fixture
def pg_schema(harness_runner: asyncio.Runner) -> Iterator[str]:
    """A fresh, empty PostgreSQL schema name (dropped afterwards); PostgreSQL only."""
    require_pg()
    name = "wk_" + secrets.token_hex(6)
    asyncio.run(_pg_schema("create", name))
    try:
        yield name
    finally:
        asyncio.run(_pg_schema("drop", name))


def run_async_test(pyfuncitem: pytest.Function) -> bool | None:
    """pytest hook body: run an ``async def`` test on the ``harness_runner`` loop it requested."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    runner = pyfuncitem.funcargs.get("harness_runner")
    if runner is None and "store_url" not in pyfuncitem.funcargs:
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    if isinstance(runner, asyncio.Runner):
        runner.run(pyfuncitem.obj(**kwargs))
    else:
        asyncio.run(pyfuncitem.obj(**kwargs))
    return True
