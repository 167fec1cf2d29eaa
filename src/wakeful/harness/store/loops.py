"""Loop rows, their transitions and logs: insert, fenced conditional writes, retention (harness.md §2.5, §2.7).

The rules of *when* a Loop moves are the lifecycle's; this module owns how the rows are read and written.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect

from wakeful.harness.errors import InvalidRequest, NotFound
from wakeful.harness.store import jsontext, schema
from wakeful.harness.store.clock import STORE_MS_SQL
from wakeful.harness.store.core import Tx
from wakeful.harness.store.each import json_list, json_rows
from wakeful.harness.store.groups import check_name
from wakeful.harness.store.ids import lookup_text, new_id, shown
from wakeful.harness.store.reads import by_keys, likely, padded

__all__ = [
    "BATCH",
    "KEEP_LOGS",
    "KEEP_TRANSITIONS",
    "LogLine",
    "Loop",
    "Transition",
    "add_dropped_logs",
    "add_transition",
    "append_logs",
    "append_logs_many",
    "attach_object",
    "attach_objects",
    "begin_incarnation",
    "begin_incarnations",
    "delete_loop",
    "detach_object",
    "detach_objects",
    "find_loop",
    "find_loop_marks",
    "find_loops",
    "get_loop",
    "insert_loop",
    "list_logs",
    "list_loops",
    "list_transitions",
    "page_query",
    "update_loop",
]

BATCH = 500  # Loops per batched statement (begin_incarnations, attach_objects): bounded parameter lists
KEEP_LOGS = 200  # §2.7
KEEP_TRANSITIONS = 100  # §2.7
MAX_LOG_CHARS = 1024
STATES = ("active", "paused", "failed")
PAUSE_REASONS = ("manual", "exited", "budget", "archive", "quota", "fault")
L = schema.loop
LOG = schema.loop_log
TR = schema.loop_transition
_JSON_COLUMNS = ("config", "capabilities", "checkpoint")


@dataclass(frozen=True)
class Loop:
    """A Loop row with JSON columns decoded (``checkpoint`` is None when none was stored)."""

    id: str
    group_id: str
    agent_id: str
    session_id: str
    name: str
    state: str
    pause_reason: str | None
    failure: str | None
    exit_code: int | None
    incarnation: int
    node_id: str | None
    object_id: str | None
    artifact_sha256: str
    artifact_path: str | None
    config: dict[str, Any]
    capabilities: list[dict[str, Any]] | None
    creator: str
    checkpoint: Any
    checkpoint_bytes: int
    checkpoint_ms: int | None
    webhook_secret_sha256: str | None
    webhook_hint: str | None
    webhook_rotated_ms: int | None
    reload_window_start_ms: int | None
    reload_count: int
    notify_window_start_ms: int | None
    notify_window_count: int
    notify_limited_since_ms: int | None
    last_notified_ms: int | None
    notified_since_activation: bool
    dropped_logs: int
    activated_ms: int | None
    created_ms: int
    updated_ms: int


@dataclass(frozen=True)
class LogLine:
    at_ms: int
    incarnation: int
    source: str  # guest | loop.log | harness
    text: str
    seq: int | None = None


@dataclass(frozen=True)
class Transition:
    seq: int
    at_ms: int
    from_state: str | None
    from_reason: str | None
    to_state: str
    to_reason: str | None
    incarnation: int
    actor: str
    detail: str | None


_LOOP_FIELDS = tuple(Loop.__dataclass_fields__)
_JSON_AT = tuple(_LOOP_FIELDS.index(name) for name in _JSON_COLUMNS)
_NOTIFIED_AT = _LOOP_FIELDS.index("notified_since_activation")
_GETTERS: dict[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] = {}  # a result's column names → its getter


# issue 16: a node's start decodes 10,000 rows and the bench's listing 200 per page. A row's columns by name cost
# ~0.7 µs each (34 of them); by position in one ``itemgetter`` call ~1 µs in all: the positions are found once per
# result (its column names), and the frozen dataclass is filled through its ``__dict__`` (its ``__init__`` sets each
# field through ``object.__setattr__``). The same Loop as ``Loop(**values)``: no ``__post_init__``, no defaults.
def _getter(row: Any) -> Callable[[Any], tuple[Any, ...]]:
    fields = tuple(row._fields)
    getter = _GETTERS.get(fields)
    if getter is None:
        getter = _GETTERS[fields] = operator.itemgetter(*(fields.index(name) for name in _LOOP_FIELDS))
    return getter


def _loop(values: list[Any]) -> Loop:
    for at in _JSON_AT:
        values[at] = jsontext.decode(values[at])
    values[_NOTIFIED_AT] = bool(values[_NOTIFIED_AT])
    loop: Loop = object.__new__(Loop)
    loop.__dict__.update(zip(_LOOP_FIELDS, values, strict=True))
    return loop


def loop_from_row(row: Any) -> Loop:
    """The Loop of a row holding every column of ``loop`` (any order, other columns ignored)."""
    return _loop(list(_getter(row)(row)))


def loop_of_values(values: Mapping[str, Any]) -> Loop:
    """The Loop of a new row's columns (``new_loop_values``: JSON columns as text; columns left out are NULL)."""
    return _loop([values.get(name) for name in _LOOP_FIELDS])


