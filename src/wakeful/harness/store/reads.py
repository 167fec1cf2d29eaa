"""Shared reads: the requests for one kind of read made while such a read runs are answered by the next one
together — one read transaction for all of them instead of one each (issue 16: a burst of creates).

``SharedRead(store, work)``; ``await shared.submit(item)`` answers ``work(tx, items)[k]`` for the item. The first
request of a quiet moment reads at once, alone; those arriving while it reads wait for it and then share the next
read (at most ``limit`` items each). Every answer comes from a read that began after its request was made, so it
is as fresh as a read of its own. A read that fails fails each of its requests with that error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from wakeful.harness.store.core import Store, Tx

__all__ = ["SharedRead", "any_param", "built_once", "by_keys", "likely", "one_of", "padded"]

I = TypeVar("I")  # noqa: E741 - the item type
R = TypeVar("R")
LIMIT = 200
T = TypeVar("T")


def padded(values: Sequence[T]) -> list[T]:
    """``values`` for an ``IN`` list, the last one repeated up to the next power of two: a batch's statement then
    has one of a few texts, so PostgreSQL's prepared statement (cached per text on each pooled connection) is
    reused instead of prepared again for every batch size (issue 16). ``IN`` ignores the repeats."""
    items = list(values)
    if len(items) > 1:
        items.extend([items[-1]] * ((1 << (len(items) - 1).bit_length()) - len(items)))
    return items


def one_of(dialect: str, column: sa.ColumnElement[Any], values: Sequence[Any]) -> sa.ColumnElement[bool]:
    """``column IN (values)`` for a batch's statement. On PostgreSQL ``column = ANY(:array)``: one statement text
    for any number of values, and nothing rendered at execution — SQLAlchemy renders an IN list's parameters into
    the statement anew at every execution (issue 16: 4 % of a node's CPU in a PostgreSQL create burst). Elsewhere
    the IN list, ``padded``."""
    if dialect == "postgresql":
        return column == sa.any_(sa.bindparam(None, list(values), type_=pg_dialect.ARRAY(column.type)))
    return column.in_(padded(values))


def any_param(column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
    """PostgreSQL's ``column = ANY(:name)`` with the array bound at execution (``{name: [values]}``): the form of
    ``one_of`` for a statement built once (``built_once``)."""
    return column == sa.any_(sa.bindparam(name, type_=pg_dialect.ARRAY(column.type)))


_BUILT: dict[str, Any] = {}


def built_once(key: str, build: Callable[[], T]) -> T:
    """The statement ``build()`` makes, built at its first use and the same object at every later one (issue 16:
    a create batch on PostgreSQL built its statements anew each time, and SQLAlchemy derived each new object's
    cache key by walking it — a tenth of the node's CPU in a create burst; a statement object keeps its key)."""
    found = _BUILT.get(key)
    if found is None:
        found = _BUILT[key] = build()
    return found  # type: ignore[no-any-return]


S = TypeVar("S")


def by_keys(dialect: str, key: str, build: Callable[[sa.ColumnElement[bool]], S], column: sa.ColumnElement[Any],
            values: Sequence[Any]) -> tuple[S, dict[str, Any] | None]:
    """The statement ``build(column in values)`` and its parameters for ``tx.execute``: on PostgreSQL built once
    under ``key`` with ``any_param`` (the values are its parameter), elsewhere built now with ``one_of``."""
    if dialect == "postgresql":
        return built_once(key, lambda: build(any_param(column, "ids"))), {"ids": list(values)}
    return build(one_of(dialect, column, values)), None


class likely(FunctionElement[bool]):  # noqa: N801 - named as the SQL function it compiles to
    """A condition true for most rows, which the query planner should not pick an index for: SQLite's
    ``likely(…)``, ``(…) IS TRUE`` on PostgreSQL (no index serves it).

    issue 16 (creates slowed as the store grew): without statistics SQLite took the index ``loop_state_updated``
    (state, updated_ms, id) for ``state = 'active' AND id IN (…)`` and ``… AND agent_id IN (…)`` — a walk over
    every active Loop per statement (4–7 ms at N = 10,000, per batch of creates) instead of a few key lookups."""

    type = sa.Boolean()
    inherit_cache = True
    name = "likely"


# issue 16: PostgreSQL plans from statistics, but a create burst outgrows them — ANALYZE ran while ``loop`` held
# a few rows (autovacuum, once a minute at most), so ``state = 'active' AND agent_id = ANY($1)`` was planned on
# ``loop_state_updated``: every active Loop read for a count of one agent's (a third of a million rows a second
# at N = 10,000). Written ``IS TRUE`` the state test is a filter on the rows the keys found
@compiles(likely)
def _likely_plain(element: likely, compiler: SQLCompiler, **kw: Any) -> str:
    return f"({compiler.process(element.clauses, **kw)}) IS TRUE"


@compiles(likely, "sqlite")
def _likely_sqlite(element: likely, compiler: SQLCompiler, **kw: Any) -> str:
    return f"likely({compiler.process(element.clauses, **kw)})"


class SharedRead(Generic[I, R]):
    """One kind of read shared by the requests waiting for it (see the module docstring)."""

    def __init__(self, store: Store, work: Callable[[Tx, list[I]], Awaitable[list[R]]], *, limit: int = LIMIT) -> None:
        self.store, self.work, self.limit = store, work, limit
        self._waiting: list[tuple[I, asyncio.Future[R]]] = []
        self._reader: asyncio.Task[None] | None = None
        self.reads = 0  # read transactions run (tests)

    def waiting(self) -> int:
        """Requests not yet taken by a read (tests)."""
        return len(self._waiting)

    async def submit(self, item: I) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._reader is None or self._reader.done():  # (done: its loop ended it before its finally ran)
            self._reader = asyncio.get_running_loop().create_task(self._read())
        return await future

    async def _read(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:self.limit], self._waiting[self.limit:]
                try:
                    async with self.store.tx(readonly=True) as tx:
                        self.reads += 1
                        answers = await self.work(tx, [item for item, _ in batch])
                except BaseException as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for (_, future), answer in zip(batch, answers, strict=True):
                    if not future.done():
                        future.set_result(answer)
        finally:
            self._reader = None