def loops_from_rows(rows: Iterable[Any]) -> list[Loop]:
    """``loop_from_row`` for each row of one result (the column positions found once)."""
    out: list[Loop] = []
    getter: Callable[[Any], tuple[Any, ...]] | None = None
    for row in rows:
        if getter is None:
            getter = _getter(row)
        out.append(_loop(list(getter(row))))
    return out


def _check_state(state: str, pause_reason: str | None) -> None:
    if state not in STATES or (state == "paused") != (pause_reason is not None):
        raise InvalidRequest(f"invalid Loop state {state}({pause_reason})", field="state")
    if pause_reason is not None and pause_reason not in PAUSE_REASONS:
        raise InvalidRequest(f"invalid pause reason {pause_reason}", field="pause_reason")


# §2.5: a new row — incarnation 0 (the first load makes it 1), name default loop-<last 6 id chars>
async def insert_loop(
    tx: Tx,
    *,
    group_id: str,
    agent_id: str,
    session_id: str,
    artifact_sha256: str,
    config: dict[str, Any],
    creator: str,
    capabilities: list[dict[str, Any]] | None = None,
    name: str | None = None,
    artifact_path: str | None = None,
    loop_id: str | None = None,
    state: str = "active",
    pause_reason: str | None = None,
) -> Loop:
    """Insert a Loop. The caller has validated config and capabilities and, for ``active``, admitted
    the quota (``quota.admit_active``) in this same transaction."""
    _check_state(state, pause_reason)
    if name is not None:
        check_name(name)
    await _check_session_of_agent(tx, session_id, agent_id)
    now = await tx.now_ms()
    lid = loop_id or new_id("lp", now)
    values = new_loop_values(
        loop_id=lid, group_id=group_id, agent_id=agent_id, session_id=session_id, name=name,
        artifact_sha256=artifact_sha256, artifact_path=artifact_path, config=config, capabilities=capabilities,
        creator=creator, now=now, state=state, pause_reason=pause_reason,
    )
    await tx.execute(L.insert().values(**values))
    return await get_loop(tx, lid)


def new_loop_values(
    *, loop_id: str, group_id: str, agent_id: str, session_id: str, name: str | None, artifact_sha256: str,
    artifact_path: str | None, config: dict[str, Any], capabilities: list[dict[str, Any]] | None, creator: str,
    now: int, state: str = "active", pause_reason: str | None = None, incarnation: int = 0,
    node_id: str | None = None, object_id: str | None = None,
) -> dict[str, Any]:
    """The columns of a new Loop row (§2.5: incarnation 0, name default loop-<last 6 id chars>; a create whose
    node begins the first incarnation in the same transaction writes incarnation 1 and its node, §4.3 step 1, and
    the object it loaded for it, step 4)."""
    lid = loop_id
    return {
        "id": lid,
        "group_id": group_id,
        "agent_id": agent_id,
        "session_id": session_id,
        "name": name or f"loop-{lid[-6:]}",
        "state": state,
        "pause_reason": pause_reason,
        "incarnation": incarnation,
        "node_id": node_id,
        "object_id": object_id,
        "artifact_sha256": artifact_sha256,
        "artifact_path": artifact_path,
        "config": jsontext.encode(config),
        "capabilities": jsontext.encode(capabilities),
        "creator": creator,
        "checkpoint_bytes": 0,
        "reload_count": 0,
        "notify_window_count": 0,
        "notified_since_activation": False,
        "dropped_logs": 0,
        "activated_ms": now if state == "active" else None,
        "created_ms": now,
        "updated_ms": now,
    }


async def insert_created(tx: Tx, rows: Sequence[dict[str, Any]]) -> None:
    """New active Loops (``new_loop_values``) with their ``created`` transition, two statements for all of them
    (issue 16: a batch of creates). The caller admitted each into the quota and checked its session."""
    if not rows:
        return
    await tx.execute(L.insert(), list(rows))
    await tx.execute(TR.insert(), [
        {"loop_id": r["id"], "at_ms": r["created_ms"], "from_state": None, "from_reason": None,
         "to_state": r["state"], "to_reason": None, "incarnation": 0, "actor": r["creator"], "detail": "created"}
        for r in rows
    ])  # a Loop's first transition: nothing to trim


async def session_owners(tx: Tx, session_ids: Sequence[str]) -> dict[str, str]:
    """Session id → its agent id, for the sessions that exist (§2.5: the session must belong to the agent)."""
    S = schema.session
    stmt, params = by_keys(tx.dialect, "loops.session_owners", sa.select(S.c.id, S.c.agent_id).where, S.c.id,
                           sorted(set(session_ids)))
    found = await tx.execute(stmt, params)
    return {r.id: r.agent_id for r in found}


# §2.5: the session must belong to the agent
async def _check_session_of_agent(tx: Tx, session_id: str, agent_id: str) -> None:
    S = schema.session
    owner = (await tx.execute(sa.select(S.c.agent_id).where(S.c.id == session_id))).scalar()
    if owner != agent_id:
        raise InvalidRequest(f"session {session_id} does not belong to agent {agent_id}", field="session_id")


async def find_loop(tx: Tx, loop_id: str, *, for_update: bool = False) -> Loop | None:
    """The row or None; ``for_update`` locks it on PostgreSQL (read-modify-write, harness.md §3)."""
    if lookup_text(loop_id) is None:
        return None
    stmt = sa.select(L).where(L.c.id == loop_id)
    row = await tx.first(stmt, for_update=for_update)
    return None if row is None else loop_from_row(row)


async def find_loops(tx: Tx, loop_ids: Sequence[str]) -> dict[str, Loop]:
    """The rows of ``loop_ids`` that exist, by id (one statement)."""
    ids = sorted({i for i in loop_ids if lookup_text(i) is not None})
    if not ids:
        return {}
    # the column positions found once per result (``loops_from_rows``): a row's ``_fields`` builds a key view each
    # time (issue 16: 3 % of a node's CPU during a create burst on PostgreSQL, the replays' and the bridge's reads)
    stmt, params = by_keys(tx.dialect, "loops.find", sa.select(L).where, L.c.id, ids)
    found = loops_from_rows(await tx.execute(stmt, params))
    return {loop.id: loop for loop in found}


@dataclass(frozen=True, slots=True)
class LoopMarks:
    """What a Loop's watchers read of its row: its state, why, its incarnation and when it last changed."""

    id: str
    group_id: str
    state: str
    pause_reason: str | None
    failure: str | None
    exit_code: int | None
    incarnation: int
    updated_ms: int


_MARKS = (L.c.id, L.c.group_id, L.c.state, L.c.pause_reason, L.c.failure, L.c.exit_code, L.c.incarnation,
          L.c.updated_ms)


async def find_loop_marks(tx: Tx, loop_ids: Sequence[str]) -> dict[str, LoopMarks]:
    """``find_loops``'s rows cut to ``LoopMarks`` (issue 16: the control bridge reads every created Loop once; the
    whole row — config, capabilities, checkpoint, 32 columns decoded — was a fifteenth of a node's CPU in a
    PostgreSQL create burst), one statement."""
    ids = sorted({i for i in loop_ids if lookup_text(i) is not None})
    if not ids:
        return {}
    stmt, params = by_keys(tx.dialect, "loops.find_marks", sa.select(*_MARKS).where, L.c.id, ids)
    return {r.id: LoopMarks(r.id, r.group_id, r.state, r.pause_reason, r.failure, r.exit_code, r.incarnation,
                             r.updated_ms) for r in await tx.execute(stmt, params)}


# issue 16 (event → wake): a host call's fenced read of its Loop row also brings the transaction's store-clock
# reading and, for agent.notify, whether its message exists — on PostgreSQL one round trip instead of three
async def find_loop_locked(tx: Tx, loop_id: str, *, message_id: str | None = None,
                           lock: bool = True) -> tuple[Loop | None, bool]:
    """The row locked as ``find_loop(for_update=True)``, read with the store clock (``Tx.clock_column``), and
    whether the message ``message_id`` exists (False without one) — one statement. ``lock=False``: read, not
    locked (a decision whose write is fenced on what it read)."""
    if lookup_text(loop_id) is None:
        return None, False
    columns: list[Any] = [L]
    clock = tx.clock_column()
    if clock is not None:
        columns.append(clock)
    if message_id is not None and lookup_text(message_id) is not None:
        columns.append(sa.exists().where(schema.message.c.id == message_id).label("wakeful_message_exists"))
    row = await tx.first(sa.select(*columns).where(L.c.id == loop_id), for_update=lock)
    if row is None:
        return None, False
    tx.seed_now(row)
    return loop_from_row(row), bool(getattr(row, "wakeful_message_exists", False))


async def get_loop(tx: Tx, loop_id: str, *, for_update: bool = False) -> Loop:
    found = await find_loop(tx, loop_id, for_update=for_update)
    if found is None:
        raise NotFound(f"Loop {shown(loop_id)} not found", resource="loop", id=shown(loop_id))
    return found


async def list_loops(
    tx: Tx,
    *,
    group_id: str | None = None,
    agent_id: str | None = None,
    session_id: str | None = None,
    state: str | None = None,
    limit: int | None = None,
) -> list[Loop]:
    """Loops oldest first (``created_ms``, ``id``), filtered."""
    stmt = sa.select(L).order_by(L.c.created_ms, L.c.id)
    for column, value in (
        (L.c.group_id, group_id),
        (L.c.agent_id, agent_id),
        (L.c.session_id, session_id),
        (L.c.state, state),
    ):
        if value is not None:
            stmt = stmt.where(column == value)
    if limit is not None:
        stmt = stmt.limit(limit)
    return loops_from_rows(await tx.execute(stmt))


# issue 16: a page of ``loops.list`` — a group's Loops in id order after the cursor's id — read through the index
# ``loop_group_id_id (group_id, id)`` (migration 5): the page's rows only, no sort of the whole group per page
def page_query(*, group_id: str, limit: int, after: str | None = None, agent_id: str | None = None,
               state: str | None = None, pause_reason: str | None = None) -> sa.Select[Any]:
    """The statement of one page: up to ``limit`` Loops of ``group_id`` with ``id > after``, in id order."""
    stmt = sa.select(L).where(L.c.group_id == group_id).order_by(L.c.id).limit(limit)
    for column, value in ((L.c.agent_id, agent_id), (L.c.state, state), (L.c.pause_reason, pause_reason)):
        if value is not None:
            stmt = stmt.where(column == value)
    return stmt if after is None else stmt.where(L.c.id > after)


# §5: every durable effect is a conditional write on id (+ incarnation, + state)
async def update_loop(
    tx: Tx,
    loop_id: str,
    *,
    where_incarnation: int | None = None,
    where_state: str | None = None,
    **values: Any,
) -> bool:
    """Set columns (JSON columns take Python values) where the conditions still hold; True when a row matched.

    ``updated_ms`` is set to the store clock.
    """
    stmt = await loop_update(tx, loop_id, where_incarnation=where_incarnation, where_state=where_state, **values)
    result = await tx.execute(stmt)
    return bool(result.rowcount == 1)


async def loop_update(
    tx: Tx,
    loop_id: str,
    *,
    where_incarnation: int | None = None,
    where_state: str | None = None,
    **values: Any,
) -> sa.Update:
    """``update_loop``'s statement, not run (e.g. to go with an insert: ``Tx.insert_if_absent``'s ``along``)."""
    unknown = set(values) - set(L.c.keys())
    if unknown:
        raise ValueError(f"unknown loop columns: {sorted(unknown)}")
    for name in _JSON_COLUMNS:
        if name in values:
            values[name] = (
                None if values[name] is None and name == "checkpoint" else jsontext.encode(values[name])
            )
    stmt = L.update().where(L.c.id == loop_id)
    if where_incarnation is not None:
        stmt = stmt.where(L.c.incarnation == where_incarnation)
    if where_state is not None:
        stmt = stmt.where(L.c.state == where_state)
    return stmt.values(updated_ms=await tx.now_ms(), **values)


# §4.3 step 1: the only place the incarnation rises (requires state = active)
async def begin_incarnation(tx: Tx, loop_id: str, *, node_id: str) -> int | None:
    """Raise the incarnation by one, claim the Loop for ``node_id``; None when the Loop is not active."""
    stmt = (await _raise_incarnation(tx, loop_id, node_id)).returning(L.c.incarnation)
    value = (await tx.execute(stmt)).scalar()
    return None if value is None else int(value)


async def _raise_incarnation(tx: Tx, loop_id: str, node_id: str) -> Any:
    """§4.3 step 1's conditional update of one Loop (the caller names what it returns)."""
    return (L.update().where(L.c.id == loop_id, L.c.state == "active")
            .values(incarnation=L.c.incarnation + 1, node_id=node_id, object_id=None, updated_ms=await tx.now_ms()))


# issue 16 / benchmarks.md §2.2: §4.3 step 1 for many Loops in one statement (a node's start, an adoption after a
# claim): the same conditional update as ``begin_incarnation``, each row's new values returned, so N Loops cost
# one statement, not an update and a read each
async def begin_incarnations(tx: Tx, loop_ids: Sequence[str], *, node_id: str) -> list[Loop]:
    """Raise the incarnation of each active Loop of ``loop_ids`` (at most ``BATCH`` ids), claim them for
    ``node_id``; the rows as they are now, oldest first. Ids that are not active are left out."""
    if not loop_ids:
        return []
    if len(loop_ids) > BATCH:
        raise ValueError(f"at most {BATCH} Loops per statement")
    active: Any = L.c.state == "active"
    if tx.dialect == "postgresql":
        # the rows are found by their ids (the primary key) alone: the state test is written so that no index serves
        # it. With ``id IN (…) AND state = 'active'`` a store without statistics yet (fresh, ANALYZE not run) was
        # planned on the state index — every active Loop's entry and heap page read for each batch of 500 (~0.4 s a
        # batch at N = 10,000, the restart's largest wait on PostgreSQL; 60 ms by the key)
        chosen: Any = L.c.id == sa.any_(sa.bindparam("ids", list(loop_ids), type_=pg_dialect.ARRAY(sa.Text)))
        active = active.is_(True)
    else:
        chosen = L.c.id.in_(padded(list(loop_ids)))
        active = likely(active)  # (SQLite: not walked by the state index, reads.likely)
    stmt = (L.update().where(chosen, active)
            .values(incarnation=L.c.incarnation + 1, node_id=node_id, object_id=None, updated_ms=await tx.now_ms())
            .returning(*L.c))
    rows = loops_from_rows(await tx.execute(stmt))
    rows.sort(key=lambda r: (r.created_ms, r.id))
    return rows


def _attach_many_pg(now: Any) -> Any:
    """PostgreSQL's step 4 for many Loops: the triples as three arrays, one statement text whatever their number
    (one prepared statement per pooled connection), the ids attached returned; ``now``: the time it writes."""
    v = sa.func.unnest(
        sa.bindparam("b_ids", type_=pg_dialect.ARRAY(sa.String)),
        sa.bindparam("b_incarnations", type_=pg_dialect.ARRAY(sa.BigInteger)),
        sa.bindparam("b_objects", type_=pg_dialect.ARRAY(sa.String)),
    ).table_valued("id", "incarnation", "object_id").render_derived(name="v")
    # (the state test by the key alone, as begin_incarnations: no state index on a store without statistics)
    return (L.update().where(L.c.id == v.c.id, L.c.incarnation == v.c.incarnation, (L.c.state == "active").is_(True))
            .values(object_id=v.c.object_id, updated_ms=now).returning(L.c.id))


_ATTACH_MANY_PG = _attach_many_pg(sa.bindparam("b_now"))
# issue 16: with the store clock read in the statement (a transaction that has not read it yet), step 4 is one
# statement, which the node runs without BEGIN and COMMIT (``Store.single``): 1 round trip a batch, not 4
# (an uncorrelated subquery: one reading for the statement, as a transaction's one reading — not one per row)
_ATTACH_MANY_PG_CLOCK = _attach_many_pg(sa.select(sa.literal_column(STORE_MS_SQL)).scalar_subquery())


# step 4 for many Loops: each ``(loop_id, incarnation, object_id)`` attached only where id, incarnation and
# state = active still match; the ids attached. issue 16: a single UPDATE with a CASE of 500 object ids and a
# 500-pair IN cost ~0.1 s of SQLAlchemy statement building a batch, more than the rest of step 4. PostgreSQL: one
# UPDATE joined to the triples as arrays, answering the ids it attached; SQLite: one UPDATE run for every Loop
# (executemany: compiled once, the driver runs the prepared statement per row) whose count of changed rows tells
# when all were attached, and else one read of what it left
async def attach_objects(tx: Tx, objects: Sequence[tuple[str, int, str]]) -> set[str]:
    if not objects:
        return set()
    if len(objects) > BATCH:
        raise ValueError(f"at most {BATCH} Loops per statement")
    if tx.dialect == "postgresql":  # one statement, its clock read in it unless injected or already read
        ids, incarnations, object_ids = (list(column) for column in zip(*objects, strict=True))
        params: dict[str, Any] = {"b_ids": ids, "b_incarnations": incarnations, "b_objects": object_ids}
        if tx.clock_column() is not None:
            return {r.id for r in await tx.execute(_ATTACH_MANY_PG_CLOCK, params)}
        found = await tx.execute(_ATTACH_MANY_PG, {**params, "b_now": await tx.now_ms()})
        return {r.id for r in found}
    now = await tx.now_ms()
    stmt = (
        L.update()
        .where(L.c.id == sa.bindparam("b_id"), L.c.incarnation == sa.bindparam("b_incarnation"),
               L.c.state == "active")
        .values(object_id=sa.bindparam("b_object"), updated_ms=sa.bindparam("b_now"))
    )
    result = await tx.execute(stmt, [{"b_id": i, "b_incarnation": n, "b_object": o, "b_now": now}
                                     for i, n, o in objects])
    wanted = {i: (n, o) for i, n, o in objects}
    # SQLite counts the rows an executemany changed: all of them (the usual case, a burst of creates) needs no read
    if tx.dialect == "sqlite" and result.rowcount == len(wanted) == len(objects):
        return set(wanted)
    # the rows as the update left them (in this transaction: PostgreSQL holds their locks, SQLite the writer's)
    found = await tx.execute(sa.select(L.c.id, L.c.incarnation, L.c.object_id)
                             .where(L.c.id.in_(list(wanted)), likely(L.c.state == "active")))
    return {r.id for r in found if wanted[r.id] == (r.incarnation, r.object_id)}


# PostgreSQL: the batch as three arrays (unnest) in one UPDATE … FROM … RETURNING — one statement for 500 Loops.
# issue 16: executemany ran 500 statements a batch on the server (2 × 10,000 at a restart of N = 10,000, ~4 s of
# the load's wall on a shared server) and a read after them; the conditions per row are the same
# §4.3 step 4: attach only where id, incarnation and state = active still match
async def attach_object(tx: Tx, loop_id: str, incarnation: int, object_id: str) -> bool:
    return await update_loop(
        tx, loop_id, where_incarnation=incarnation, where_state="active", object_id=object_id
    )


# §4.3: ending an incarnation clears object_id only where the incarnation still matches
async def detach_object(tx: Tx, loop_id: str, incarnation: int) -> bool:
    return await update_loop(tx, loop_id, where_incarnation=incarnation, object_id=None)


# the same for many Loops in one statement (a drain ends every incarnation of the node): the ids detached
async def detach_objects(tx: Tx, incarnations: Sequence[tuple[str, int]]) -> set[str]:
    if not incarnations:
        return set()
    if len(incarnations) > BATCH:
        raise ValueError(f"at most {BATCH} Loops per statement")
    now = await tx.now_ms()
    if tx.dialect == "postgresql":
        stmt = (L.update().where(sa.tuple_(L.c.id, L.c.incarnation).in_(list(incarnations)))
                .values(object_id=None, updated_ms=now).returning(L.c.id))
        return {r.id for r in await tx.execute(stmt)}
    # SQLite: a row value IN (VALUES …) is planned as a scan of every Loop; the pairs as one JSON parameter
    # (store/each.py) search the key
    return {r.id for r in await tx.execute(_DETACH_SQLITE, {"pairs": json_list(list(incarnations)), "now": now})}


_DETACH_SQLITE = (L.update().where(sa.tuple_(L.c.id, L.c.incarnation).in_(json_rows("pairs", 0, 1)))
                  .values(object_id=None, updated_ms=sa.bindparam("now", type_=sa.BigInteger)).returning(L.c.id))


# §4.2 row 15: the row and everything hanging off it is removed (events, logs, transitions cascade)
async def delete_loop(tx: Tx, loop_id: str) -> bool:
    for table in (schema.loop_event, LOG, TR, schema.loop_webhook_verifier):
        await tx.execute(table.delete().where(table.c.loop_id == loop_id))
    result = await tx.execute(L.delete().where(L.c.id == loop_id))
    return bool(result.rowcount == 1)


async def _trim(tx: Tx, table: sa.Table, loop_id: str, keep: int) -> None:
    cutoff = (
        sa.select(table.c.seq)
        .where(table.c.loop_id == loop_id)
        .order_by(table.c.seq.desc())
        .offset(keep - 1)
        .limit(1)
        .scalar_subquery()
    )
    await tx.execute(table.delete().where(table.c.loop_id == loop_id, table.c.seq < cutoff))


# §2.7: transitions, newest 100 per Loop kept
async def add_transition(
    tx: Tx,
    loop_id: str,
    *,
    from_state: str | None,
    from_reason: str | None,
    to_state: str,
    to_reason: str | None,
    incarnation: int,
    actor: str,
    detail: str | None = None,
) -> None:
    await tx.execute(
        TR.insert().values(
            loop_id=loop_id,
            at_ms=await tx.now_ms(),
            from_state=from_state,
            from_reason=from_reason,
            to_state=to_state,
            to_reason=to_reason,
            incarnation=incarnation,
            actor=actor,
            detail=None if detail is None else detail[:2000],
        )
    )
    await _trim(tx, TR, loop_id, KEEP_TRANSITIONS)


async def list_transitions(tx: Tx, loop_id: str, *, limit: int = KEEP_TRANSITIONS) -> list[Transition]:
    """Newest ``limit`` transitions, oldest first."""
    stmt = sa.select(TR).where(TR.c.loop_id == loop_id).order_by(TR.c.seq.desc()).limit(limit)
    rows = list(await tx.execute(stmt))
    return [Transition(**{n: getattr(r, n) for n in Transition.__dataclass_fields__}) for r in reversed(rows)]


# §2.7: log lines (≤ 1024 chars), newest 200 per Loop kept
async def append_logs(tx: Tx, loop_id: str, lines: Sequence[LogLine]) -> None:
    if not lines:
        return
    rows = [
        {
            "loop_id": loop_id,
            "at_ms": ln.at_ms,
            "incarnation": ln.incarnation,
            "source": ln.source,
            "text": ln.text[:MAX_LOG_CHARS],
        }
        for ln in lines[-KEEP_LOGS:]
    ]
    await tx.execute(LOG.insert(), rows)
    await _trim(tx, LOG, loop_id, KEEP_LOGS)


# issue 16: the node's log flush for many Loops at once — one insert of every line and one trim per ``BATCH``
# Loops, not an insert and a trim per Loop (a start of N Loops that each log a line flushed 3 N statements)
async def append_logs_many(tx: Tx, lines: Mapping[str, Sequence[LogLine]]) -> None:
    loop_ids = [loop_id for loop_id, some in lines.items() if some]
    for start in range(0, len(loop_ids), BATCH):
        chunk = loop_ids[start:start + BATCH]
        rows = [
            {"loop_id": loop_id, "at_ms": ln.at_ms, "incarnation": ln.incarnation, "source": ln.source,
             "text": ln.text[:MAX_LOG_CHARS]}
            for loop_id in chunk for ln in lines[loop_id][-KEEP_LOGS:]
        ]
        await tx.execute(LOG.insert(), rows)
        newer = LOG.alias("newer")
        cutoff = (
            sa.select(newer.c.seq).where(newer.c.loop_id == LOG.c.loop_id)
            .order_by(newer.c.seq.desc()).offset(KEEP_LOGS - 1).limit(1).scalar_subquery()
        )
        await tx.execute(LOG.delete().where(LOG.c.loop_id.in_(chunk), LOG.c.seq < cutoff))


async def list_logs(
    tx: Tx, loop_id: str, *, limit: int = KEEP_LOGS, after_seq: int | None = None
) -> list[LogLine]:
    """Stored lines oldest first (the newest ``limit``; with ``after_seq`` only later ones)."""
    stmt = sa.select(LOG).where(LOG.c.loop_id == loop_id).order_by(LOG.c.seq.desc()).limit(limit)
    if after_seq is not None:
        stmt = stmt.where(LOG.c.seq > after_seq)
    rows = list(await tx.execute(stmt))
    return [LogLine(r.at_ms, r.incarnation, r.source, r.text, r.seq) for r in reversed(rows)]


# §2.7: lines not persisted because of the rate bound are counted
async def add_dropped_logs(tx: Tx, loop_id: str, count: int) -> None:
    if count > 0:
        await tx.execute(L.update().where(L.c.id == loop_id).values(dropped_logs=L.c.dropped_logs + count))
